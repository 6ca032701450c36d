"""DM pairing end to end: every service as a real process under the default ``pairing`` policy.
An unknown sender's message runs nothing and its chat gets a code (an OUTBOUND part); the
operator sees it with ``switchboard pairing list``, approves it with ``switchboard pairing
approve``; the sender's next message runs and is answered."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest

from switchboard import bus
from switchboard.v1 import messages_pb2
from tests.fakes.llm import text_only
from tests.support.services import ServiceProcesses, with_fake_model
from tests.support.streams import outbound_parts

SUBJECTS = bus.Subjects()


@pytest.fixture
def services(tmp_path: Path, nats_url: str, database_url: str) -> Iterator[ServiceProcesses]:
    env = {"SB_DM_POLICY": "pairing"}  # the default, which with_fake_model opens for others
    with with_fake_model(tmp_path, nats_url, database_url, text_only("hello, friend"), env) as p:
        yield p


def dm(message_id: str) -> messages_pb2.InboundMessage:
    return messages_pb2.InboundMessage(
        channel="telegram",
        account="default",
        sender="4242",
        chat=messages_pb2.ChatRef(id="4242", type="direct"),
        text="hi there",
        message_id=message_id,
        received_at_ms=int(time.time() * 1000),
    )


def cli(procs: ServiceProcesses, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("SB_")},
        "SB_GATEWAY_URL": procs.url,
        "SB_GATEWAY_TOKEN": procs.token,
        "SB_HOME": str(procs.home),
    }
    return subprocess.run(
        [sys.executable, "-m", "switchboard.cli.main", "pairing", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


async def parts_for(
    url: str, count: int, timeout: float = 60.0
) -> list[messages_pb2.OutboundMessage]:
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        deadline = time.monotonic() + timeout
        while True:
            parts = [p for _, p in await outbound_parts(js)]
            if len(parts) >= count or time.monotonic() > deadline:
                return parts
            await asyncio.sleep(0.1)
    finally:
        await nc.close()


async def publish(url: str, message: messages_pb2.InboundMessage) -> None:
    nc = await nats.connect(url)
    try:
        msg_id = f"telegram:default:{message.message_id}"
        await bus.js_publish(nc.jetstream(), SUBJECTS.inbound("telegram"), message, msg_id=msg_id)
    finally:
        await nc.close()


def test_pairing_code_then_approval_then_the_next_message_runs(
    services: ServiceProcesses,
) -> None:
    llm = services.llm  # type: ignore[attr-defined]
    asyncio.run(publish(services.nats_url, dm("p-1")))
    [code_part] = asyncio.run(parts_for(services.nats_url, 1))
    assert code_part.chat.id == "4242" and "pairing code" in code_part.text

    listed = cli(services, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    [request] = json.loads(listed.stdout)
    assert (request["channel"], request["sender"]) == ("telegram", "4242")
    assert request["code"] in code_part.text
    assert llm.calls == []  # refused: no run

    wrong = cli(services, "approve", "telegram", "ZZZZZZZZ")
    assert wrong.returncode == 1 and "404" in wrong.stderr

    approved = cli(services, "approve", "telegram", request["code"])
    assert approved.returncode == 0, approved.stderr
    assert "approved: sender 4242 on telegram" in approved.stdout
    assert json.loads(cli(services, "list", "--json").stdout) == []

    asyncio.run(publish(services.nats_url, dm("p-2")))
    parts = asyncio.run(parts_for(services.nats_url, 2))
    assert [p.text for p in parts[1:]] == ["hello, friend"]
    assert len(llm.calls) == 1
