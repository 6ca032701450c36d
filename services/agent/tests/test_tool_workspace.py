"""Which workspace a run's executor calls use (docs/trust.md): the agent's own for the owner's
standing (``workspace_session`` empty, ``SB_WORKSPACE_SCOPE`` decides), the root conversation's
private one for anyone else: checked on the ToolCall the dispatcher puts on the real TOOLS
stream."""

from __future__ import annotations

import asyncio
import contextlib

import nats
import pytest
from nats.js import JetStreamContext

from switchboard import bus
from switchboard.trust import Standing
from switchboard.v1 import messages_pb2
from switchboard_agent.tools.client import CallRequest, ToolDispatcher
from tests.support.streams import stored

SUBJECTS = bus.Subjects()


async def published_call(
    js: JetStreamContext, dispatcher: ToolDispatcher, key: str, standing: Standing
) -> messages_pb2.ToolCall:
    run_id = f"run_{standing}_{len(key)}"
    task = asyncio.create_task(
        dispatcher.run_all(
            run_id, key, "main", [CallRequest("c1", "read", {"path": "x"})], standing=standing
        )
    )
    try:
        async with asyncio.timeout(10):
            while True:
                calls = [
                    s.message
                    for s in await stored(js, SUBJECTS.stream("TOOLS"), messages_pb2.ToolCall)
                    if s.message.run_id == run_id
                ]
                if calls:
                    return calls[0]
                await asyncio.sleep(0.05)
    finally:
        task.cancel()  # no executor answers here: the call itself is what is looked at
        with contextlib.suppress(asyncio.CancelledError):
            await task


@pytest.mark.parametrize(
    ("key", "standing", "workspace"),
    [
        ("main:telegram:1", Standing.OWNER, ""),
        ("main:telegram:1:sub:abc", Standing.OWNER, ""),
        ("main:telegram:2", Standing.PERSONAL, "main:telegram:2"),
        ("main:telegram:2:sub:abc:sub:d", Standing.PERSONAL, "main:telegram:2"),
        ("main:telegram:group:-5", Standing.GROUP, "main:telegram:group:-5"),
        ("cron:daily", Standing.PERSONAL, "cron:daily"),
    ],
)
async def test_the_call_names_the_private_workspace_outside_the_owners_standing(
    nats_url: str, key: str, standing: Standing, workspace: str
) -> None:
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        await bus.ensure_streams(js, SUBJECTS)
        call = await published_call(js, ToolDispatcher(nc, js, SUBJECTS, 5.0), key, standing)
        assert call.session_key == key and call.workspace_session == workspace
    finally:
        await nc.close()
