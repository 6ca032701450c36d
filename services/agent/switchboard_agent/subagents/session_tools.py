"""The session tools, agent-local (:mod:`..tools.local`): ``sessions_spawn`` (sub-agents,
:mod:`.spawn_tool`), ``sessions_list``, ``sessions_history`` and ``sessions_send``. Each passes
the tool policy like any tool (the sub-agent layer denies a child ``sessions_spawn`` and
``sessions_send`` by default; the group profile has none of them).

How far they see (docs/trust.md): ``SB_SESSION_VISIBILITY`` (``self``, ``tree``, the default:
the run's root conversation and every sub-agent below it, ``agent``: every session of the run's
agent, ``all``: every agent's), ``agent`` and ``all`` only from the owner's standing
(:func:`switchboard.trust.visibility_for`). A session out of sight reads exactly like one that
does not exist: the same text, and no lookup that could tell them apart by its time.

``sessions_send`` appends a message of role ``subagent`` to the target's lane, stamped with the
lesser of the sending run's standing and the one the target gives what is not its own person's
(:func:`..sessions.standing.session_standing`): a message never lends a session more than it has."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from switchboard import trust
from switchboard.errors import InvalidSessionKey
from switchboard.sessions import validate_session_key
from switchboard.toolspec import ToolSpec
from switchboard.trust import Standing, Visibility
from switchboard.v1 import messages_pb2

from ..sessions.standing import SUBAGENT_ROLE, session_standing
from ..sessions.store import SessionStore, StoredMessage
from ..tools.client import CallRequest, CallResult
from ..tools.local import LocalContext, tool_error
from .children import SESSION_CHANNEL, Subagents, child_id, clipped
from .spawn_tool import MAX_TASK, SpawnTool

_KEY = {"type": "string", "minLength": 1, "maxLength": 256}

LIST_SPEC = ToolSpec(
    "sessions_list",
    "List the conversations (sessions) this session may see, newest first, and this"
    " session's sub-agents with their state.",
    {
        "type": "object",
        "properties": {"limit": {"type": "integer", "minimum": 1, "maximum": 100}},
        "additionalProperties": False,
    },
    groups=("sessions",),
)
_LISTED = {
    Visibility.SELF: "This session (the only one it may see)",
    Visibility.TREE: "Sessions of this conversation (itself and its sub-agents)",
    Visibility.AGENT: "Sessions of agent {agent}",
    Visibility.ALL: "Sessions of every agent",
}


def _stamp(t: Any) -> str:
    return t.isoformat(timespec="seconds") if t is not None else "-"


@dataclass(frozen=True)
class Target:
    """A session a run may reach: its agent, and the standing it gives a message from
    elsewhere."""

    key: str
    agent: str
    standing: Standing


class Reach:
    """What a run may see of the other sessions (``SB_SESSION_VISIBILITY``, its standing)."""

    def __init__(self, subagents: Subagents, configured: Visibility) -> None:
        self.subagents = subagents
        self.configured = configured

    def visibility(self, ctx: LocalContext) -> Visibility:
        return trust.visibility_for(self.configured, ctx.standing)

    async def target(self, ctx: LocalContext, key: str) -> Target | str:
        """The session ``key`` if this run may see it, else why not (out of sight: exactly
        as if there were no such session)."""
        try:
            validate_session_key(key)
        except InvalidSessionKey as exc:
            return str(exc)
        missing = f"there is no session {key!r}"
        seen = self.visibility(ctx)
        # Below ``all`` only the run's own agent's sessions: out of sight without a lookup.
        if seen is not Visibility.ALL and not trust.can_see(
            seen, ctx.session_key, ctx.agent, key, ctx.agent
        ):
            return missing
        found = await self.subagents.store.session_target(key)
        if found is None:
            return missing
        agent, stored = found
        if not trust.can_see(seen, ctx.session_key, ctx.agent, key, agent):
            return missing
        return Target(key, agent, session_standing(key, stored))


class ListTool:
    spec = LIST_SPEC

    def __init__(self, reach: Reach, sessions: SessionStore) -> None:
        self.reach = reach
        self.subagents = reach.subagents
        self.sessions = sessions

    async def run(self, ctx: LocalContext, call: CallRequest) -> CallResult:
        limit = int(call.args.get("limit") or 20)
        seen = self.reach.visibility(ctx)
        if seen is Visibility.SELF:
            rows = await self.sessions.list_sessions(ctx.agent, limit, within=ctx.session_key)
        elif seen is Visibility.TREE:
            root = trust.root_key(ctx.session_key)
            rows = await self.sessions.list_sessions(ctx.agent, limit, within=root, tree=True)
        else:
            rows = await self.sessions.list_sessions(
                ctx.agent if seen is Visibility.AGENT else "", limit
            )
        lines = [_LISTED[seen].format(agent=ctx.agent) + " (newest first):"]
        lines += [
            f"- {r.session_key}: {r.message_count} messages, updated {_stamp(r.updated_at)}"
            + (f" (agent {r.agent})" if r.agent != ctx.agent else "")
            + (" (this one)" if r.session_key == ctx.session_key else "")
            for r in rows
        ] or ["- none yet"]
        children = [
            c
            for c in await self.subagents.store.children(ctx.session_key, limit)
            if trust.can_see(seen, ctx.session_key, ctx.agent, c.child_key, ctx.agent)
        ]
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
    "Read the latest messages of a session this session may see (one sessions_list shows,"
    " or a sub-agent's).",
    {
        "type": "object",
        "properties": {
            "session_key": _KEY,
            "limit": {"type": "integer", "minimum": 1, "maximum": 50},
        },
        "required": ["session_key"],
        "additionalProperties": False,
    },
    groups=("sessions",),
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


class HistoryTool:
    spec = HISTORY_SPEC

    def __init__(self, reach: Reach, sessions: SessionStore) -> None:
        self.reach = reach
        self.subagents = reach.subagents
        self.sessions = sessions

    async def run(self, ctx: LocalContext, call: CallRequest) -> CallResult:
        key = str(call.args["session_key"])
        found = await self.reach.target(ctx, key)
        if isinstance(found, str):
            return tool_error(call, f"sessions_history: {found}.", "unknown_session")
        messages = await self.sessions.history(key, int(call.args.get("limit") or 20))
        if not messages:
            child = await self.subagents.store.get(key)
            state = f" (sub-agent, {child.status})" if child else ""
            return CallResult(call.call_id, f"{key}{state}: no messages yet.", False, {})
        text = "\n".join(_line(m) for m in messages)
        return CallResult(call.call_id, text, False, {"messages": len(messages)})


SEND_SPEC = ToolSpec(
    "sessions_send",
    "Send a message into another session this session may see: it is answered there in"
    " turn, like any message (the answer stays in that session's history; its chat does not"
    " see it). wait_s > 0 waits that long for the answer and returns it.",
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
    groups=("sessions",),
)


class SendTool:
    spec = SEND_SPEC

    def __init__(self, reach: Reach) -> None:
        self.reach = reach
        self.subagents = reach.subagents

    async def run(self, ctx: LocalContext, call: CallRequest) -> CallResult:
        key = str(call.args["session_key"])
        if key == ctx.session_key:
            return tool_error(
                call, "sessions_send: that is this session; answer here instead.", "own_session"
            )
        target = await self.reach.target(ctx, key)
        if isinstance(target, str):
            return tool_error(
                call, f"sessions_send: {target}; nothing was sent.", "unknown_session"
            )
        mid = "send-" + child_id(ctx.run_id, call.call_id, 0)
        message = messages_pb2.InboundMessage(
            role=SUBAGENT_ROLE,
            channel=SESSION_CHANNEL,
            account="default",
            sender=ctx.session_key,
            chat=messages_pb2.ChatRef(id=ctx.session_key, type="direct"),
            text=f"[message from session {ctx.session_key}]\n{call.args['text']}",
            message_id=mid,
            received_at_ms=int(time.time() * 1000),
            session_key=key,
            agent=target.agent,
        )
        standing = trust.least(ctx.standing, target.standing)
        await self.subagents.append(key, target.agent, message, f"session:{key}:{mid}", standing)
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
    subagents: Subagents, sessions: SessionStore, visibility: Visibility = Visibility.TREE
) -> list[SpawnTool | ListTool | HistoryTool | SendTool]:
    reach = Reach(subagents, visibility)
    return [
        SpawnTool(subagents),
        ListTool(reach, sessions),
        HistoryTool(reach, sessions),
        SendTool(reach),
    ]
