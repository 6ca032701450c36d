"""The session tools, agent-local (:mod:`.local_tools`): ``sessions_spawn`` (sub-agents, see
:mod:`.subagents`), ``sessions_list``, ``sessions_history`` and ``sessions_send``. They see and
reach only sessions of the run's own agent. Each passes the tool policy like any tool: the
sub-agent layer denies a child ``sessions_spawn`` and ``sessions_send`` by default, and
``SB_SUBAGENT_MAX_DEPTH`` / ``SB_SUBAGENT_MAX_CHILDREN`` are readable tool errors."""

from __future__ import annotations

import time
from typing import Any

from switchboard.errors import InvalidSessionKey
from switchboard.sessions import validate_session_key
from switchboard.v1 import messages_pb2

from .local_tools import LocalContext, tool_error
from .providers.base import ToolSpec
from .store import SessionStore, StoredMessage
from .subagent_store import BACKGROUND, WAIT
from .subagents import SESSION_CHANNEL, Outcome, Subagents, child_id, clipped, depth
from .tools_client import CallRequest, CallResult

MAX_TASK = 8000
MAX_TASKS = 100  # the most SB_SUBAGENT_MAX_CHILDREN allows
_TASK = {"type": "string", "minLength": 1, "maxLength": MAX_TASK}
_LABEL = {"type": "string", "minLength": 1, "maxLength": 64}
_KEY = {"type": "string", "minLength": 1, "maxLength": 256}


def _spawn_spec(max_children: int) -> ToolSpec:
    return ToolSpec(
        "sessions_spawn",
        "Hand tasks to sub-agents: each runs in a session of its own with your tools (less"
        " spawning, cron, memory writes and messages) and answers with its final text. Give"
        " one task, or several as tasks to run them in parallel. mode=wait (default) returns"
        " their answers; mode=background returns at once and each answer arrives later in"
        f" this conversation as a message. One run may start {max_children} in all.",
        {
            "type": "object",
            "properties": {
                "task": {**_TASK, "description": "What one sub-agent should do."},
                "label": {**_LABEL, "description": "A short name for it."},
                "tasks": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": MAX_TASKS,  # SB_SUBAGENT_MAX_CHILDREN answers in words
                    "items": {
                        "anyOf": [
                            _TASK,
                            {
                                "type": "object",
                                "properties": {"task": _TASK, "label": _LABEL},
                                "required": ["task"],
                                "additionalProperties": False,
                            },
                        ]
                    },
                    "description": "Several tasks, one sub-agent each, run in parallel.",
                },
                "mode": {"type": "string", "enum": [WAIT, BACKGROUND]},
            },
            "additionalProperties": False,
        },
    )


def _tasks(args: dict[str, Any]) -> list[tuple[str, str]] | None:
    if ("task" in args) == ("tasks" in args):
        return None
    if "task" in args:
        return [(str(args["task"]), str(args.get("label") or ""))]
    out = []
    for t in args["tasks"]:
        if isinstance(t, str):
            out.append((t, ""))
        else:
            out.append((str(t["task"]), str(t.get("label") or "")))
    return out


def _outcome_text(n: int, o: Outcome) -> str:
    name = f"{o.child.label} ({o.child.child_key})" if o.child.label else o.child.child_key
    if o.status == "timeout":
        body = "still running when the wait ended; its answer will arrive in this conversation."
    elif o.status == "not_started":
        body = "not started: the wait ended before its turn."
    else:
        body = clipped(o.text) or "(no text)"
    return f"[{n}] sub-agent {name}: {o.status}\n{body}"


