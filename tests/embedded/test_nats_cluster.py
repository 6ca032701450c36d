"""NATS as a three-node cluster on loopback (switchboard.natscluster; ``switchboard up
--nats-cluster 3``), the streams at three replicas: a node dies (SIGKILL, the stream's leader
included) and publishing and consuming go on through the others; the node comes back on its
ports with its store and catches up; the whole system keeps answering chats through it."""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import signal
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import httpx
import nats
import psutil
import pytest
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext

from switchboard import bus, natsauth
from switchboard.embedded import NatsServer
from switchboard.natscluster import NatsCluster
from tests.fakes.llm import FakeLLM, tool_then_text
from tests.support.stack import start_stack, stop_stack

SUBJECTS = bus.Subjects()
KV_STREAMS = [f"KV_{b}" for b in SUBJECTS.buckets()]
STREAMS = [c.name or "" for c in bus.stream_configs(SUBJECTS)] + KV_STREAMS


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[NatsCluster]:
    """Three nodes with a NATS user per service, stopped (every process gone) afterwards."""
    credentials = natsauth.Credentials.derive("p" + secrets.token_hex(18))
    nodes = NatsCluster(tmp_path / "nats", 3, credentials=credentials)
    nodes.start()
    try:
        yield nodes
    finally:
        pids = [p for p in nodes.pids if p is not None]
        nodes.stop()
        assert not [p for p in pids if _runs(p)], "a NATS node outlived stop()"


def _runs(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


async def eventually(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 60) -> None:
    """Wait for ``check`` (generous bound: a loaded 2-core machine elects leaders slowly)."""
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.2)


async def admin(cluster: NatsCluster) -> NATS:
    """The admin, through every node's URL (switchboard.bus.connect splits the list)."""
    assert cluster.credentials is not None
    password = cluster.credentials.passwords[natsauth.ADMIN]
    return await bus.connect(cluster.url, "cluster-test", bus.Login(natsauth.ADMIN, password))


async def publish(js: JetStreamContext, subject: str, payload: bytes, deadline: float) -> None:
    """Publish until the stream acks (while a new leader is elected a publish may time out or
    find no responder, and a client whose node died publishes into its reconnect; the message
    id makes a retry of an acked publish a duplicate)."""
    while True:
        try:
            await js.publish(subject, payload, headers={bus.MSG_ID: payload.decode()}, timeout=2)
            return
        except nats.errors.Error:  # timeout, no responders, no stream response, API error
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def consume(sub: JetStreamContext.PullSubscription, got: set[bytes], want: int) -> None:
    """Fetch and ack until ``got`` holds ``want`` distinct payloads (a redelivery of one whose
    ack was lost in the failover is counted once)."""
    while len(got) < want:
        try:
            msgs = await sub.fetch(10, timeout=2)
        except nats.errors.Error:  # timeout, or a fetch cut by the failover
            continue
        for msg in msgs:
            got.add(msg.data)
            await msg.ack()


