from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from switchboard_tools.builtin import builtin_registry
from switchboard_tools.registry import ToolContext, ToolOutput, ToolRegistry
from switchboard_tools.sandbox import ProcessSandbox
from switchboard_tools.tools.exec import DEFAULT_EXEC_ALLOWLIST
from switchboard_tools.workspace import ensure_workspace

Call = Callable[..., Awaitable[ToolOutput]]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return ensure_workspace(tmp_path / "workspaces", "agent-1")


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