class SpawnTool:
    def __init__(self, subagents: Subagents) -> None:
        self.subagents = subagents
        self.settings = subagents.settings
        self._spec = _spawn_spec(self.settings.subagent_max_children)

    @property
    def spec(self) -> ToolSpec:
        return self._spec

    async def run(self, ctx: LocalContext, call: CallRequest) -> CallResult:
        tasks = _tasks(call.args)
        if tasks is None:
            return tool_error(
                call, "sessions_spawn: give either task or tasks (not both).", "invalid_arguments"
            )
        limit = self.settings.subagent_max_depth
        level = depth(ctx.session_key)
        if level >= limit:
            return tool_error(
                call,
                f"sessions_spawn refused: this session is {level} level(s) deep and sub-agents"
                f" may nest only {limit} level(s) (SB_SUBAGENT_MAX_DEPTH). Do the task yourself.",
                "depth_limit",
            )
        mode = str(call.args.get("mode") or WAIT)
        try:
            children = self.subagents.children_for(
                ctx.session_key, ctx.run_id, call.call_id, tasks, mode
            )
        except InvalidSessionKey:
            return tool_error(
                call, "sessions_spawn refused: the sub-agents' session keys would be too long.",
                "depth_limit",
            )  # fmt: skip
        most = self.settings.subagent_max_children
        added, before = await self.subagents.store.add(
            parent_key=ctx.session_key,
            agent=ctx.agent,
            parent_run_id=ctx.run_id,
            children=children,
            origin=ctx.origin.SerializeToString(),
            max_per_run=most,
        )
        if not added:
            return tool_error(
                call,
                f"sessions_spawn refused: one run may start {most} sub-agents in all"
                f" (SB_SUBAGENT_MAX_CHILDREN); this run started {before} and asked for"
                f" {len(children)} more. Nothing was started.",
                "count_limit",
            )
        keys = [c.child_key for c in children]
        if mode == BACKGROUND:
            for child in children:
                await self.subagents.publish(ctx.agent, ctx.session_key, child)
            return CallResult(
                call.call_id,
                f"Started {len(children)} sub-agent(s) in the background: {', '.join(keys)}."
                " Each one's answer will arrive in this conversation when it finishes.",
                False,
                {"mode": mode, "children": keys},
            )
        outcomes = await self.subagents.wait_all(ctx.agent, ctx.session_key, children)
        text = "\n\n".join(_outcome_text(n, o) for n, o in enumerate(outcomes, 1))
        return CallResult(
            call.call_id,
            text,
            all(o.status not in ("completed", "timeout") for o in outcomes),
            {"mode": mode, "children": [{"session_key": o.child.child_key,
                                         "status": o.status} for o in outcomes]},
        )  # fmt: skip


LIST_SPEC = ToolSpec(
    "sessions_list",
    "List the conversations (sessions) of this agent, newest first, and this session's"
    " sub-agents with their state.",
    {
        "type": "object",
        "properties": {"limit": {"type": "integer", "minimum": 1, "maximum": 100}},
        "additionalProperties": False,
    },
)


def _stamp(t: Any) -> str:
    return t.isoformat(timespec="seconds") if t is not None else "-"


class ListTool:
    spec = LIST_SPEC

    def __init__(self, subagents: Subagents, sessions: SessionStore) -> None:
        self.subagents = subagents
        self.sessions = sessions

    async def run(self, ctx: LocalContext, call: CallRequest) -> CallResult:
        limit = int(call.args.get("limit") or 20)
        rows = await self.sessions.list_sessions(ctx.agent, limit)
        lines = [f"Sessions of agent {ctx.agent} (newest first):"]
        lines += [
            f"- {r.session_key}: {r.message_count} messages, updated {_stamp(r.updated_at)}"
            + (" (this one)" if r.session_key == ctx.session_key else "")
            for r in rows
        ] or ["- none yet"]
        children = await self.subagents.store.children(ctx.session_key, limit)
        if children:
            lines.append("Sub-agents of this session:")
            lines += [
                f"- {c.child_key}" + (f" [{c.label}]" if c.label else "")
                + f": {c.mode}, {c.status}, started {_stamp(c.created_at)}"
                for c in children
            ]  # fmt: skip
        return CallResult(call.call_id, "\n".join(lines), False, {"count": len(rows)})


HISTORY_SPEC = ToolSpec(
    "sessions_history",
    "Read the latest messages of a session of this agent (one sessions_list shows, or a"
    " sub-agent's).",
    {
        "type": "object",
        "properties": {
            "session_key": _KEY,
            "limit": {"type": "integer", "minimum": 1, "maximum": 50},
        },
        "required": ["session_key"],
        "additionalProperties": False,
    },
)


def _line(m: StoredMessage) -> str:
    parts = []
    for b in m.content:
        kind = b.get("type")
        if kind == "text":
            parts.append(str(b.get("text", "")))
        elif kind == "tool_use":
            parts.append(f"[called {b.get('name')}]")
        elif kind == "tool_result":
            parts.append(f"[tool result: {clipped(str(b.get('content', '')), 300)}]")
        else:
            parts.append(f"[{kind}]")
    return f"{m.role}: {clipped(' '.join(parts), 2000)}"


