"""The executor's MCP servers: :class:`McpHub` (one :class:`~.supervisor.McpServer` each)."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

from mcp.client._transport import TransportStreams

from switchboard.toolspec import ToolSpec
from switchboard_tools.mcp.config import McpServerConfig
from switchboard_tools.mcp.supervisor import McpServer
from switchboard_tools.mcp.tool import SEPARATOR
from switchboard_tools.mcp.transport import sandboxed_stdio, streamable_http
from switchboard_tools.metrics import MCP_CALLS, MCP_TOOLS
from switchboard_tools.registry import DEFAULT_MAX_ARGS_BYTES, ToolContext, ToolOutput
from switchboard_tools.sandbox import LayeredSandbox, SandboxProfile

log = logging.getLogger(__name__)
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
    :meth:`reconfigure` applies a changed list of servers, :meth:`close` stops them (and the
    stdio servers). ``on_change`` is called whenever the tools offered may have changed (a
    server listed its tools, servers were added or removed)."""

    def __init__(
        self,
        configs: Sequence[McpServerConfig],
        sandbox: LayeredSandbox,
        profile: SandboxProfile,
        workspaces: Path,
        max_args_bytes: int = DEFAULT_MAX_ARGS_BYTES,
        backoff_s: tuple[float, float] = (0.5, 30.0),
        ping_timeout_s: float = 5.0,
        on_change: Callable[[], None] = lambda: None,
    ) -> None:
        self.sandbox = sandbox
        self.on_change = on_change
        self.profile = profile
        self.workspaces = workspaces
        self._options = (max_args_bytes, backoff_s, ping_timeout_s)
        self.servers = {c.name: self._server(c) for c in configs}
        self._reconfiguring = asyncio.Lock()

    def _server(self, config: McpServerConfig) -> McpServer:
        return McpServer(config, self._connect, *self._options, on_listed=lambda: self.on_change())

    def start(self) -> None:
        for server in self.servers.values():
            server.start()

    async def close(self) -> None:
        await asyncio.gather(*(s.close() for s in self.servers.values()))

    async def reconfigure(self, configs: Sequence[McpServerConfig]) -> None:
        """Apply a changed list of servers to the running hub (a reload of ``mcp_servers``):
        a server whose configuration is unchanged keeps running untouched (its session and
        its calls); a removed one is stopped and its tools are no longer offered; a changed
        one is stopped and started again with its new configuration; an added one is started.
        A call still going on on a stopped server ends with an error saying so."""
        async with self._reconfiguring:
            wanted = {c.name: c for c in configs}
            kept = {n: s for n, s in self.servers.items() if wanted.get(n) == s.config}
            stopped = [s for n, s in self.servers.items() if n not in kept]
            fresh = {n: self._server(c) for n, c in wanted.items() if n not in kept}
            self.servers = {n: kept[n] if n in kept else fresh[n] for n in wanted}
            # The old process of a changed server is gone before the new one starts (they
            # would share the writable directory).
            await asyncio.gather(*(s.close(_why_stopped(s.name, wanted)) for s in stopped))
            for server in stopped:
                if server.name not in wanted:
                    MCP_TOOLS.labels(server.name).set(0)
            for server in fresh.values():
                server.start()
            self.on_change()
            removed = sorted(s.name for s in stopped if s.name not in wanted)
            changed = sorted(s.name for s in stopped if s.name in wanted)
            added = sorted(n for n in fresh if n not in changed)
            log.info(
                "MCP servers reconfigured: added %s; removed %s; restarted %s; unchanged %s",
                ", ".join(added) or "none",
                ", ".join(removed) or "none",
                ", ".join(changed) or "none",
                ", ".join(sorted(kept)) or "none",
            )

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
        server = self.servers.get(name.partition(SEPARATOR)[0])
        if server is None:  # removed by a reload since the caller looked
            return _unknown(name, "its MCP server is no longer configured")
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


def _why_stopped(name: str, wanted: Mapping[str, McpServerConfig]) -> str:
    if name in wanted:
        return "restarted with its changed configuration"
    return "removed from the configuration"


def _unknown(name: str, why: str) -> ToolOutput:
    return ToolOutput(
        f"Unknown tool {name!r}: {why}.",
        is_error=True,
        details={"error": "unknown_tool", "tool": name},
    )
