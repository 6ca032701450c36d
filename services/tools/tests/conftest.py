from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from switchboard_tools.builtin import builtin_registry
from switchboard_tools.registry import ToolContext, ToolOutput, ToolRegistry
from switchboard_tools.sandbox import LayeredSandbox, ProcessSandbox, probe_sandbox
from switchboard_tools.tools.exec import DEFAULT_EXEC_ALLOWLIST
from switchboard_tools.workspace import ensure_workspace

from .sandbox_checks import skip_or_fail

Call = Callable[..., Awaitable[ToolOutput]]


@pytest.fixture
def workspace() -> Iterator[Path]:
    # Not under tmp_path: its parents are private to root, and the sandbox's dedicated uid
    # must be able to reach the workspace (as it can in a real deployment).
    root = Path(tempfile.mkdtemp(prefix="sb-tools-test-"))
    root.chmod(0o711)
    try:
        yield ensure_workspace(root / "workspaces", "agent-1")
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def ctx(workspace: Path) -> ToolContext:
    return ToolContext(
        agent="agent-1",
        session_key="agent:agent-1:main",
        call_id="call-1",
        workspace=workspace,
        timeout_s=20.0,
    )


@pytest.fixture
def sandbox() -> ProcessSandbox:
    return ProcessSandbox()


@pytest.fixture
def registry(sandbox: ProcessSandbox) -> ToolRegistry:
    # The default allowlist plus sleep (for timeout tests) and env (to inspect the sandbox env).
    return builtin_registry(sandbox, [*DEFAULT_EXEC_ALLOWLIST, "sleep", "env"])


@pytest.fixture
def call(registry: ToolRegistry, ctx: ToolContext) -> Call:
    async def _call(name: str, args: dict[str, Any] | str, **overrides: Any) -> ToolOutput:
        args_json = args if isinstance(args, str) else json.dumps(args)
        context = ToolContext(**{**ctx.__dict__, **overrides}) if overrides else ctx
        return await registry.execute(name, args_json, context)

    return _call


@pytest.fixture(scope="session")
def layered() -> LayeredSandbox:
    """The sandbox as the executor builds it at start-up (probed once per test session)."""
    return asyncio.run(probe_sandbox())


@pytest.fixture
def need(layered: LayeredSandbox) -> Callable[..., None]:
    """``need("seccomp", ...)``: when this host lacks a layer, skip (with the probe's reason)
    on a developer machine and fail under ``CI=true`` (CI installs every layer)."""

    def _need(*layers: str) -> None:
        have = layered.available()
        for layer in layers:
            if not have.get(layer):
                reason = layered.layers.status.get(layer, "not available")
                skip_or_fail(f"host lacks the {layer} layer: {reason}")

    return _need


@pytest.fixture
def lcall(layered: LayeredSandbox, ctx: ToolContext) -> Call:
    """Like ``call``, through a registry whose exec runs in the probed layered sandbox."""
    registry = builtin_registry(layered, [*DEFAULT_EXEC_ALLOWLIST, "sleep", "env"])

    async def _call(name: str, args: dict[str, Any], **overrides: Any) -> ToolOutput:
        context = ToolContext(**{**ctx.__dict__, **overrides}) if overrides else ctx
        return await registry.execute(name, json.dumps(args), context)

    return _call
