"""``sbtest``: a tool (``reverse_text``) and hooks. ``before_tool_call`` blocks the tool named
by ``blocked_tool`` and rewrites ``get_time``'s time zone ``Mars/Olympus`` to ``rewrite_to``;
``before_model_call`` adds a line to the system prompt; every event is appended as a JSON line
to ``journal``, for the test to read."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from switchboard_agent.plugins.api import (
    AgentPluginApi,
    Block,
    CallRequest,
    CallResult,
    LocalContext,
    Manifest,
    ModelCall,
    ModelRequest,
    Rewrite,
    ToolCallEvent,
    ToolSpec,
)

PROMPT_MARK = "SBTEST-HOOK: the sbtest plugin saw this request."
SCHEMA = {
    "type": "object",
    "properties": {
        "journal": {"type": "string"},
        "blocked_tool": {"type": "string"},
        "rewrite_to": {"type": "string"},
    },
    "required": ["journal"],
    "additionalProperties": False,
}


class ReverseText:
    spec = ToolSpec(
        "reverse_text",
        "Reverse a text.",
        {
            "type": "object",
            "properties": {"text": {"type": "string", "maxLength": 200}},
            "required": ["text"],
            "additionalProperties": False,
        },
    )

    async def run(self, ctx: LocalContext, call: CallRequest) -> CallResult:
        return CallResult(call.call_id, str(call.args["text"])[::-1], False, {})


class TestPlugin:
    manifest = Manifest(
        "sbtest", "0.1.0", frozenset({"tools", "hooks"}), "test plugin", config_schema=SCHEMA
    )

    def setup(self, api: AgentPluginApi) -> None:
        config = api.config
        journal = Path(config["journal"])
        blocked = config.get("blocked_tool", "")
        rewrite_to = config.get("rewrite_to", "UTC")

        def note(event: str, **data: Any) -> None:
            with journal.open("a") as f:
                f.write(json.dumps({"event": event, **data}) + "\n")

        async def before_model_call(call: ModelCall) -> ModelRequest:
            note("before_model_call", session=call.run.session_key, iteration=call.iteration)
            return dataclasses.replace(call.request, system=f"{call.request.system}\n{PROMPT_MARK}")

        async def before_tool_call(call: ToolCallEvent) -> Block | Rewrite | None:
            note("before_tool_call", tool=call.name, args=call.args)
            if call.name == blocked:
                return Block(f"{blocked} is switched off by the sbtest plugin")
            if call.name == "get_time" and call.args.get("timezone") == "Mars/Olympus":
                return Rewrite({**call.args, "timezone": rewrite_to})
            return None

        api.register_tool(ReverseText())
        api.register_hook("before_model_call", before_model_call)
        api.register_hook("before_tool_call", before_tool_call)
        for event in (
            "after_tool_call",
            "message_received",
            "message_sent",
            "session_start",
            "session_end",
        ):
            api.register_hook(event, _sync_observer(note, event))


def _sync_observer(note: Any, event: str) -> Any:
    async def observe(payload: Any) -> None:
        fields = dataclasses.asdict(payload)
        fields.pop("run", None)
        note(event, **{k: v for k, v in fields.items() if isinstance(v, str | bool)})

    return observe


plugin = TestPlugin()
