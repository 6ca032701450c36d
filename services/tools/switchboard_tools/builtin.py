"""The executor's built-in tool set."""

from __future__ import annotations

from collections.abc import Sequence

from switchboard_tools.registry import ToolRegistry
from switchboard_tools.sandbox import Sandbox
from switchboard_tools.tools.edit import EditTool
from switchboard_tools.tools.exec import ExecTool
from switchboard_tools.tools.get_time import GetTimeTool
from switchboard_tools.tools.list_dir import ListDirTool
from switchboard_tools.tools.read import ReadTool
from switchboard_tools.tools.search_files import SearchFilesTool
from switchboard_tools.tools.write import WriteTool


def builtin_registry(sandbox: Sandbox, exec_allowlist: Sequence[str] | None = None) -> ToolRegistry:
    """get_time, read, write, edit, list_dir, search_files and exec (``exec_allowlist`` is
    for its allowlist mode; ``None`` means the default allowlist, see
    :data:`switchboard_tools.tools.exec.DEFAULT_EXEC_ALLOWLIST`). With a profiled sandbox
    (:func:`switchboard_tools.probe.probe_sandbox`) exec also offers mode 'sandbox'."""
    return ToolRegistry(
        [
            GetTimeTool(),
            ReadTool(),
            WriteTool(),
            EditTool(),
            SearchFilesTool(),
            ListDirTool(),
            ExecTool(sandbox, allowlist=exec_allowlist),
        ]
    )
