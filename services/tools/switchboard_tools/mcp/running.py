"""The executor's MCP servers while it runs: the hub made at start from ``SB_MCP_SERVERS``, the
changes of that setting in the configuration file applied without a restart (``rt.on_reload``,
docs/config-file.md), and the notice on ``sb.tools.changed`` whenever the tools they offer may
have changed, so that the agents ask for the specs again on their next run:
:class:`RunningServers`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Protocol

from nats.aio.client import Client as NATS

from switchboard_tools.config import ToolsSettings
from switchboard_tools.sandbox import LayeredSandbox

if TYPE_CHECKING:
    from switchboard_tools.mcp.hub import McpHub

log = logging.getLogger(__name__)


class UsesHub(Protocol):
    """What offers the hub's tools (the executor): told when a reload makes the first hub."""

    mcp: McpHub | None


class RunningServers:
    """The hub of ``settings.mcp_servers`` (none while no server is configured: the ``mcp``
    package is imported only when one is), started by :meth:`start`, changed by :meth:`reload`
    (the executor's reload hook), stopped by :meth:`close`. A change of the tools offered is
    announced on ``subject`` (coalesced: one notice at a time)."""

    def __init__(
        self, settings: ToolsSettings, sandbox: LayeredSandbox, nc: NATS, subject: str
    ) -> None:
        self.settings = settings
        self.sandbox = sandbox
        self.hub: McpHub | None = None
        self.user: UsesHub | None = None
        self._nc = nc
        self._subject = subject
        self._due = asyncio.Event()
        self._announcing: asyncio.Task[None] | None = None

    def start(self) -> McpHub | None:
        if self.settings.mcp_servers:
            self._make().start()
        return self.hub

    def _make(self) -> McpHub:
        from switchboard_tools.mcp.hub import McpHub

        self.hub = McpHub(
            self.settings.mcp_servers,
            self.sandbox,
            self.settings.sandbox_profile(),
            self.settings.workspace_root(),
            self.settings.tool_args_max_bytes,
            on_change=self._due.set,
        )
        self._announcing = asyncio.create_task(self._announce(), name="mcp-tools-changed")
        return self.hub

    async def reload(self, new: ToolsSettings) -> None:
        """Apply ``new.mcp_servers`` (the only setting of the executor that reloads)."""
        hub = self.hub
        if hub is None:
            if not new.mcp_servers:
                return
            hub = self._make()
            hub.start()
            if self.user is not None:
                self.user.mcp = hub
        await hub.reconfigure(new.mcp_servers)

    async def _announce(self) -> None:
        while True:
            await self._due.wait()
            self._due.clear()
            try:
                await self._nc.publish(self._subject, b"")
            except Exception as exc:  # the agents' specs expire by themselves meanwhile
                log.warning("could not announce that the MCP tools changed: %r", exc)

    async def close(self) -> None:
        if self._announcing is not None:
            self._announcing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._announcing
        if self.hub is not None:
            await self.hub.close()