async def test_streams_at_three_replicas_survive_their_leader_killed_and_it_catches_up(
    cluster: NatsCluster,
) -> None:
    nc = await admin(cluster)
    try:
        js = nc.jetstream()
        await bus.ensure_streams(js, SUBJECTS, replicas=3)
        for name in STREAMS:  # every stream and KV bucket on all three nodes
            info = await js.stream_info(name)
            assert info.config.num_replicas == 3, name
            assert info.cluster is not None and len(info.cluster.replicas or []) == 2, name

        deadline = time.monotonic() + 120
        payloads = [f"m-{i}".encode() for i in range(60)]
        for payload in payloads[:30]:
            await publish(js, SUBJECTS.inbound("api"), payload, deadline)
        sub = await bus.durable_pull(js, "INBOUND", "cluster-test", "sb.inbound.>", ack_wait=5)
        got: set[bytes] = set()
        await asyncio.wait_for(consume(sub, got, 10), 60)

        leader_name = (await js.stream_info("INBOUND")).cluster.leader  # type: ignore[union-attr]
        leader = cluster.index_of(leader_name or "")
        killed = cluster.nodes[leader].pid
        assert killed is not None
        cluster.kill_node(leader)
        assert not _runs(killed)

        # The others elect a new leader; publishing and consuming go on through them.
        for payload in payloads[30:]:
            await publish(js, SUBJECTS.inbound("api"), payload, deadline)
        await asyncio.wait_for(consume(sub, got, 60), 90)
        assert got == set(payloads)
        info = await js.stream_info("INBOUND")
        assert info.state.messages == 60 and info.cluster is not None
        assert info.cluster.leader != leader_name

        # Back on its ports with its store; it catches up and can lead again.
        await asyncio.to_thread(cluster.restart_node, leader)
        assert cluster.nodes[leader].pid not in (None, killed)

        async def caught_up() -> bool:
            peers = (await js.stream_info("INBOUND")).cluster.replicas or []  # type: ignore[union-attr]
            mine = [p for p in peers if p.name == leader_name]
            return bool(mine) and bool(mine[0].current) and not mine[0].offline

        await eventually(caught_up, f"{leader_name} to catch up on INBOUND")
        await lead(nc, js, "INBOUND", leader_name or "")
        # Every message read from the restarted node, now the leader (a message get is
        # answered by the stream's leader).
        for seq in range(1, 61):
            assert (await js.get_msg("INBOUND", seq)).data == payloads[seq - 1]
    finally:
        await nc.close()
    assert_route_password_kept_out_of_logs(cluster)


def assert_route_password_kept_out_of_logs(cluster: NatsCluster) -> None:
    """The route password is only in each node's configuration file (mode 0600); no node logged
    it, nor the admin's password, through a kill and a restart."""
    assert cluster.credentials is not None
    secrets_ = {cluster.credentials.passwords[natsauth.ADMIN]}
    for node in cluster.nodes:
        config = node.store_dir / "auth.conf"
        assert config.stat().st_mode & 0o777 == 0o600
        secrets_ |= set(re.findall(r'password: "(p[0-9a-f]+)"', config.read_text()))
    assert len(secrets_) == 2, secrets_  # the admin's and the one route password
    logs = "".join(node.log_file.read_text() for node in cluster.nodes)
    assert "Route connection created" in logs  # the logs are the nodes' own
    assert not [s for s in secrets_ if s in logs]


async def lead(nc: NATS, js: JetStreamContext, stream: str, server: str) -> None:
    """Make ``server`` the leader of ``stream`` (step-downs preferring it)."""

    async def leads() -> bool:
        info = await js.stream_info(stream)
        if info.cluster is not None and info.cluster.leader == server:
            return True
        request = json.dumps({"placement": {"preferred": server}}).encode()
        await nc.request(f"$JS.API.STREAM.LEADER.STEPDOWN.{stream}", request, timeout=5)
        await asyncio.sleep(1)
        return False

    await eventually(leads, f"{server} to lead {stream}")


async def test_streams_made_at_one_replica_move_to_three_keeping_their_messages(
    cluster: NatsCluster,
) -> None:
    """SB_NATS_REPLICAS raised on a system that ran with 1: every stream and bucket is updated
    in place, nothing lost."""
    nc = await admin(cluster)
    try:
        js = nc.jetstream()
        await bus.ensure_streams(js, SUBJECTS, replicas=1)
        assert {(await js.stream_info(n)).config.num_replicas for n in STREAMS} == {1}
        for i in range(5):
            await js.publish(SUBJECTS.inbound("api"), f"before-{i}".encode())
        await (await js.key_value(SUBJECTS.pairing_bucket)).put("kept", b"yes")

        await bus.ensure_streams(js, SUBJECTS, replicas=3)
        for name in STREAMS:
            assert (await js.stream_info(name)).config.num_replicas == 3, name

        async def three_peers() -> bool:
            infos = [await js.stream_info(n) for n in STREAMS]
            return all(i.cluster and len(i.cluster.replicas or []) == 2 for i in infos)

        await eventually(three_peers, "every stream on three nodes")
        assert (await js.stream_info("INBOUND")).state.messages == 5
        assert (await (await js.key_value(SUBJECTS.pairing_bucket)).get("kept")).value == b"yes"
        await bus.ensure_streams(js, SUBJECTS, replicas=3)  # a second start: nothing to change
    finally:
        await nc.close()


