"""A router in-process against a real nats-server: ``async with router(nats_url, **env) as r``
runs ``serve`` with those settings (its gRPC RouterAdmin on a free port, ``r.admin``) and gives a
JetStream context (``r.js``) to publish on INBOUND as the gateway would; ``route`` publishes and
returns what reached the LANES stream.

(Not a conftest.py: see services/gateway/tests/gateway_harness.py.)
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import grpc
import nats
from nats.js import JetStreamContext
from prometheus_client import REGISTRY

from switchboard import bus, rpc
from switchboard.embedded import free_port
from switchboard.runtime import service_ready
from switchboard.sessions import inbound_msg_id
from switchboard.v1 import messages_pb2, router_pb2_grpc
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


def group(
    channel: str, message_id: str, mentions_bot: bool, sender: str = "U1", chat: str = "C9"
) -> messages_pb2.InboundMessage:
    return messages_pb2.InboundMessage(
        channel=channel,
        account="default",
        sender=sender,
        chat=messages_pb2.ChatRef(id=chat, type="group"),
        text="hello all",
        message_id=message_id,
        mentions_bot=mentions_bot,
    )


@dataclass
class RunningRouter:
    js: JetStreamContext
    admin: router_pb2_grpc.RouterAdminStub
    admin_target: str


@asynccontextmanager
async def router(nats_url: str, **environ: str) -> AsyncIterator[RunningRouter]:
    """A router with the settings of ``environ``, ready."""
    port = free_port()
    token = "router-test-" + os.urandom(12).hex()
    env = {
        "SB_NATS_URL": nats_url,
        "SB_OPS_HOST": "127.0.0.1",
        "SB_SERVICE_TOKEN": token,
        "SB_ROUTER_GRPC_PORT": str(port),
        **environ,
    }
    settings = RouterSettings.from_environ(env)
    stop = asyncio.Event()
    task = asyncio.create_task(serve(settings, stop))
    nc = await nats.connect(nats_url)
    channel: grpc.aio.Channel = rpc.channel(f"127.0.0.1:{port}", token)
    try:

        async def ready() -> bool:
            assert not task.done(), task
            try:
                return await service_ready(nc, SUBJECTS, "router", timeout=1)
            except Exception:
                return False

        await eventually(ready)
        yield RunningRouter(
            nc.jetstream(), router_pb2_grpc.RouterAdminStub(channel), f"127.0.0.1:{port}"
        )
    finally:
        await channel.close()
        await nc.close()
        stop.set()
        await asyncio.wait_for(task, 30)


async def route(js: JetStreamContext, *messages: messages_pb2.InboundMessage) -> set[str]:
    """Publish ``messages`` on INBOUND, wait until the router has handled every one, and return
    the message ids of those that reached a lane."""
    last = 0
    for m in messages:
        msg_id = inbound_msg_id(m.channel, m.account, m.message_id)
        last = await bus.js_publish(js, SUBJECTS.inbound(m.channel), m, msg_id=msg_id)

    async def handled() -> bool:
        # The ack floor, not only "nothing pending": the server counts a stored message as
        # pending for the consumer a moment after the publish is acked, so an early look
        # can see 0 pending and 0 unacked for a message the router has not finished.
        info = await js.consumer_info(SUBJECTS.stream("INBOUND"), "router")
        done = info.ack_floor is not None and (info.ack_floor.stream_seq or 0) >= last
        return done and info.num_pending == 0 and info.num_ack_pending == 0

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
