"""A run's standing (docs/trust.md, sessions/standing.py) through the real lane path: items on the
LANES stream of a real nats-server, the lane manager and the runner against a real PostgreSQL, a
recording stand-in for the model provider's API.

- the DM's own person gives the session its standing (``agent.sessions.standing``), written
  only when it changes; a job into the session gets no more than that; an unknown one counts
  as personal; a group is a group whoever speaks;
- the standing decides the prompt's files (USER.md, MEMORY.md only for the owner), says itself
  in the runtime section, adds the group tool layer, and is the ``sb.standing`` of the
  ``agent.run`` span."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import nats
import pytest
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from switchboard import bus
from switchboard.queue_modes import QueueMode
from switchboard.sessions import session_token
from switchboard.store import create_pool, migrate
from switchboard.trust import Standing
from switchboard.v1 import messages_pb2
from switchboard_agent.migrations import MIGRATIONS, SCHEMA
from switchboard_agent.outbound.publisher import OutboundPublisher
from switchboard_agent.providers.base import ModelRequest, ModelResponse, TextDelta, Usage
from switchboard_agent.runs import runner as runner_module
from switchboard_agent.runs.lanes import LaneManager, LaneReader
from switchboard_agent.runs.lease import Leases
from switchboard_agent.runs.prompt import PromptBuilder
from switchboard_agent.runs.runner import Runner
from switchboard_agent.sessions.standing import run_standing, session_standing, to_remember
from switchboard_agent.sessions.store import SessionStore
from switchboard_agent.subagents.children import Subagents
from switchboard_agent.subagents.session_tools import session_tools
from switchboard_agent.tools.client import ToolDispatcher
from switchboard_agent.tools.local import LocalTools
from switchboard_agent.tools.message import MessageTool
from switchboard_agent.workspace.files import WorkspaceFiles

SUBJECTS = bus.Subjects()
FILES = ("AGENTS.md", "SOUL.md", "USER.md", "MEMORY.md")


class RecordingModel:
    """Stands in for the model provider's API: answers "ok", keeps every request."""

    provider = "fake"
    model = "recorder"

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | ModelResponse]:
        self.requests.append(request)
        yield ModelResponse([{"type": "text", "text": "ok"}], "end_turn", Usage(1, 1), "recorder")


