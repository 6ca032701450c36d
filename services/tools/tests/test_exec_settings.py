"""The operator's configuration decides how commands run: the exec mode (callers cannot pick
one) and the isolation every command requires (filesystem confinement by default, refused with
a readable fix where the host has none). Sandboxes are built from real settings, the way the
executor builds its own (``ToolsSettings.probe_sandbox``)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from switchboard_tools.builtin import builtin_registry
from switchboard_tools.config import ToolsSettings
from switchboard_tools.registry import ToolContext, ToolOutput, ToolRegistry
from switchboard_tools.sandbox import LayeredSandbox, ProcessSandbox, SandboxProfile
from switchboard_tools.sandbox.profile import DEFAULT_PROFILE

from .sandbox_checks import SANDBOX_UID

Need = Callable[..., None]
Run = Callable[[str, dict[str, Any]], Awaitable[ToolOutput]]


async def executor(environ: dict[str, str]) -> tuple[LayeredSandbox, ToolRegistry]:
    settings = ToolsSettings.from_environ({"SB_EXEC_SANDBOX_UID": str(SANDBOX_UID), **environ})
    sandbox = await settings.probe_sandbox()
    tools = builtin_registry(sandbox, settings.exec_allowlist, exec_mode=settings.exec_mode)
    return sandbox, tools


def runner(registry: ToolRegistry, ctx: ToolContext) -> Run:
    async def run(tool: str, args: dict[str, Any]) -> ToolOutput:
        return await registry.execute(tool, json.dumps(args), ctx)

    return run


def test_defaults() -> None:
    settings = ToolsSettings.from_environ({})
    assert settings.exec_mode == "allowlist"
    assert settings.sandbox_profile() == DEFAULT_PROFILE
    assert DEFAULT_PROFILE.describe() == {"require": ["landlock|namespaces"], "network": False}
    assert settings.cgroup_limits().describe() == {"memory_max": 512 << 20, "pids_max": 128}
    limits = ToolsSettings.from_environ({"SB_EXEC_MEMORY_MAX": "96M", "SB_EXEC_PIDS_MAX": "0"})
    assert limits.cgroup_limits().describe() == {"memory_max": 96 << 20, "pids_max": None}


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("SB_EXEC_MODE", "shell", "allowlist"),
        ("SB_EXEC_REQUIRE", "landlock|gvisor", "unknown sandbox layer(s): gvisor"),
        ("SB_EXEC_DISABLE_LAYERS", "uid", "cannot disable uid"),
        ("SB_EXEC_MEMORY_MAX", "lots", "not a size"),
    ],
)
def test_bad_settings_are_refused_at_start(variable: str, value: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ToolsSettings.from_environ({variable: value})


def test_profile_alternatives() -> None:
    profile = SandboxProfile.parse("landlock|namespaces, seccomp")
    assert profile.require == {"seccomp"}
    assert profile.require_any == (frozenset({"landlock", "namespaces"}),)
    assert profile.describe()["require"] == ["seccomp", "landlock|namespaces"]
    assert SandboxProfile.parse("") == SandboxProfile()


async def test_the_mode_is_the_operators(ctx: ToolContext) -> None:
    shell_line = "echo $((6*7)) | cat"
    # SB_EXEC_MODE unset: allowlist. A shell line is refused, and asking for the sandbox
    # mode is an invalid argument: the schema has no such argument.
    _, tools = await executor({})
    run = runner(tools, ctx)
    for tool, extra in (("exec", {}), ("process", {"action": "start"})):
        spec = next(s for s in tools.specs() if s.name == tool)
        assert "mode" not in spec.parameters["properties"]
        out = await run(tool, {**extra, "command": shell_line, "mode": "sandbox"})
        assert out.is_error and out.details["error"] == "invalid_arguments", out.content
        assert "'mode' was unexpected" in out.content
    out = await run("exec", {"command": shell_line})
    assert out.is_error and "metacharacters are not allowed" in out.content
    assert "without a shell" in next(s for s in tools.specs() if s.name == "exec").description

    # SB_EXEC_MODE=sandbox: a shell line, and still no mode argument (nor a way back).
    _, tools = await executor({"SB_EXEC_MODE": "sandbox"})
    run = runner(tools, ctx)
    out = await run("exec", {"command": shell_line})
    assert not out.is_error and out.content == "42\n" and out.details["mode"] == "sandbox"
    out = await run("exec", {"command": "echo hi", "mode": "allowlist"})
    assert out.is_error and "'mode' was unexpected" in out.content
    assert "/bin/sh" in next(s for s in tools.specs() if s.name == "exec").description


def test_sandbox_mode_needs_an_isolating_sandbox() -> None:
    with pytest.raises(ValueError, match="exec mode 'sandbox' needs a sandbox"):
        builtin_registry(ProcessSandbox(), exec_mode="sandbox")


async def test_filesystem_confinement_is_required_by_default(
    ctx: ToolContext, workspace: Path, need: Need
) -> None:
    need("landlock", "namespaces")
    # This host has both: commands run confined, by default.
    out = await runner((await executor({}))[1], ctx)("exec", {"command": "echo ok"})
    assert not out.is_error and out.content == "ok\n", out.content
    assert out.details["isolation"]["workspace_confined"] is True

    # The operator switches both off (as on a host with neither): every command is refused,
    # saying what is missing, why, and how to fix it; nothing runs.
    off = {"SB_EXEC_DISABLE_LAYERS": "landlock,namespaces", "SB_EXEC_MODE": "sandbox"}
    sandbox, tools = await executor(off)
    assert sandbox.missing(DEFAULT_PROFILE) == ["landlock|namespaces"]
    assert sandbox.attestation()["probe"]["landlock"].startswith("unavailable: disabled")
    run = runner(tools, ctx)
    marker = workspace / "ran"
    for tool, extra in (("exec", {}), ("process", {"action": "start"})):
        out = await run(tool, {**extra, "command": "touch ran"})
        assert out.is_error, out.content
        for part in (
            "landlock|namespaces (filesystem confinement",
            "landlock: unavailable: disabled by the operator",
            "namespaces: unavailable: disabled by the operator",
            "install bubblewrap",
            "kernel with Landlock",
            "SB_EXEC_REQUIRE",
            "was not run",
        ):
            assert part in out.content, (part, out.content)
        assert not marker.exists()

    # The explicit opt-out: SB_EXEC_REQUIRE='' runs it unconfined, and says so.
    _, tools = await executor(
        {"SB_EXEC_DISABLE_LAYERS": "landlock,namespaces", "SB_EXEC_REQUIRE": ""}
    )
    out = await runner(tools, ctx)("exec", {"command": "echo ok"})
    assert not out.is_error and out.content == "ok\n", out.content
    assert out.details["isolation"]["workspace_confined"] is False


async def test_either_layer_is_enough(ctx: ToolContext, need: Need) -> None:
    need("landlock", "namespaces")
    for off in ("landlock", "namespaces"):
        sandbox, tools = await executor({"SB_EXEC_DISABLE_LAYERS": off})
        out = await runner(tools, ctx)("exec", {"command": "echo ok"})
        assert not out.is_error and out.content == "ok\n", (off, out.content)
        iso = out.details["isolation"]
        assert iso[off] is False and iso["workspace_confined"] is True
        assert sandbox.missing(DEFAULT_PROFILE) == []
