"""The executor's built-in tool set."""

from __future__ import annotations

from collections.abc import Sequence

from switchboard_tools.a2a_settings import A2ASettings
from switchboard_tools.net.settings import WebSettings
from switchboard_tools.procs import ProcessManager
from switchboard_tools.registry import DEFAULT_MAX_ARGS_BYTES, Tool, ToolRegistry
from switchboard_tools.sandbox import Sandbox, SpawningSandbox
from switchboard_tools.tools.apply_patch import ApplyPatchTool
from switchboard_tools.tools.edit import EditTool
from switchboard_tools.tools.exec import ExecTool
from switchboard_tools.tools.get_time import GetTimeTool
from switchboard_tools.tools.list_dir import ListDirTool
from switchboard_tools.tools.process import ProcessTool
from switchboard_tools.tools.read import ReadTool
from switchboard_tools.tools.search_files import SearchFilesTool
from switchboard_tools.tools.web_fetch import WebFetchTool
from switchboard_tools.tools.web_search import WebSearchTool
from switchboard_tools.tools.write import WriteTool


def builtin_registry(
    sandbox: Sandbox,
    exec_allowlist: Sequence[str] | None = None,
    web: WebSettings | None = None,
    processes: ProcessManager | None = None,
    max_args_bytes: int = DEFAULT_MAX_ARGS_BYTES,
    exec_mode: str = "allowlist",
    a2a: A2ASettings | None = None,
) -> ToolRegistry:
    """get_time, read, write, edit, list_dir, search_files and exec (``exec_allowlist`` is
    for its allowlist mode; ``None`` means the default allowlist, see
    :data:`switchboard_tools.tools.exec.DEFAULT_EXEC_ALLOWLIST`). ``exec_mode``: the
    operator's mode of exec and process (``SB_EXEC_MODE``): ``allowlist`` or ``sandbox`` (a
    shell; needs a profiled sandbox, see :func:`switchboard_tools.sandbox.probe_sandbox`).
    web_fetch and web_search take ``web`` (``None``: defaults, no search provider).
    apply_patch; process (long-running commands) when the sandbox can spawn, with
    ``processes`` as its manager (``None``: a new one with default limits).
    ``max_args_bytes``: the cap on a call's JSON arguments (``SB_TOOL_ARGS_MAX_BYTES``).
    a2a_delegate when ``a2a`` configures remote agents (``SB_A2A_AGENTS``)."""
    return ToolRegistry(
        [
            GetTimeTool(),
            ReadTool(),
            WriteTool(),
            EditTool(),
            ApplyPatchTool(),
            SearchFilesTool(),
            ListDirTool(),
            ExecTool(sandbox, allowlist=exec_allowlist, mode=exec_mode),
            *_process_tools(sandbox, exec_allowlist, processes, exec_mode),
            WebFetchTool(web),
            WebSearchTool(web),
            *_a2a_tools(a2a, web),
        ],
        max_args_bytes=max_args_bytes,
    )


def _process_tools(
    sandbox: Sandbox,
    allowlist: Sequence[str] | None,
    processes: ProcessManager | None,
    mode: str,
) -> list[Tool]:
    if processes is None:
        if not isinstance(sandbox, SpawningSandbox):
            return []
        processes = ProcessManager(sandbox)
    return [ProcessTool(processes, allowlist=allowlist, mode=mode)]


def _a2a_tools(a2a: A2ASettings | None, web: WebSettings | None) -> list[Tool]:
    if a2a is None or not a2a.a2a_agents:
        return []
    # Imported here: the a2a SDK (about 7 MiB) only in an executor that has remote agents.
    from switchboard_tools.tools.a2a_delegate import A2ADelegateTool

    return [A2ADelegateTool(a2a, list(web.web_fetch_allow_cidrs) if web is not None else None)]