@dataclass
class Env:
    js: JetStreamContext
    pool: asyncpg.Pool
    store: SessionStore
    lanes: LaneManager
    model: RecordingModel
    spans: InMemorySpanExporter
    writes: list[tuple[str, str]] = field(default_factory=list)
    n: int = 0
    on_lane: dict[str, int] = field(default_factory=dict)


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """The runner's spans, on a tracer provider of the test's own."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(runner_module, "tracer", provider.get_tracer("test"))
    yield exporter


@pytest.fixture
async def env(
    nats_url: str, database_url: str, tmp_path: Path, spans: InMemorySpanExporter
) -> AsyncIterator[Env]:
    nc: NATS = await nats.connect(nats_url)
    js = nc.jetstream()
    await bus.ensure_streams(js, SUBJECTS)
    pool = await create_pool(database_url, max_size=4)
    await migrate(pool, SCHEMA, MIGRATIONS)
    store = SessionStore(pool)
    workspace = tmp_path / "main"
    workspace.mkdir()
    for name in FILES:
        (workspace / name).write_text(f"text of {name}")
    model = RecordingModel()
    subagents = Subagents(js, SUBJECTS, pool, _subagent_settings())
    local = LocalTools(
        [MessageTool(OutboundPublisher(js, SUBJECTS)), *session_tools(subagents, store)]
    )
    runner = Runner(
        nc,
        SUBJECTS,
        store,
        ToolDispatcher(nc, js, SUBJECTS, 5.0),
        model,
        "no model",
        tmp_path,
        4,
        100,
        local=local,
        prompts=PromptBuilder(WorkspaceFiles(tmp_path, seed=False)),
    )
    leases = Leases(await js.key_value(SUBJECTS.lease_bucket), "test-owner", bus.LEASE_TTL_S)
    lanes = LaneManager(
        nc,
        LaneReader(js, SUBJECTS.stream("LANES")),
        leases,
        store,
        runner,
        default_mode=QueueMode.QUEUE,
        collect_debounce_s=0.1,
        nak_delay_s=0.1,
    )
    found = Env(js, pool, store, lanes, model, spans)
    remember = store.remember_standing

    async def counted(session_key: str, agent: str, standing: str) -> None:
        found.writes.append((session_key, standing))
        await remember(session_key, agent, standing)

    store.remember_standing = counted  # type: ignore[method-assign]
    try:
        yield found
    finally:
        await pool.close()
        await nc.close()


def _subagent_settings() -> Any:
    from switchboard_agent.subagents.config import SubagentSettings

    return SubagentSettings()


def item(
    key: str, role: str, channel: str = "telegram", sender: str = "", chat_type: str = "direct"
) -> messages_pb2.LaneItem:
    chat = key.rsplit(":", 1)[-1]
    return messages_pb2.LaneItem(
        session_key=key,
        agent="main",
        message=messages_pb2.InboundMessage(
            channel=channel,
            sender=sender,
            chat=messages_pb2.ChatRef(id=chat if channel == "telegram" else "", type=chat_type),
            text="hello",
            role=role,
        ),
    )


async def run(env: Env, lane_item: messages_pb2.LaneItem) -> ModelRequest:
    """Put the item on its lane, let the lane manager run it; the model request it made."""
    env.n += 1
    lane_item.message.message_id = f"m{env.n}"
    subject = SUBJECTS.lane("main", session_token(lane_item.session_key))
    await bus.js_publish(env.js, subject, lane_item)
    env.on_lane[subject] = env.on_lane.get(subject, 0) + 1
    sub = await bus.durable_pull(env.js, SUBJECTS.stream("LANES"), f"d{env.n}", subject)
    msgs = await sub.fetch(env.on_lane[subject], timeout=5)  # the lane's earlier ones too
    before = len(env.model.requests)
    for msg in msgs:
        await env.lanes.handle(msg, bus.decode(messages_pb2.LaneItem, msg.data))
    await sub.unsubscribe()
    assert len(env.model.requests) == before + 1
    return env.model.requests[-1]


async def stored_standing(env: Env, key: str) -> str | None:
    value = await env.pool.fetchval(
        "SELECT standing FROM agent.sessions WHERE session_key = $1", key
    )
    return None if value is None else str(value)


def files_in(request: ModelRequest) -> list[str]:
    return [n for n in FILES if f"## {n}\n" in request.system]


def offered(request: ModelRequest) -> set[str]:
    return {s.name for s in request.tools}


def standings_of_runs(env: Env) -> list[str]:
    return [
        str((s.attributes or {}).get("sb.standing"))
        for s in env.spans.get_finished_spans()
        if s.name == "agent.run"
    ]


async def test_the_dms_person_gives_the_standing_and_a_job_gets_no_more(env: Env) -> None:
    owner_dm, user_dm = "main:telegram:1", "main:telegram:2"
    first = await run(env, item(owner_dm, "owner", sender="1"))
    assert files_in(first) == list(FILES)
    assert "Standing: owner (" in first.system
    assert {"message", "sessions_spawn", "sessions_list"} <= offered(first)
    assert await stored_standing(env, owner_dm) == "owner"
    # Steady state: the same person again writes nothing.
    await run(env, item(owner_dm, "owner", sender="1"))
    assert env.writes == [(owner_dm, "owner")]
    # A job into the owner's DM: the owner's standing it remembers.
    job = await run(env, item(owner_dm, "cron", channel="cron"))
    assert files_in(job) == list(FILES) and "Standing: owner (" in job.system

    person = await run(env, item(user_dm, "user", sender="2"))
    assert files_in(person) == ["AGENTS.md", "SOUL.md"]
    assert "Standing: personal (" in person.system
    assert await stored_standing(env, user_dm) == "personal"
    # A job, or the operator's own message into that DM, gets no more than its person gave.
    for role, channel in (("cron", "cron"), ("owner", "api"), ("hook", "hooks")):
        later = await run(env, item(user_dm, role, channel=channel))
        assert files_in(later) == ["AGENTS.md", "SOUL.md"], role
    # The person becomes an owner (SB_OWNERS): the session remembers it from their message.
    promoted = await run(env, item(user_dm, "owner", sender="2"))
    assert files_in(promoted) == list(FILES)
    assert await stored_standing(env, user_dm) == "owner"
    assert env.writes == [(owner_dm, "owner"), (user_dm, "personal"), (user_dm, "owner")]
    assert standings_of_runs(env) == ["owner"] * 3 + ["personal"] * 4 + ["owner"]


async def test_unknown_and_unstamped_count_as_the_least_and_groups_as_groups(env: Env) -> None:
    # A job into a DM nobody has spoken in yet: personal.
    job = await run(env, item("main:telegram:3", "cron", channel="cron"))
    assert "Standing: personal (" in job.system and "## USER.md" not in job.system
    # The router's stamp missing (an item of an older router): personal, nothing remembered.
    bare = await run(env, item("main:telegram:4", "", sender="4"))
    assert "Standing: personal (" in bare.system
    assert await stored_standing(env, "main:telegram:4") == ""
    # The owner speaking in a group: the group's standing, its tool layer.
    group = await run(env, item("main:telegram:group:-5", "owner", sender="1", chat_type="group"))
    assert "Standing: group (" in group.system
    assert files_in(group) == ["AGENTS.md", "SOUL.md"]
    assert "message" in offered(group)
    assert not offered(group) & {"sessions_spawn", "sessions_list", "sessions_send"}
    assert env.writes == []
    assert standings_of_runs(env) == ["personal", "personal", "group"]


@pytest.mark.parametrize(
    ("key", "role", "channel", "sender", "stamped", "stored", "standing", "remember"),
    [
        ("main:telegram:1", "owner", "telegram", "1", "", "", "owner", "owner"),
        ("main:telegram:1", "owner", "telegram", "1", "", "owner", "owner", ""),  # no change
        ("main:telegram:1", "user", "telegram", "1", "", "owner", "personal", "personal"),
        ("main:telegram:1", "member", "telegram", "1", "", "", "personal", "personal"),
        ("main:telegram:1", "cron", "cron", "", "", "owner", "owner", ""),
        ("main:telegram:1", "subagent", "session", "x", "group", "owner", "group", ""),
        ("main:telegram:1:sub:c", "subagent", "subagent", "x", "personal", "", "personal", ""),
        ("main:telegram:1:sub:c", "owner", "telegram", "1", "", "", "owner", ""),  # not kept
        ("main:telegram:group:9", "owner", "telegram", "1", "owner", "owner", "group", ""),
        ("hook:gh", "hook", "hooks", "", "", "", "owner", ""),
        ("hook:gh", "", "hooks", "", "", "", "personal", ""),
    ],
)
def test_what_standing_py_asks_of_trust(
    key: str,
    role: str,
    channel: str,
    sender: str,
    stamped: str,
    stored: str,
    standing: str,
    remember: str,
) -> None:
    lane_item = item(key, role, channel=channel, sender=sender)
    lane_item.standing = stamped
    assert run_standing(lane_item, stored) == Standing(standing)
    assert to_remember(lane_item, stored) == remember


@pytest.mark.parametrize(
    ("key", "stored", "standing"),
    [
        ("main:telegram:group:9", "owner", Standing.GROUP),
        ("main:telegram:group:9:sub:c", "", Standing.GROUP),
        ("main:telegram:1", "owner", Standing.OWNER),
        ("main:telegram:1", "personal", Standing.PERSONAL),
        ("main:telegram:1", "", Standing.PERSONAL),
        ("main:telegram:1:sub:c", "owner", Standing.OWNER),
        ("hook:gh", "", Standing.OWNER),
        ("cron:daily", "", Standing.OWNER),
        ("custom-session", "", Standing.OWNER),
    ],
)
def test_the_standing_a_session_gives_a_message_from_elsewhere(
    key: str, stored: str, standing: Standing
) -> None:
    assert session_standing(key, stored) is standing


async def test_a_run_answering_several_items_gets_the_least_of_theirs(env: Env) -> None:
    """collect: a message another session sent with a personal standing rides along with the
    owner's own message; the run is no more than the lesser of them (the owner's message still
    makes the session remember owner)."""
    key = "main:telegram:9"
    await env.store.set_queue_mode(key, "main", "collect")
    subject = SUBJECTS.lane("main", session_token(key))
    sent = item(key, "subagent", channel="session", sender="main:telegram:9:sub:x")
    sent.standing = "personal"
    for n, lane_item in enumerate((sent, item(key, "owner", sender="9"))):
        lane_item.message.message_id = f"c{n}"
        await bus.js_publish(env.js, subject, lane_item)
    sub = await bus.durable_pull(env.js, SUBJECTS.stream("LANES"), "collect", subject)
    for msg in await sub.fetch(2, timeout=5):
        await env.lanes.handle(msg, bus.decode(messages_pb2.LaneItem, msg.data))
    [request] = env.model.requests
    assert "Standing: personal (" in request.system and "## USER.md" not in request.system
    assert await stored_standing(env, key) == "owner"
