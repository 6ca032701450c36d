"""Hooks and plugin loading without services: a before_tool_call hook that raises, hangs or
answers nonsense blocks the call (fails closed) and is counted; an observer that raises is
counted and the others still run; plugins are all or nothing (a tool name clash, a kind the
manifest does not provide, a failing setup skip the plugin and report why)."""

from __future__ import annotations

import asyncio
from importlib.metadata import EntryPoint
from typing import Any

import pytest
from prometheus_client import REGISTRY

from switchboard.plugins import Manifest, PluginSettings
from switchboard.toolspec import ToolSpec
from switchboard_agent.plugins.hooks import (
    Block,
    HookName,
    Hooks,
    RunInfo,
    SessionEvent,
    ToolCallEvent,
)
from switchboard_agent.plugins.host import AgentPluginApi, load_plugins
from switchboard_agent.tools.client import CallRequest, CallResult

RUN = RunInfo("run_1", "main:api:x", "main")
CALL = CallRequest("call_1", "exec", {"command": "ls"})


def errors(plugin: str, hook: str) -> float:
    value = REGISTRY.get_sample_value(
        "sb_agent_hook_errors_total", {"plugin": plugin, "hook": hook}
    )
    return value or 0.0


async def raises(_: Any) -> None:
    raise RuntimeError("boom")


async def hangs(_: Any) -> None:
    await asyncio.sleep(3600)


async def nonsense(_: Any) -> str:
    return "yes please"


@pytest.mark.parametrize("hook", [raises, hangs, nonsense])
async def test_a_failing_guard_blocks_the_call(hook: Any) -> None:
    hooks = Hooks(timeout_s=0.05)
    hooks.register(f"guard-{hook.__name__}", "before_tool_call", hook)
    before = errors(f"guard-{hook.__name__}", "before_tool_call")
    result = await hooks.before_tool_call(RUN, CALL)
    assert isinstance(result, CallResult) and result.is_error
    assert result.content == f"Tool call blocked: the check of plugin guard-{hook.__name__} failed."
    assert errors(f"guard-{hook.__name__}", "before_tool_call") == before + 1


async def test_rewrites_chain_and_the_first_block_wins() -> None:
    seen: list[dict[str, Any]] = []

    async def add_flag(call: ToolCallEvent) -> Any:
        from switchboard_agent.plugins.hooks import Rewrite

        seen.append(call.args)
        return Rewrite({**call.args, "flag": True})

    async def block_flagged(call: ToolCallEvent) -> Any:
        seen.append(call.args)
        return Block("flagged") if call.args.get("flag") else None

    hooks = Hooks()
    hooks.register("a", "before_tool_call", add_flag)
    hooks.register("b", "before_tool_call", block_flagged)
    result = await hooks.before_tool_call(RUN, CALL)
    assert isinstance(result, CallResult) and result.content == "Tool call blocked: flagged."
    assert seen == [{"command": "ls"}, {"command": "ls", "flag": True}]
    assert CALL.args == {"command": "ls"}  # the model's call is left as it was


async def test_an_observer_that_raises_does_not_stop_the_others() -> None:
    got: list[str] = []

    async def record(event: SessionEvent) -> None:
        got.append(event.session_key)

    hooks = Hooks()
    hooks.register("bad", "session_start", raises)
    hooks.register("good", "session_start", record)
    before = errors("bad", "session_start")
    await hooks.session(HookName.SESSION_START, "main:api:x")
    assert got == ["main:api:x"] and errors("bad", "session_start") == before + 1


def test_unknown_events_and_sync_functions_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown hook event 'before_everything'"):
        Hooks().register("p", "before_everything", raises)
    with pytest.raises(ValueError, match="not an async function"):
        Hooks().register("p", "session_end", lambda _: None)  # type: ignore[arg-type,return-value]


class Echo:
    def __init__(self, name: str, groups: tuple[str, ...] = ()) -> None:
        self.spec = ToolSpec(name, "echo", {"type": "object"}, groups)

    async def run(self, ctx: Any, call: CallRequest) -> CallResult:
        return CallResult(call.call_id, "echo", False, {})


class Fake:
    """A plugin whose setup does what the test says."""

    def __init__(self, name: str, provides: set[str], setup: Any) -> None:
        self.manifest = Manifest(name, "1", frozenset(provides))
        self._setup = setup

    def setup(self, api: AgentPluginApi) -> None:
        self._setup(api)


async def test_plugins_are_all_or_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(api: AgentPluginApi) -> None:
        raise KeyError("x")

    plugins = {
        "good": Fake("good", {"tools", "hooks"}, lambda api: api.register_tool(Echo("echo"))),
        "shell": Fake("shell", {"tools"}, lambda api: api.register_tool(Echo("sh", ("runtime",)))),
        "typo": Fake("typo", {"tools"}, lambda api: api.register_tool(Echo("t", ("runtim",)))),
        "clash": Fake("clash", {"tools"}, lambda api: api.register_tool(Echo("message"))),
        "sneaky": Fake("sneaky", {"tools"}, lambda api: api.register_hook("session_end", raises)),
        "failing": Fake("failing", {"hooks"}, fail),
        "chan": Fake("chan", {"channels"}, lambda api: api.register_channel("matrix", object())),
    }
    monkeypatch.setattr(EntryPoint, "load", lambda self: plugins[self.name])
    points = [EntryPoint(n, f"x:{n}", "switchboard.plugins") for n in plugins]
    hooks = Hooks()
    loaded = await load_plugins(
        PluginSettings(plugins=list(plugins)), hooks, ["message"], 5.0, lambda: points
    )
    assert [(t.spec.name, t.spec.groups) for t in loaded.tools] == [
        ("echo", ()),
        ("sh", ("runtime",)),  # declared by the plugin: group:runtime entries match it
    ]
    assert hooks.registered(HookName.SESSION_END) == 0
    details = loaded.details()
    assert details["good"]["state"] == "loaded"
    assert details["clash"]["detail"] == "its tool 'message' has the name of another tool"
    assert details["typo"]["state"] == "failed"
    assert "tool 't' declares unknown group 'runtim'" in details["typo"]["detail"]
    assert (
        details["sneaky"]["detail"] == "it registers hooks but its manifest does not provide them"
    )
    assert details["failing"] == {
        "state": "failed",
        "version": "1",
        "provides": ["hooks"],
        "detail": "setup failed (KeyError)",
    }
    assert "chan" not in details  # the gateway's
