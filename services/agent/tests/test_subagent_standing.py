"""The items the agent appends itself carry a role and a standing (docs/trust.md), against a real
nats-server (the LANES stream) and PostgreSQL (the sub-agents table): a sub-agent's task has
role ``subagent`` and its parent run's standing; a background child's announcement into the
parent copies the parent's origin item (its role kept) and carries the child's standing; and
whatever the items' text says, the run they start gets no more than that."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import nats
import pytest
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext

from switchboard import bus
from switchboard.sessions import session_token
from switchboard.store import create_pool, migrate
from switchboard.trust import Standing
from switchboard.v1 import messages_pb2
from switchboard_agent.migrations import MIGRATIONS, SCHEMA
from switchboard_agent.sessions.standing import run_standing
from switchboard_agent.subagents.children import Subagents
from switchboard_agent.subagents.config import SubagentSettings
from switchboard_agent.subagents.spawn_tool import SpawnTool
from switchboard_agent.tools.client import CallRequest
from switchboard_agent.tools.local import LocalContext, LocalTools
from tests.support.streams import stored

SUBJECTS = bus.Subjects()


@dataclass
class Env:
    js: JetStreamContext
    subagents: Subagents


@pytest.fixture
async def env(nats_url: str, database_url: str) -> AsyncIterator[Env]:
    nc: NATS = await nats.connect(nats_url)
    js = nc.jetstream()
    await bus.ensure_streams(js, SUBJECTS)
    pool = await create_pool(database_url, max_size=2)
    await migrate(pool, SCHEMA, MIGRATIONS)
    try:
        yield Env(js, Subagents(js, SUBJECTS, pool, SubagentSettings()))
    finally:
        await pool.close()
        await nc.close()


def origin(key: str, role: str, chat_type: str = "direct") -> messages_pb2.LaneItem:
    return messages_pb2.LaneItem(
        session_key=key,
        agent="main",
        message=messages_pb2.InboundMessage(
            channel="telegram",
            sender="7",
            chat=messages_pb2.ChatRef(id=key.rsplit(":", 1)[-1], type=chat_type),
            text="do it in the background",
            message_id="m-1",
            role=role,
        ),
    )


async def lane(env: Env, key: str) -> list[messages_pb2.LaneItem]:
    subject = SUBJECTS.lane("main", session_token(key))
    found = await stored(env.js, "LANES", messages_pb2.LaneItem)
    return [s.message for s in found if s.subject == subject]


@pytest.mark.parametrize(
    ("key", "role", "chat_type", "standing"),
    [
        ("main:telegram:7", "user", "direct", Standing.PERSONAL),
        ("main:telegram:group:-9", "member", "group", Standing.GROUP),
        ("main:telegram:7", "owner", "direct", Standing.OWNER),
    ],
)
async def test_a_child_runs_with_its_parents_standing_and_announces_with_it(
    env: Env, key: str, role: str, chat_type: str, standing: Standing
) -> None:
    parent = origin(key, role, chat_type)
    ctx = LocalContext("run_p", key, "main", parent, standing)
    spawn = CallRequest("c1", "sessions_spawn", {"task": "look it up", "mode": "background"})
    [started] = await LocalTools([SpawnTool(env.subagents)]).run_all(ctx, [spawn])
    assert not started.is_error, started.content
    [child_key] = started.details["children"]
    [task] = await lane(env, child_key)
    assert task.standing == str(standing)
    assert task.message.role == "subagent" and task.message.text == "look it up"
    assert run_standing(task) is standing  # what the child's run gets

    # The child's run committed: its result goes to the parent's lane.
    await env.subagents.committed(task, "found it", "completed")
    [announced] = await lane(env, key)
    assert announced.standing == str(standing)
    assert announced.message.role == role  # the origin's: its chat gets the reply
    assert announced.message.chat.id == parent.message.chat.id
    assert announced.message.text.endswith("finished]\nfound it")
    assert run_standing(announced, stored="owner") is standing  # never the DM's remembered


async def test_a_wait_child_carries_the_standing_too(env: Env) -> None:
    """``wait_all`` publishes each child the same way: the parent run's standing."""
    key = "main:telegram:8"
    children = env.subagents.children_for(key, "run_w", "c9", [("sum it", "")], "wait")
    added, _ = await env.subagents.store.add(
        parent_key=key,
        agent="main",
        parent_run_id="run_w",
        children=children,
        origin=origin(key, "user").SerializeToString(),
        max_per_run=8,
    )
    assert added
    await env.subagents.publish("main", key, children[0], Standing.PERSONAL)
    [task] = await lane(env, children[0].child_key)
    assert (task.standing, task.message.role) == ("personal", "subagent")
