from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from switchboard.beneath import Resolver, openat2_available, use_resolver
from switchboard_tools.builtin import builtin_registry
from switchboard_tools.registry import ToolContext, ToolOutput, ToolRegistry
from switchboard_tools.sandbox import LayeredSandbox, ProcessSandbox, probe_sandbox
from switchboard_tools.tools.exec import DEFAULT_EXEC_ALLOWLIST
from switchboard_tools.workspace import ensure_workspace

from .sandbox_checks import SANDBOX_UID, skip_or_fail, workspace_born
from .wrappers import WRAPPERS, native_wrapper

Call = Callable[..., Awaitable[ToolOutput]]

# The file tools' tests: each runs once per path resolver (openat2, and the O_NOFOLLOW walk
# that kernels without openat2 get), see ``fs_resolver``.
FS_TEST_MODULES = frozenset(
    {
        "test_fs_tools",
        "test_edit_search",
        "test_apply_patch",
        "test_workspace",
        "test_beneath",
        "test_fs_race",
        "test_fs_errors",
    }
)
RESOLVERS: list[Resolver] = ["openat2", "walk"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.module.__name__.rsplit(".", 1)[-1] in FS_TEST_MODULES:
        metafunc.parametrize("fs_resolver", RESOLVERS, indirect=True)


@pytest.fixture(autouse=True)
def fs_resolver(request: pytest.FixtureRequest) -> Iterator[Resolver | None]:
    """The resolver the file tools use in this test (forced for the modules above; elsewhere
    the automatic choice, ``None``)."""
    which: Resolver | None = getattr(request, "param", None)
    if which is None:
        yield None
        return
    if which == "openat2" and not openat2_available():
        skip_or_fail("this kernel has no openat2 (Linux >= 5.6)")
    use_resolver(which)
    try:
        yield which
    finally:
        use_resolver(None)


@pytest.fixture
def workspace() -> Iterator[Path]:
    # Not under tmp_path: its parents are private to root, and the sandbox's dedicated uid
    # must be able to reach the workspace (as it can in a real deployment).
    root = Path(tempfile.mkdtemp(prefix="sb-tools-test-"))
    root.chmod(0o711)
    try:
        workspace = ensure_workspace(root / "workspaces", "agent-1")
        workspace_born(workspace)
        yield workspace
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


@pytest.fixture(scope="session", params=WRAPPERS)
def layered(request: pytest.FixtureRequest) -> Iterator[LayeredSandbox]:
    """The sandbox as the executor builds it at start-up (probed once per test session), once
    with each wrapper (see tests/wrappers.py): every test of the isolation runs under both."""
    wrapper = request.param
    if wrapper == "python":
        yield asyncio.run(probe_sandbox(uid=SANDBOX_UID, wrapper="python"))
        return
    with native_wrapper() as path:
        sandbox = asyncio.run(probe_sandbox(uid=SANDBOX_UID, wrapper="native", native_path=path))
        if sandbox.layers.wrapper != "native":
            pytest.fail(f"the compiled wrapper does not run: {sandbox.layers.status}")
        yield sandbox


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


@pytest.fixture
def scall(layered: LayeredSandbox, ctx: ToolContext) -> Call:
    """Like ``lcall``, with the operator's exec mode set to ``sandbox`` (a shell)."""
    registry = builtin_registry(layered, exec_mode="sandbox")

    async def _call(name: str, args: dict[str, Any], **overrides: Any) -> ToolOutput:
        context = ToolContext(**{**ctx.__dict__, **overrides}) if overrides else ctx
        return await registry.execute(name, json.dumps(args), context)

    return _call
