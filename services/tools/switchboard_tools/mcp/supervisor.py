"""The supervision of one MCP server: :class:`McpServer`.

A task per server connects (a stdio server is started in the sandbox), initializes the
session, lists the tools and then waits: for ``notifications/tools/list_changed`` (the tools are
listed again) or for the end of the connection (the server exited, the stream failed, a call
found it closed). It then reconnects, after a backoff that doubles from ``backoff_s[0]`` to
``backoff_s[1]`` while attempts keep failing; a call arriving meanwhile cuts the wait short and
waits for that attempt, so a crashed server is restarted for the next call. The tools last
listed stay offered while the server is away; calling one then gives a readable error.

:meth:`McpServer.close` stops it for good (a reload removed or changed it, or the executor
stops): its process is stopped, and a call still going on, or waiting for a connection, ends at
once with a readable error rather than waiting for a session that will not come.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any, TypeVar

import anyio
import mcp_types
from mcp import ClientSession, MCPError
from mcp.client._transport import TransportStreams
from mcp.client.session import IncomingMessage

from switchboard_tools.errors import McpUnavailable, ToolError
from switchboard_tools.mcp.config import McpServerConfig
from switchboard_tools.mcp.failures import CONNECT_TIMEOUT_S, SessionGone, describe, short
from switchboard_tools.mcp.tool import McpTool, adapt
from switchboard_tools.metrics import MCP_CONNECTS, MCP_TOOLS
from switchboard_tools.registry import ToolRegistry

log = logging.getLogger(__name__)

# Most tools taken from one server (pages of tools/list are read until then).
MAX_TOOLS = 500
CLIENT_INFO = mcp_types.Implementation(name="switchboard", version="1")
T = TypeVar("T")

Connector = Callable[["McpServer"], AbstractAsyncContextManager[TransportStreams]]


class McpServer:
    """See the module docstring. ``connect(server)`` opens the transport; it calls
    :meth:`connection_ended` when the transport notices the end before the session does."""

    def __init__(
        self,
        config: McpServerConfig,
        connect: Connector,
        max_args_bytes: int,
        backoff_s: tuple[float, float] = (0.5, 30.0),
        ping_timeout_s: float = 5.0,
        on_listed: Callable[[], None] = lambda: None,
    ) -> None:
        self.config = config
        self._on_listed = on_listed  # its tools were listed (again)
        self.ping_timeout_s = ping_timeout_s
        self.registry = ToolRegistry([], max_args_bytes)
        self.last_error = "it has not been started yet"
        self._connect = connect
        self._max_args_bytes = max_args_bytes
        self._backoff = backoff_s
        self._session: ClientSession | None = None
        self._poke = asyncio.Event()  # the connection ended or the tool list changed
        self._lost = False
        self._changed = False
        self._wake = asyncio.Event()  # a call wants the server now
        self._attempt: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.tried = asyncio.Event()  # the first connection attempt is over
        # How the server runs: a stdio server's isolation as measured when it started (the
        # isolation_json of its calls' results); a remote one's transport.
        self.isolation: dict[str, Any] = {}
        self._task: asyncio.Task[None] | None = None
        self._probe: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()  # closed for good: see close()
        self._stopped_as = ""

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def connected(self) -> bool:
        return self._session is not None

    @property
    def _again(self) -> str:
        return "restarted" if self.config.transport == "stdio" else "reconnected"

    def start(self) -> None:
        self._task = asyncio.create_task(self._supervise(), name=f"mcp-{self.name}")

    async def close(self, why: str = "stopped with the tool executor") -> None:
        """Stop the server for good; calls going on or made from now on end with an error
        saying it was ``why`` (e.g. "removed from the configuration")."""
        self._stopped_as = why
        self._stopping.set()
        if self._probe is not None:
            self._probe.cancel()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def started(self, isolation: dict[str, Any]) -> None:
        self.isolation = isolation

    def connection_ended(self, session: ClientSession | None = None) -> None:
        """The connection (of ``session``: unless that is an older one) is gone: calls from
        now on wait for the next one."""
        if session is not None and session is not self._session:
            return  # a call on a session already given up noticed late
        self._session = None
        self._lost = True
        self._poke.set()

    async def ensure_listed(self) -> None:
        """Wait (within the caller's deadline) for a connection attempt when there is no
        session, so that tools of a server that was away are known."""
        if self._session is None:
            with contextlib.suppress(McpUnavailable):  # stopped: the call says so
                await self._unless_stopped(self._next_attempt())

    async def call(self, tool: str, args: dict[str, Any]) -> mcp_types.CallToolResult:
        """Call ``tool`` (the server's own name). Raises :class:`ToolError` with a readable
        message when the server is away, the connection breaks or the server refuses. A call
        an HTTP server refused because it no longer knows the session (it restarted: the MCP
        spec's answer is a new session) is made again, once, on a new session."""
        if self._stopping.is_set():  # a call that found the server just before it stopped
            raise McpUnavailable(f"MCP server {self.name} was {self._stopped_as}.")
        return await self._unless_stopped(self._call_retrying(tool, args))

    async def _unless_stopped(self, work: Awaitable[T]) -> T:
        """``work``, abandoned with :class:`McpUnavailable` if the server is stopped for good
        (:meth:`close`) before it is done."""
        task = asyncio.ensure_future(work)
        stopping = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if task.cancelled() and self._stopping.is_set():
            raise McpUnavailable(
                f"MCP server {self.name} was {self._stopped_as} during the call; whether the "
                "call took effect is unknown."
            )
        return task.result()

    async def _call_retrying(self, tool: str, args: dict[str, Any]) -> mcp_types.CallToolResult:
        try:
            return await self._call(await self._current(), tool, args)
        except SessionGone:
            pass
        try:
            return await self._call(await self._current(), tool, args)
        except SessionGone as exc:
            raise McpUnavailable(
                f"MCP server {self.name} keeps refusing new sessions; it is reconnected for "
                "a later call."
            ) from exc

    async def _current(self) -> ClientSession:
        session = self._session
        if session is None:
            await self._next_attempt()
            session = self._session
            if session is None:
                raise McpUnavailable(
                    f"MCP server {self.name} is not available: {self.last_error}. "
                    f"It is {self._again} for a later call."
                )
        return session

    async def _call(
        self, session: ClientSession, tool: str, args: dict[str, Any]
    ) -> mcp_types.CallToolResult:
        try:
            return await session.call_tool(tool, args)
        except MCPError as exc:
            if exc.code == mcp_types.CONNECTION_CLOSED:
                self.connection_ended(session)
                raise McpUnavailable(
                    f"MCP server {self.name} closed the connection during the call (it may "
                    "have crashed); whether the call took effect is unknown. The server is "
                    f"{self._again} for the next call."
                ) from exc
            if self.config.transport == "http" and await self._session_refused(session):
                self.connection_ended(session)
                raise SessionGone from exc
            raise ToolError(
                f"MCP server {self.name} refused the call: {short(exc.message)}"
            ) from exc
        except (OSError, anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            log.warning("MCP server %s: the connection failed during a call", self.name)
            self.connection_ended(session)
            raise McpUnavailable(
                f"MCP server {self.name} could not be reached during the call; it is "
                f"{self._again} for the next call."
            ) from exc

    async def _session_refused(self, session: ClientSession) -> bool:
        """After an error answer: whether the server refuses the session itself (a ping is
        answered with an error too), rather than just the call (within ``ping_timeout_s``)."""
        try:
            with anyio.fail_after(self.ping_timeout_s):
                await session.send_ping()
        except MCPError:
            return True
        except Exception:
            log.warning("MCP server %s: no answer to a ping after an error", self.name)
            return False
        return False

    def call_timed_out(self) -> None:
        """A call ran out of time: ping the server in the background and restart it when it
        does not answer either (it is wedged, not just slow at that one call)."""
        session = self._session
        if session is None or (self._probe is not None and not self._probe.done()):
            return
        self._probe = asyncio.create_task(self._ping_or_restart(session))

    async def _ping_or_restart(self, session: ClientSession) -> None:
        try:
            with anyio.fail_after(self.ping_timeout_s):
                await session.send_ping()
        except MCPError:
            return  # it answered, if with an error: alive
        except Exception:
            if self._session is session:
                log.warning("MCP server %s: no answer to a ping; restarting it", self.name)
                self.connection_ended(session)

    async def _next_attempt(self) -> None:
        self._wake.set()
        await asyncio.shield(self._attempt)

    def _attempt_over(self) -> None:
        done, self._attempt = self._attempt, asyncio.get_running_loop().create_future()
        done.set_result(None)
        self.tried.set()

    async def _supervise(self) -> None:
        delay = self._backoff[0]
        while True:
            self._wake.clear()
            connected = False
            try:
                async with self._open() as session:
                    connected = True
                    MCP_CONNECTS.labels(self.name, "ok").inc()
                    delay = self._backoff[0]
                    self._attempt_over()
                    await self._serve(session)
            except Exception as exc:
                self.last_error = describe(exc)
                log.warning("MCP server %s: %s", self.name, self.last_error, exc_info=not connected)
            finally:
                self._session = None
            if not connected:
                MCP_CONNECTS.labels(self.name, "error").inc()
                self._attempt_over()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay)
            delay = min(delay * 2, self._backoff[1])

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[ClientSession]:
        self._lost = self._changed = False
        self._poke.clear()
        async with AsyncExitStack() as stack:
            read, write = await stack.enter_async_context(self._connect(self))
            session = ClientSession(
                read, write, message_handler=self._on_message, client_info=CLIENT_INFO
            )
            await stack.enter_async_context(session)
            # Only around calls: a cancel scope must not outlive the task groups entered above.
            with anyio.fail_after(CONNECT_TIMEOUT_S):
                await session.initialize()
                await self._list(session)
            self._session = session
            yield session

    async def _serve(self, session: ClientSession) -> None:
        while True:
            await self._poke.wait()
            self._poke.clear()
            if self._lost:
                raise McpUnavailable("the connection ended (the server exited or hung up)")
            if self._changed:
                self._changed = False
                with anyio.fail_after(CONNECT_TIMEOUT_S):
                    await self._list(session)
                log.info("MCP server %s: tool list changed", self.name)

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self._changed = True
            self._poke.set()
        elif isinstance(message, Exception):
            log.warning("MCP server %s: transport error (%s)", self.name, type(message).__name__)

    async def _list(self, session: ClientSession) -> None:
        listed: list[mcp_types.Tool] = []
        cursor: str | None = None
        while len(listed) < MAX_TOOLS:
            params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
            result = await session.list_tools(params=params)
            listed += result.tools
            cursor = result.next_cursor
            if not cursor:
                break
        tools: dict[str, McpTool] = {}
        for item in listed[:MAX_TOOLS]:
            tool = adapt(self, self.config, item)
            if tool is not None and tool.name in tools:
                log.warning("MCP server %s lists tool %r twice", self.name, item.name)
            elif tool is not None:
                tools[tool.name] = tool
        self.registry = ToolRegistry(tools.values(), self._max_args_bytes)
        MCP_TOOLS.labels(self.name).set(len(tools))
        self._on_listed()