async def test_more_replicas_than_servers_fails_naming_the_setting(
    nats_server: NatsServer,
) -> None:
    nc = await nats.connect(nats_server.admin_url)
    try:
        with pytest.raises(bus.StreamSetupError, match="SB_NATS_REPLICAS") as caught:
            await bus.ensure_streams(nc.jetstream(), SUBJECTS, replicas=3)
        assert "not supported in non-clustered mode" in str(caught.value)
    finally:
        await nc.close()


def node_ports(pid: int) -> int:
    """A launcher's NATS node's client port, from its command line (``-p PORT``)."""
    argv = psutil.Process(pid).cmdline()
    return int(argv[argv.index("-p") + 1])


def test_switchboard_up_with_a_nats_cluster_answers_through_a_killed_node(
    tmp_path: Path,
) -> None:
    """`switchboard up --nats-cluster 3`: three nodes (run/nats-1.pid ..), the streams at three
    replicas; a chat is answered, INBOUND's leader is SIGKILLed, the next chat is answered too,
    the launcher starts the node again, and nothing is left running after a stop."""
    with FakeLLM(tool_then_text("get_time", {"timezone": "UTC"})) as llm:
        env = {"OPENAI_API_KEY": "sk-test-fake", "OPENAI_BASE_URL": f"{llm.base_url}/v1"}
        stack = start_stack(tmp_path / "home", env, timeout=120, args=["--nats-cluster", "3"])
        try:
            run_dir = stack.home / "run"
            names = [f"nats-{i}" for i in (1, 2, 3)]
            assert all((run_dir / f"{n}.pid").exists() for n in names)
            assert not (run_dir / "nats.pid").exists()
            pids = {n: stack.pids()[n] for n in names}
            url = ",".join(f"nats://127.0.0.1:{node_ports(p)}" for p in pids.values())
            headers = {"Authorization": f"Bearer {stack.token}"}

            def chat(text: str) -> str:
                """Answered (200) at the first try: while INBOUND elects a new leader the
                gateway offers the message again (SB_PUBLISH_RETRY_S) instead of answering
                503 bus_unavailable."""
                body = {"model": "switchboard", "messages": [{"role": "user", "content": text}]}
                body["user"] = "cluster-chat"
                r = httpx.post(
                    f"{stack.url}/v1/chat/completions", json=body, headers=headers, timeout=120
                )
                assert r.status_code == 200, r.text
                return str(r.json()["choices"][0]["message"]["content"])

            assert chat("first").startswith("Tool said: ")
            leader = asyncio.run(inbound_leader(stack.admin_nats_url(url)))
            victim = f"nats-{int(leader.rsplit('-', 1)[1])}"
            os.kill(pids[victim], signal.SIGKILL)
            assert chat("second, with a node down").startswith("Tool said: ")

            deadline = time.monotonic() + 60  # the launcher starts the node again
            while stack.pids().get(victim) in (None, pids[victim]):
                assert time.monotonic() < deadline, f"{victim} not restarted:\n{stack.log()}"
                time.sleep(0.2)
            assert f"NATS node {leader} exited; starting it again" in stack.log()
            assert _runs(stack.pids()[victim])
            assert chat("third, the node back").startswith("Tool said: ")
            all_pids = [*stack.pids().values()]
        finally:
            left = stop_stack(stack)
        assert not left, f"processes left behind: {left}\n{stack.log()}"
        assert not [p for p in all_pids if _runs(p)]
        assert list((stack.home / "run").glob("*.pid")) == []


async def inbound_leader(admin_url: str) -> str:
    """INBOUND's leader, and a check that the router made it at three replicas."""
    nc = await nats.connect(servers=bus.servers(admin_url))
    try:
        info = await nc.jetstream().stream_info("INBOUND")
        assert info.config.num_replicas == 3
        assert info.cluster is not None and info.cluster.leader
        return info.cluster.leader
    finally:
        await nc.close()
