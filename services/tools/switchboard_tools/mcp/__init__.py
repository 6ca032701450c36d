"""The MCP client of the tool executor: MCP servers configured as data (``SB_MCP_SERVERS``,
:mod:`.config`), each supervised by the executor (:mod:`.supervisor`: connect, list, re-list on
``notifications/tools/list_changed``, reconnect with backoff), reached over stdio -- started in
the executor's sandbox like exec's commands -- or streamable HTTP (:mod:`.transport`, both
through the ``mcp`` package's :class:`~mcp.ClientSession`), their tools offered per agent as
``<server>__<tool>`` and validated against their JSON Schemas like the built-in tools
(:mod:`.tool`, :mod:`.hub`). Tool policy and approvals apply in the agent as for any tool
(``group:mcp`` names every ``server__tool``). A change of ``SB_MCP_SERVERS`` in the configuration
file applies while the executor runs (:mod:`.running`: servers added, removed or changed; the
others untouched), and a change of the tools offered is announced on ``sb.tools.changed``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from switchboard_tools.mcp.config import McpServerConfig, McpSettings

if TYPE_CHECKING:
    from switchboard_tools.mcp.hub import McpHub

__all__ = ["McpHub", "McpServerConfig", "McpSettings"]


def __getattr__(name: str) -> Any:
    """``McpHub`` on first use: the ``mcp`` package under it costs about 20 MiB and a second of
    start-up, which an executor without MCP servers (the settings import this package) never
    needs."""
    if name == "McpHub":
        from switchboard_tools.mcp.hub import McpHub

        return McpHub
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
