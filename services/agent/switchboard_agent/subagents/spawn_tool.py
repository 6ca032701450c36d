"""``sessions_spawn``, agent-local (:mod:`..tools.local`): a run hands tasks to sub-agents
(:mod:`.children`), each in a session of its own under the run's, run with the run's standing
(docs/trust.md). It passes the tool policy like any tool: the sub-agent layer denies a child
``sessions_spawn`` by default, and ``SB_SUBAGENT_MAX_DEPTH`` / ``SB_SUBAGENT_MAX_CHILDREN`` are
readable tool errors."""

from __future__ import annotations

from typing import Any

from switchboard.errors import InvalidSessionKey
from switchboard.toolspec import ToolSpec

from ..tools.client import CallRequest, CallResult
from ..tools.local import LocalContext, tool_error
from .children import Outcome, Subagents, clipped, depth
from .store import BACKGROUND, WAIT

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
        groups=("sessions",),
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
                await self.subagents.publish(ctx.agent, ctx.session_key, child, ctx.standing)
            return CallResult(
                call.call_id,
                f"Started {len(children)} sub-agent(s) in the background: {', '.join(keys)}."
                " Each one's answer will arrive in this conversation when it finishes.",
                False,
                {"mode": mode, "children": keys},
            )
        outcomes = await self.subagents.wait_all(ctx.agent, ctx.session_key, children, ctx.standing)
        text = "\n\n".join(_outcome_text(n, o) for n, o in enumerate(outcomes, 1))
        return CallResult(
            call.call_id,
            text,
            all(o.status not in ("completed", "timeout") for o in outcomes),
            {"mode": mode, "children": [{"session_key": o.child.child_key,
                                         "status": o.status} for o in outcomes]},
        )  # fmt: skip
