"""The ``cron`` tool against a real scheduler service (in-process, real nats-server and
PostgreSQL): outside the owner's standing (docs/trust.md) ``list``, ``remove`` and ``run`` see
only the jobs of the caller's own session tree; another conversation's job reads exactly like
one that does not exist. The owner's standing sees every job of its agent, as before."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import nats
import pytest

from switchboard import bus, rpc
from switchboard.trust import Standing
from switchboard.v1 import messages_pb2, scheduler_pb2
from switchboard_agent.outbound.publisher import OutboundPublisher
from switchboard_agent.tools.client import CallRequest, CallResult
from switchboard_agent.tools.cron import CronTool, visible
from switchboard_agent.tools.local import LocalContext, LocalTools
from tests.support.scheduler import RunningScheduler, scheduler_service

SUBJECTS = bus.Subjects()
OWNER_DM, USER_DM, GROUP = "main:telegram:1", "main:telegram:2", "main:telegram:group:-3"


@pytest.fixture
async def cron(nats_url: str, database_url: str, tmp_path: Path) -> AsyncIterator[LocalTools]:
    nc = await nats.connect(nats_url)
    await bus.ensure_streams(nc.jetstream(), SUBJECTS)
    async with scheduler_service(nats_url, database_url, tmp_path) as sched:
        channel = _channel(sched)
        try:
            yield LocalTools([CronTool(channel, OutboundPublisher(nc.jetstream(), SUBJECTS))])
        finally:
            await channel.close()
            await nc.close()


def _channel(sched: RunningScheduler) -> grpc.aio.Channel:
    s = sched.settings
    return rpc.channel(f"127.0.0.1:{s.scheduler_grpc_port}", s.service_token.get_secret_value())


async def act(tools: LocalTools, key: str, standing: Standing, **args: object) -> CallResult:
    origin = messages_pb2.LaneItem(session_key=key, agent="main")
    ctx = LocalContext("run_c", key, "main", origin, standing)
    [result] = await tools.run_all(ctx, [CallRequest("c1", "cron", dict(args))])
    return result


async def test_outside_the_owners_standing_only_the_own_trees_jobs(cron: LocalTools) -> None:
    for key, standing, name in [
        (OWNER_DM, Standing.OWNER, "owners-job"),
        (USER_DM, Standing.PERSONAL, "persons-job"),
        (GROUP, Standing.GROUP, "groups-job"),
    ]:
        added = await act(cron, key, standing, action="add", name=name, message="x", at="+10h")
        assert not added.is_error, added.content

    person = await act(cron, USER_DM, Standing.PERSONAL, action="list")
    assert person.content.startswith("persons-job: ") and person.details == {"jobs": 1}
    group = await act(cron, GROUP, Standing.GROUP, action="list")
    assert group.content.startswith("groups-job: ") and group.details == {"jobs": 1}
    owner = await act(cron, OWNER_DM, Standing.OWNER, action="list")
    assert owner.details == {"jobs": 3}

    for action in ("remove", "run"):
        hidden = await act(cron, USER_DM, Standing.PERSONAL, action=action, name="owners-job")
        missing = await act(cron, USER_DM, Standing.PERSONAL, action=action, name="no-such-job")
        assert hidden.is_error and hidden.details == {"error": "not_found"}
        assert hidden.content == "cron: no job named 'owners-job'"
        assert missing.content == "cron: no job named 'no-such-job'"
    # A sub-agent of the person's DM is in its tree.
    sub = await act(cron, f"{USER_DM}:sub:abc", Standing.PERSONAL, action="list")
    assert sub.details == {"jobs": 1}
    removed = await act(cron, USER_DM, Standing.PERSONAL, action="remove", name="persons-job")
    assert not removed.is_error and removed.content == "removed job persons-job"
    # The owner's job is still there; the owner may remove any job of its agent.
    assert (await act(cron, OWNER_DM, Standing.OWNER, action="list")).details == {"jobs": 2}
    gone = await act(cron, OWNER_DM, Standing.OWNER, action="remove", name="groups-job")
    assert not gone.is_error


def test_visible_is_the_agents_and_the_trees() -> None:
    def ctx(key: str, standing: Standing) -> LocalContext:
        return LocalContext("r", key, "main", messages_pb2.LaneItem(), standing)

    job = scheduler_pb2.Job(name="j", agent="main", session_key=f"{OWNER_DM}:sub:x")
    assert visible(ctx(OWNER_DM, Standing.PERSONAL), job)
    assert not visible(ctx(USER_DM, Standing.PERSONAL), job)
    assert visible(ctx(USER_DM, Standing.OWNER), job)
    other_agent = scheduler_pb2.Job(name="j", agent="ops", session_key=OWNER_DM)
    assert not visible(ctx(OWNER_DM, Standing.OWNER), other_agent)