async def _visible(subagents: Subagents, ctx: LocalContext, key: str) -> str | None:
    """Why ``key`` cannot be used by this run (None: it can: a session of the same agent)."""
    try:
        validate_session_key(key)
    except InvalidSessionKey as exc:
        return str(exc)
    agent = await subagents.store.session_agent(key)
    if agent is None and await subagents.store.get(key) is None:
        return f"there is no session {key!r}"
    if agent is not None and agent != ctx.agent:
        return f"session {key!r} belongs to another agent"
    return None


class HistoryTool:
    spec = HISTORY_SPEC

    def __init__(self, subagents: Subagents, sessions: SessionStore) -> None:
        self.subagents = subagents
        self.sessions = sessions

    async def run(self, ctx: LocalContext, call: CallRequest) -> CallResult:
        key = str(call.args["session_key"])
        if (why := await _visible(self.subagents, ctx, key)) is not None:
            return tool_error(call, f"sessions_history: {why}.", "unknown_session")
        messages = await self.sessions.history(key, int(call.args.get("limit") or 20))
        if not messages:
            child = await self.subagents.store.get(key)
            state = f" (sub-agent, {child.status})" if child else ""
            return CallResult(call.call_id, f"{key}{state}: no messages yet.", False, {})
        text = "\n".join(_line(m) for m in messages)
        return CallResult(call.call_id, text, False, {"messages": len(messages)})


SEND_SPEC = ToolSpec(
    "sessions_send",
    "Send a message into another session of this agent: it is answered there in turn, like"
    " any message (the answer stays in that session's history; its chat does not see it)."
    " wait_s > 0 waits that long for the answer and returns it.",
    {
        "type": "object",
        "properties": {
            "session_key": _KEY,
            "text": {"type": "string", "minLength": 1, "maxLength": MAX_TASK},
            "wait_s": {"type": "number", "minimum": 0, "maximum": 300},
        },
        "required": ["session_key", "text"],
        "additionalProperties": False,
    },
)


class SendTool:
    spec = SEND_SPEC

    def __init__(self, subagents: Subagents) -> None:
        self.subagents = subagents

    async def run(self, ctx: LocalContext, call: CallRequest) -> CallResult:
        key = str(call.args["session_key"])
        if key == ctx.session_key:
            return tool_error(
                call, "sessions_send: that is this session; answer here instead.", "own_session"
            )
        if (why := await _visible(self.subagents, ctx, key)) is not None:
            return tool_error(call, f"sessions_send: {why}; nothing was sent.", "unknown_session")
        mid = "send-" + child_id(ctx.run_id, call.call_id, 0)
        message = messages_pb2.InboundMessage(
            channel=SESSION_CHANNEL,
            account="default",
            sender=ctx.session_key,
            chat=messages_pb2.ChatRef(id=ctx.session_key, type="direct"),
            text=f"[message from session {ctx.session_key}]\n{call.args['text']}",
            message_id=mid,
            received_at_ms=int(time.time() * 1000),
            session_key=key,
            agent=ctx.agent,
        )
        await self.subagents.append(key, ctx.agent, message, f"session:{key}:{mid}")
        wait_s = float(call.args.get("wait_s") or 0)
        if wait_s <= 0:
            return CallResult(call.call_id, f"sent to {key}", False, {"session_key": key})
        async with self.subagents.lend():
            found = await self.subagents.reply(key, mid, time.monotonic() + wait_s)
        if found is None:
            return CallResult(
                call.call_id,
                f"sent to {key}; no answer within {wait_s:g} s (it will be in its history).",
                False,
                {"session_key": key, "answered": False},
            )
        return CallResult(
            call.call_id,
            f"{key} answered ({found.status}):\n{clipped(found.text)}",
            False,
            {"session_key": key, "answered": True},
        )


def session_tools(
    subagents: Subagents, sessions: SessionStore
) -> list[SpawnTool | ListTool | HistoryTool | SendTool]:
    return [
        SpawnTool(subagents),
        ListTool(subagents, sessions),
        HistoryTool(subagents, sessions),
        SendTool(subagents),
    ]
