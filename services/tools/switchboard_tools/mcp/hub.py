"""The executor's MCP servers: :class:`McpHub` (one :class:`~.supervisor.McpServer` each)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

from mcp.client._transport import TransportStreams

from switchboard.toolspec import ToolSpec
from switchboard_tools.mcp.config import McpServerConfig
from switchboard_tools.mcp.supervisor import McpServer
from switchboard_tools.mcp.tool import SEPARATOR
from switchboard_tools.mcp.transport import sandboxed_stdio, streamable_http
from switchboard_tools.metrics import MCP_CALLS
from switchboard_tools.registry import DEFAULT_MAX_ARGS_BYTES, ToolContext, ToolOutput
from switchboard_tools.sandbox import LayeredSandbox, SandboxProfile

# Longest wait for a server that is away before a call to one of its tools, by name, is
# answered "unknown" (within the call's own timeout).
_LIST_WAIT_S = 10.0
# Where stdio servers get their writable directory, under the workspaces root (agent ids
# cannot start with a dot, so no agent's workspace is named so).
SERVERS_DIR = ".mcp"


class McpHub:
    """Supervises every configured server; offers their tools per agent (:meth:`specs`) and
    runs calls of ``<server>__<tool>`` names (:meth:`execute`). ``sandbox`` and ``profile``:
    what stdio servers are started in (as exec's commands are); ``workspaces``: the workspaces
    root, under which each stdio server gets ``.mcp/<name>`` as its only writable directory.
    ``backoff_s``: the reconnection backoff (first, longest); ``ping_timeout_s``: how long a
    server may take to answer the ping sent after one of its calls timed out (no answer: it is
    restarted). Made in the running event loop; :meth:`start` starts the supervisors,
    :meth:`close` stops them (and the stdio servers)."""

    def __init__(
        self,
        configs: Sequence[McpServerConfig],
        sandbox: LayeredSandbox,
        profile: SandboxProfile,
        workspaces: Path,
        max_args_bytes: int = DEFAULT_MAX_ARGS_BYTES,
        backoff_s: tuple[float, float] = (0.5, 30.0),
        ping_timeout_s: float = 5.0,
    ) -> None:
        self.sandbox = sandbox
        self.profile = profile
        self.workspaces = workspaces
        self.servers = {
            c.name: McpServer(c, self._connect, max_args_bytes, backoff_s, ping_timeout_s)
            for c in configs
        }

    def start(self) -> None:
        for server in self.servers.values():
            server.start()

    async def close(self) -> None:
        await asyncio.gather(*(s.close() for s in self.servers.values()))

    async def first_attempts(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` for every server's first connection attempt (so that
        the first spec answers after a start include their tools)."""
        waits = [
            asyncio.ensure_future(s.tried.wait())
            for s in self.servers.values()
            if not s.tried.is_set()
        ]
        if waits:
            _, pending = await asyncio.wait(waits, timeout=timeout_s)
            for wait in pending:
                wait.cancel()

    def specs(self, agent: str | None) -> list[ToolSpec]:
        """The specs of the tools offered to ``agent`` (``None``: servers of every agent)."""
        specs: list[ToolSpec] = []
        for server in self.servers.values():
            if server.config.serves(agent):
                specs += server.registry.specs()
        return specs

    def owns(self, name: str) -> bool:
        """Whether ``name`` is in the namespace of a configured server."""
        prefix, sep, _ = name.partition(SEPARATOR)
        return bool(sep) and prefix in self.servers

    async def execute(self, name: str, args_json: str, ctx: ToolContext) -> ToolOutput:
        """Validate and run ``name`` (see :meth:`owns`) for ``ctx.agent`` within the shorter of
        the call's and the server's timeout. Never raises (cancellation excepted)."""
        server = self.servers[name.partition(SEPARATOR)[0]]
        if not server.config.serves(ctx.agent or "main"):
            MCP_CALLS.labels(server.name, "unknown_tool").inc()
            return _unknown(name, f"MCP server {server.name} is not offered to this agent")
        ctx = replace(ctx, timeout_s=min(ctx.timeout_s, server.config.timeout_s))
        if name not in server.registry:
            try:
                async with asyncio.timeout(min(ctx.timeout_s, _LIST_WAIT_S)):
                    await server.ensure_listed()
            except TimeoutError:
                pass  # answered below with what is known
        if name not in server.registry:
            offered = ", ".join(server.registry.names) or "(none)"
            away = "" if server.connected else f"; it is not connected: {server.last_error}"
            MCP_CALLS.labels(server.name, "unknown_tool").inc()
            return _unknown(name, f"MCP server {server.name} offers: {offered}{away}")
        output = await server.registry.execute(name, args_json, ctx)
        if output.details.get("error") == "timeout":
            server.call_timed_out()
        MCP_CALLS.labels(server.name, "error" if output.is_error else "ok").inc()
        return output

    @asynccontextmanager
    async def _connect(self, server: McpServer) -> AsyncIterator[TransportStreams]:
        config = server.config
        if config.transport == "http":
            server.isolation = {"sandbox": "none", "transport": "streamable_http"}
            async with streamable_http(config) as streams:
                yield streams
            return
        workdir = self._workdir(config.name)
        async with sandboxed_stdio(
            config, self.sandbox, workdir, self.profile, server.connection_ended, server.started
        ) as streams:
            yield streams

    def _workdir(self, name: str) -> Path:
        root = self.workspaces / SERVERS_DIR
        root.mkdir(parents=True, exist_ok=True)
        os.chmod(root, 0o711)  # the sandbox uid must be able to reach its directory
        workdir = root / name
        workdir.mkdir(mode=0o700, exist_ok=True)
        return workdir


def _unknown(name: str, why: str) -> ToolOutput:
    return ToolOutput(
        f"Unknown tool {name!r}: {why}.",
        is_error=True,
        details={"error": "unknown_tool", "tool": name},
    )
