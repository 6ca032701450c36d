"""The executor's built-in tool set."""

from __future__ import annotations

from collections.abc import Sequence

from switchboard_tools.registry import ToolRegistry
from switchboard_tools.sandbox import Sandbox
from switchboard_tools.tools.exec import ExecTool
from switchboard_tools.tools.get_time import GetTimeTool
from switchboard_tools.tools.list_dir import ListDirTool
from switchboard_tools.tools.read import ReadTool
from switchboard_tools.tools.write import WriteTool


def builtin_registry(sandbox: Sandbox, exec_allowlist: Sequence[str] | None = None) -> ToolRegistry:
    """get_time, read, write, list_dir and exec (allowlist mode; ``None`` means the default
    allowlist, see :data:`switchboard_tools.tools.exec.DEFAULT_EXEC_ALLOWLIST`)."""
    return ToolRegistry(
        [
            GetTimeTool(),
            ReadTool(),
            WriteTool(),
            ListDirTool(),
            ExecTool(sandbox, allowlist=exec_allowlist),
        ]
    )
