"""Inbound security against a real nats-server: a router runs in-process, messages are
published on INBOUND as the gateway would, and what reached the LANES stream is read back."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import nats
import pytest
from nats.js import JetStreamContext
from prometheus_client import REGISTRY

from switchboard import bus
from switchboard.runtime import service_ready
from switchboard.sessions import inbound_msg_id
from switchboard.v1 import messages_pb2
from switchboard_router.config import RouterSettings
from switchboard_router.server import serve

SUBJECTS = bus.Subjects()


async def eventually(predicate: Callable[[], Awaitable[bool]], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not await predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


def refused(channel: str, reason: str) -> float:
    labels = {"channel": channel, "reason": reason}
    return REGISTRY.get_sample_value("sb_router_refused_total", labels) or 0.0


def dm(channel: str, sender: str, message_id: str) -> messages_pb2.InboundMessage:
    return messages_pb2.InboundMessage(
        channel=channel,
        account="default",
        sender=sender,
        chat=messages_pb2.ChatRef(id=sender, type="direct"),
        text="hello",
        message_id=message_id,
    )


def group(channel: str, message_id: str, mentions_bot: bool) -> messages_pb2.InboundMessage:
    return messages_pb2.InboundMessage(
        channel=channel,
        account="default",
        sender="U1",
        chat=messages_pb2.ChatRef(id="C9", type="group"),
        text="hello all",
        message_id=message_id,
        mentions_bot=mentions_bot,
    )


@asynccontextmanager
async def router(nats_url: str, **environ: str) -> AsyncIterator[JetStreamContext]:
    """A router with the settings of ``environ``, ready; a JetStream context to publish with."""
    env = {"SB_NATS_URL": nats_url, "SB_OPS_HOST": "127.0.0.1", **environ}
    settings = RouterSettings.from_environ(env)
    stop = asyncio.Event()
    task = asyncio.create_task(serve(settings, stop))
    nc = await nats.connect(nats_url)
    try:

        async def ready() -> bool:
            assert not task.done(), task
            try:
                return await service_ready(nc, SUBJECTS, "router", timeout=1)
            except Exception:
                return False

        await eventually(ready)
        yield nc.jetstream()
    finally:
        await nc.close()
        stop.set()
        await asyncio.wait_for(task, 30)


async def route(js: JetStreamContext, *messages: messages_pb2.InboundMessage) -> set[str]:
    """Publish ``messages`` on INBOUND, wait until the router has handled every one, and return
    the message ids of those that reached a lane."""
    for m in messages:
        msg_id = inbound_msg_id(m.channel, m.account, m.message_id)
        await bus.js_publish(js, SUBJECTS.inbound(m.channel), m, msg_id=msg_id)

    async def handled() -> bool:
        info = await js.consumer_info(SUBJECTS.stream("INBOUND"), "router")
        return info.num_pending == 0 and info.num_ack_pending == 0

    await eventually(handled)
    lanes = await js.stream_info(SUBJECTS.stream("LANES"))
    if not lanes.state.messages:
        return set()
    sub = await js.pull_subscribe(SUBJECTS.lanes(), stream=SUBJECTS.stream("LANES"))
    found: set[str] = set()
    while len(found) < lanes.state.messages:
        for raw in await sub.fetch(lanes.state.messages, timeout=5):
            item = messages_pb2.LaneItem.FromString(raw.data)
            found.add(item.message.message_id)
            await raw.ack()
    await sub.unsubscribe()
    return found


@pytest.mark.parametrize(
    ("environ", "reason"),
    [
        ({"SB_DM_POLICY": "open"}, ""),
        ({"SB_DM_POLICY": "open", "SB_TELEGRAM_DM_POLICY": "allowlist"}, "not_allowed"),
        ({}, "pairing_required"),  # pairing, the default: for now an allowlist
    ],
    ids=["open", "allowlist", "pairing"],
)
async def test_dm_policy_admits_allowed_senders_only(
    nats_url: str, environ: dict[str, str], reason: str
) -> None:
    before = refused("telegram", reason)
    allow = {"SB_TELEGRAM_ALLOW_FROM": '["42", 7]'}
    async with router(nats_url, **environ, **allow) as js:
        reached = await route(
            js, dm("telegram", "42", "m-allowed"), dm("telegram", "666", "m-unknown")
        )
    if not reason:
        assert reached == {"m-allowed", "m-unknown"}
        return
    assert reached == {"m-allowed"}
    assert refused("telegram", reason) == before + 1


@pytest.mark.parametrize("channel", ["api", "openai", "webchat", "hooks"])
async def test_authenticated_channels_always_pass(nats_url: str, channel: str) -> None:
    async with router(nats_url, SB_DM_POLICY="allowlist") as js:
        reached = await route(js, dm(channel, "anyone", "m-1"), group(channel, "m-2", False))
    assert reached == {"m-1", "m-2"}


async def test_group_without_mention_is_refused_under_mention(nats_url: str) -> None:
    before = refused("slack", "not_mentioned")
    async with router(nats_url) as js:  # mention, the default; the DM policy is not asked
        reached = await route(js, group("slack", "g-plain", False), group("slack", "g-at", True))
    assert reached == {"g-at"}
    assert refused("slack", "not_mentioned") == before + 1


async def test_every_group_message_passes_under_always(nats_url: str) -> None:
    before = refused("slack", "not_mentioned")
    async with router(nats_url, SB_SLACK_GROUP_ACTIVATION="always") as js:
        reached = await route(js, group("slack", "g-plain", False), group("slack", "g-at", True))
    assert reached == {"g-plain", "g-at"}
    assert refused("slack", "not_mentioned") == before
