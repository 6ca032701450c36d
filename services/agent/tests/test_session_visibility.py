"""How far the session tools see (SB_SESSION_VISIBILITY, docs/trust.md) against a real
PostgreSQL and nats-server: the caller's tree by default, ``agent``/``all`` only from the
owner's standing, a session out of sight reads exactly like one that does not exist, the list is
filtered in SQL (LIKE wildcards in a key match nothing else), and ``sessions_send`` stamps the
lesser of the sender's and the target's standing on the item it appends."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime

import asyncpg
import nats
import pytest
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext

from switchboard import bus
from switchboard.sessions import session_token
from switchboard.store import create_pool, migrate
from switchboard.trust import Standing, Visibility
from switchboard.v1 import messages_pb2
from switchboard_agent.config import AgentSettings
from switchboard_agent.migrations import MIGRATIONS, SCHEMA
from switchboard_agent.sessions.store import RunRecord, SessionStore
from switchboard_agent.subagents.children import Subagents
from switchboard_agent.subagents.config import SubagentSettings
from switchboard_agent.subagents.session_tools import session_tools
from switchboard_agent.tools.client import CallRequest, CallResult
from switchboard_agent.tools.local import LocalContext, LocalTools
from tests.support.streams import stored

SUBJECTS = bus.Subjects()
OWNER_DM, CHILD = "main:telegram:1", "main:telegram:1:sub:aaa"
USER_DM, GROUP = "main:telegram:2", "main:telegram:group:9"
OTHER_AGENT = "ops:telegram:1"
WILD, LOOKALIKE = "main:api:a_b", "main:api:aXb:sub:zz"  # "_" is a LIKE wildcard
ALL_KEYS = [OWNER_DM, CHILD, USER_DM, GROUP, OTHER_AGENT, WILD, LOOKALIKE]


@dataclass
class Env:
    js: JetStreamContext
    pool: asyncpg.Pool
    store: SessionStore
    subagents: Subagents


@pytest.fixture
async def env(nats_url: str, database_url: str) -> AsyncIterator[Env]:
    nc: NATS = await nats.connect(nats_url)
    js = nc.jetstream()
    await bus.ensure_streams(js, SUBJECTS)
    pool = await create_pool(database_url, max_size=2)
    await migrate(pool, SCHEMA, MIGRATIONS)
    store = SessionStore(pool)
    for n, key in enumerate(ALL_KEYS):
        run = RunRecord(f"run-{n}", key, key.split(":")[0], f"m{n}", 1, datetime.now(UTC))
        run.messages = [
            {"role": "user", "content": [{"type": "text", "text": f"secret of {key}"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "noted"}]},
        ]
        await store.commit_run(run, expected_cursor=0)
    await store.remember_standing(OWNER_DM, "main", "owner")
    await store.remember_standing(USER_DM, "main", "personal")
    try:
        yield Env(js, pool, store, Subagents(js, SUBJECTS, pool, SubagentSettings()))
    finally:
        await pool.close()
        await nc.close()


async def call(
    env: Env,
    visibility: Visibility,
    key: str,
    standing: Standing,
    tool: str,
    args: dict[str, object] | None = None,
) -> CallResult:
    tools = LocalTools(session_tools(env.subagents, env.store, visibility))
    origin = messages_pb2.LaneItem(session_key=key, agent=key.split(":")[0])
    ctx = LocalContext("run_v", key, key.split(":")[0], origin, standing)
    [result] = await tools.run_all(ctx, [CallRequest("c1", tool, args or {})])
    return result


def listed(result: CallResult) -> set[str]:
    return {
        line[2:].split(": ", 1)[0] for line in result.content.splitlines() if line.startswith("- ")
    }


@pytest.mark.parametrize(
    ("visibility", "key", "standing", "sees"),
    [
        # tree (the default): the caller's root and everything below it
        (Visibility.TREE, OWNER_DM, Standing.OWNER, {OWNER_DM, CHILD}),
        (Visibility.TREE, CHILD, Standing.OWNER, {OWNER_DM, CHILD}),
        (Visibility.TREE, USER_DM, Standing.PERSONAL, {USER_DM}),
        (Visibility.TREE, WILD, Standing.OWNER, {WILD}),  # not main:api:aXb:sub:zz
        # self: the caller alone
        (Visibility.SELF, OWNER_DM, Standing.OWNER, {OWNER_DM}),
        (Visibility.SELF, CHILD, Standing.OWNER, {CHILD}),
        # agent: every session of the agent, from the owner's standing only
        (Visibility.AGENT, OWNER_DM, Standing.OWNER, {OWNER_DM, CHILD, USER_DM, GROUP, WILD,
                                                       LOOKALIKE}),
        (Visibility.AGENT, USER_DM, Standing.PERSONAL, {USER_DM}),
        (Visibility.AGENT, GROUP, Standing.GROUP, {GROUP}),
        # all: other agents' too, from the owner's standing only
        (Visibility.ALL, OWNER_DM, Standing.OWNER, set(ALL_KEYS)),
        (Visibility.ALL, GROUP, Standing.GROUP, {GROUP}),
    ],
)  # fmt: skip
async def test_sessions_list_shows_what_the_run_may_see(
    env: Env, visibility: Visibility, key: str, standing: Standing, sees: set[str]
) -> None:
    result = await call(env, visibility, key, standing, "sessions_list")
    assert not result.is_error, result.content
    assert listed(result) == sees, result.content
    if visibility is Visibility.ALL and standing is Standing.OWNER:
        assert f"- {OTHER_AGENT}: 2 messages" in result.content and "(agent ops)" in result.content


async def test_out_of_sight_reads_exactly_like_no_such_session(env: Env) -> None:
    for tool, args, tail in [
        ("sessions_history", {}, "."),
        ("sessions_send", {"text": "hi"}, "; nothing was sent."),
    ]:
        hidden = await call(
            env, Visibility.TREE, GROUP, Standing.GROUP, tool, {"session_key": OWNER_DM, **args}
        )
        missing = await call(
            env, Visibility.TREE, GROUP, Standing.GROUP, tool, {"session_key": "main:x:9", **args}
        )
        assert hidden.is_error and missing.is_error
        assert hidden.content == f"{tool}: there is no session {OWNER_DM!r}{tail}"
        assert hidden.content.replace(OWNER_DM, "K") == missing.content.replace("main:x:9", "K")
        assert hidden.details == missing.details == {"error": "unknown_session"}
        assert "secret" not in hidden.content
    # The group's member asked for the owner's DM with agent visibility: still out of sight.
    wide = await call(
        env, Visibility.AGENT, GROUP, Standing.GROUP, "sessions_history", {"session_key": OWNER_DM}
    )
    assert wide.is_error and "there is no session" in wide.content
    # Another agent's session below `all`: as if there were none.
    other = await call(
        env, Visibility.AGENT, OWNER_DM, Standing.OWNER, "sessions_history",
        {"session_key": OTHER_AGENT},
    )  # fmt: skip
    assert other.is_error and "there is no session" in other.content
    assert "another agent" not in other.content
    # In sight: readable.
    own = await call(
        env, Visibility.TREE, OWNER_DM, Standing.OWNER, "sessions_history", {"session_key": CHILD}
    )
    assert not own.is_error and f"secret of {CHILD}" in own.content
    read = await call(
        env, Visibility.ALL, OWNER_DM, Standing.OWNER, "sessions_history",
        {"session_key": OTHER_AGENT},
    )  # fmt: skip
    assert not read.is_error and f"secret of {OTHER_AGENT}" in read.content


async def lane_items(env: Env, agent: str, key: str) -> list[messages_pb2.LaneItem]:
    subject = SUBJECTS.lane(agent, session_token(key))
    found = await stored(env.js, "LANES", messages_pb2.LaneItem)
    return [s.message for s in found if s.subject == subject]


@pytest.mark.parametrize(
    ("sender", "sender_standing", "target", "stamped"),
    [
        (OWNER_DM, Standing.OWNER, USER_DM, "personal"),  # the target's own is less
        (OWNER_DM, Standing.OWNER, GROUP, "group"),
        (CHILD, Standing.PERSONAL, OWNER_DM, "personal"),  # the sender's own is less
        (OWNER_DM, Standing.OWNER, WILD, "owner"),  # a direct key with nothing remembered...
    ],
)
async def test_sessions_send_stamps_the_lesser_standing(
    env: Env, sender: str, sender_standing: Standing, target: str, stamped: str
) -> None:
    if target == WILD:  # ...is personal, unless its person gave it more
        await env.store.remember_standing(WILD, "main", "owner")
    result = await call(
        env, Visibility.AGENT, sender, sender_standing, "sessions_send",
        {"session_key": target, "text": "ping"},
    )  # fmt: skip
    assert not result.is_error, result.content
    [sent] = await lane_items(env, "main", target)
    assert sent.standing == stamped
    assert sent.message.role == "subagent" and sent.message.channel == "session"
    assert sent.message.text == f"[message from session {sender}]\nping"


async def test_an_unknown_direct_target_gives_personal_and_all_reaches_other_agents(
    env: Env,
) -> None:
    await env.pool.execute(
        "UPDATE agent.sessions SET standing = '' WHERE session_key = $1", USER_DM
    )
    await call(
        env, Visibility.AGENT, OWNER_DM, Standing.OWNER, "sessions_send",
        {"session_key": USER_DM, "text": "one"},
    )  # fmt: skip
    [sent] = await lane_items(env, "main", USER_DM)
    assert sent.standing == "personal"
    result = await call(
        env, Visibility.ALL, OWNER_DM, Standing.OWNER, "sessions_send",
        {"session_key": OTHER_AGENT, "text": "two"},
    )  # fmt: skip
    assert not result.is_error, result.content
    [across] = await lane_items(env, "ops", OTHER_AGENT)
    assert across.agent == "ops" and across.message.agent == "ops"
    assert across.standing == "personal"  # ops:telegram:1 remembers nothing: personal


def test_the_visibility_setting() -> None:
    assert AgentSettings.from_environ({}).session_visibility is Visibility.TREE
    wide = AgentSettings.from_environ({"SB_SESSION_VISIBILITY": "all"})
    assert wide.session_visibility is Visibility.ALL
    with pytest.raises(ValueError, match="session_visibility"):
        AgentSettings.from_environ({"SB_SESSION_VISIBILITY": "everyone"})
