"""MCP endpoint: ``/mcp`` (streamable HTTP, behind the gateway token like every API route).

MCP clients (Claude Desktop, IDEs, other agents) get four tools: ``send_message`` (a message
into a session, answered with the assistant's reply), ``list_sessions``, ``session_history``
and ``search_memory``. They call what the HTTP API calls (the bus, the agent's ``Sessions``
and the memory service's ``Memory`` gRPC); a refusal or an outage is a tool error
(``isError``) with a message written for the caller, never an internal detail.

Stateless: each request stands alone (no MCP session is kept), so any gateway replica can
answer it, and only POST is served (GET, the stream for server-initiated messages, and DELETE,
the end of a session, answer 405 as the spec allows)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

import grpc
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.context import Context
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import CallToolResult, InputRequiredResult
from pydantic import Field, ValidationError
from starlette.datastructures import State

from switchboard.sessions import AGENT_ID_PATTERN, direct_key, parse_session_key
from switchboard.v1 import memory_pb2, memory_pb2_grpc, sessions_pb2, sessions_pb2_grpc

from .config import GatewaySettings
from .conversations import BusUnavailable, Conversations, Outgoing, ReplyTimeout
from .errors import AGENT, MEMORY, ApiError, backend_error, checked_session_key
from .memory_api import TIMEOUT_S as MEMORY_TIMEOUT_S
from .openai_api import PEER
from .sessions_api import OURS, session_summary

CHANNEL = "api"  # replies travel back as run events only (the agent's event-only channels)
SENDER = "mcp"
SESSIONS_TIMEOUT_S = 5.0
INSTRUCTIONS = (
    "Switchboard is a personal AI assistant. send_message talks to it in a session (a name of "
    "your choice, or a session key from list_sessions) and returns its answer; "
    "session_history reads a session's transcript; search_memory searches what it remembers."
)

Agent = Annotated[
    str,
    Field(
        pattern=f"{AGENT_ID_PATTERN}|^$",
        description="The agent (default: the gateway's default agent).",
    ),
]
AgentFilter = Annotated[
    str,
    Field(pattern=f"{AGENT_ID_PATTERN}|^$", description="Only this agent's (default: all)."),
]
SessionArg = Annotated[
    str,
    Field(
        min_length=1,
        max_length=256,
        description=(
            "A session key from list_sessions (agent:channel:peer), or a plain name (letters, "
            "digits and _ . @ + -) for the MCP session of that name."
        ),
    ),
]


def _failed(exc: ApiError) -> ToolError:
    return ToolError(exc.message)


def _session_key(session: str, agent: str, default_agent: str) -> tuple[str, str]:
    """(session key, agent) for a ``session`` argument: a key as it is (its agent unless one is
    given), a plain name as ``<agent>:mcp:<name>``."""
    if ":" not in session:
        if not PEER.fullmatch(session):
            raise ToolError(
                "A session name must be 1-128 characters of letters, digits and _ . @ + - "
                "(or give a session key from list_sessions)."
            )
        chosen = agent or default_agent
        return direct_key(chosen, SENDER, session), chosen
    try:
        key = checked_session_key(session, "session")
    except ApiError as exc:
        raise _failed(exc) from exc
    return key, agent or parse_session_key(key).root.agent or default_agent


def _block_text(block: dict[str, Any]) -> str:
    """A transcript content block as text: tool calls and results, images are named only."""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "tool_use":
        return f"[tool call: {block.get('name', '?')}]"
    if kind == "tool_result":
        return "[tool result]"
    return f"[{kind}]"


class _Server(MCPServer[Any]):
    """MCPServer whose argument errors name the fields and what is wrong with them, in one
    line, without the rejected values or pydantic's model names and links."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(exc, UnexpectedToolError) or not isinstance(cause, ValidationError):
                raise
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in cause.errors()[:5]
            )
            raise ToolError(f"Invalid arguments for {name}: {problems}") from cause


class McpEndpoint:
    """The MCP server of a gateway app (``state``: the app's clients and settings). Its
    ``running()`` belongs in the app's lifespan; ``asgi`` serves ``/mcp``."""

    def __init__(self, state: State) -> None:
        self.state = state
        self.server = _Server("switchboard", instructions=INSTRUCTIONS, version="0.1.0")
        self.server.add_tool(self.send_message, structured_output=False)
        self.server.add_tool(self.list_sessions)
        self.server.add_tool(self.session_history)
        self.server.add_tool(self.search_memory)
        # The SDK's own app would serve the path itself; only its session manager is used,
        # mounted at /mcp by the gateway (behind TokenAuth).
        self.server.streamable_http_app(
            stateless_http=True,
            # Every request carries the gateway token, which a page rebinding DNS to this host
            # does not have; the Host header is not checked (proxies, Kubernetes names).
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            max_request_body_size=self.settings.max_request_bytes,
        )
        self.session_manager: StreamableHTTPSessionManager = self.server.session_manager
        self.asgi = StreamableHTTPASGIApp(self.session_manager)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The session manager's task group, for the app's lifespan. It is held by a task of
        its own: an anyio task group must be left by the task that entered it, and a lifespan
        may be entered and left by different tasks (test harnesses do)."""
        up, stop = asyncio.Event(), asyncio.Event()

        async def hold() -> None:
            async with self.session_manager.run():
                up.set()
                await stop.wait()

        task = asyncio.create_task(hold(), name="mcp-session-manager")
        waiting = asyncio.create_task(up.wait())
        await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
        if task.done():  # it failed to start: its exception, not a silent endpoint
            waiting.cancel()
            await task
        try:
            yield
        finally:
            stop.set()
            await task

    @property
    def settings(self) -> GatewaySettings:
        settings: GatewaySettings = self.state.settings
        return settings

    async def send_message(
        self,
        session: SessionArg,
        text: Annotated[str, Field(min_length=1, description="The message to send.")],
        agent: Agent = "",
        timeout_s: Annotated[
            float,
            Field(gt=0, le=3600, description="How long to wait for the answer, in seconds."),
        ] = 120.0,
    ) -> str:
        """Send a message to the assistant in a session and wait for its answer (the answer's
        text). A session keeps its conversation: later messages to it continue it."""
        settings = self.settings
        if not text.strip():
            raise ToolError("The message is empty.")
        if len(text) > settings.max_body_chars:
            raise ToolError(
                f"Too much text: {len(text)} characters, at most {settings.max_body_chars}."
            )
        key, chosen = _session_key(session, agent, settings.default_agent)
        out = Outgoing(CHANNEL, text, key, chosen, sender=SENDER)
        conversations: Conversations = self.state.conversations
        wait_s = min(timeout_s, settings.reply_timeout_s)
        try:
            async for event in conversations.converse(out, wait_s):
                if event.stream == "lifecycle" and event.phase == "end":
                    return event.text
        except BusUnavailable as exc:
            raise ToolError(
                "The message bus is not available right now; nothing was sent. Retry shortly."
            ) from exc
        except ReplyTimeout as exc:
            raise ToolError(
                f"No answer within {wait_s:g} s; the message is queued and its answer will be "
                f"in the history of session {key}."
            ) from exc
        raise ToolError("The run ended without an answer.")  # converse ends at lifecycle end

    async def list_sessions(
        self,
        agent: AgentFilter = "",
        limit: Annotated[int, Field(ge=1, le=1000, description="At most this many.")] = 50,
    ) -> dict[str, Any]:
        """The sessions (conversations), the most recently active first: their keys, agent,
        message count, last activity (epoch milliseconds) and token and cost usage."""
        stub: sessions_pb2_grpc.SessionsStub = self.state.sessions
        try:
            reply = await stub.List(
                sessions_pb2.ListSessionsRequest(agent=agent, limit=limit),
                timeout=SESSIONS_TIMEOUT_S,
            )
        except grpc.aio.AioRpcError as exc:
            raise _failed(backend_error(exc, AGENT, "Sessions.List", OURS)) from exc
        return {"sessions": [session_summary(s) for s in reply.sessions]}

    async def session_history(
        self,
        session: SessionArg,
        limit: Annotated[
            int, Field(ge=0, le=10_000, description="The last this many messages (0: all).")
        ] = 20,
    ) -> dict[str, Any]:
        """A session's transcript, oldest first: each message's role and text (tool calls and
        results are only named)."""
        key, _ = _session_key(session, "", self.settings.default_agent)
        stub: sessions_pb2_grpc.SessionsStub = self.state.sessions
        try:
            reply = await stub.History(
                sessions_pb2.HistoryRequest(session_key=key, limit=limit),
                timeout=SESSIONS_TIMEOUT_S,
            )
        except grpc.aio.AioRpcError as exc:
            raise _failed(backend_error(exc, AGENT, "Sessions.History", OURS)) from exc
        return {
            "session_key": reply.session_key,
            "messages": [
                {
                    "role": m.role,
                    "text": "\n".join(_block_text(b) for b in json.loads(m.content_json)),
                    "created_at_ms": m.created_at_ms,
                }
                for m in reply.messages
            ],
        }

    async def search_memory(
        self,
        query: Annotated[str, Field(min_length=1, max_length=4000, description="What to find.")],
        agent: Agent = "",
        k: Annotated[int, Field(ge=1, le=100, description="At most this many hits.")] = 5,
        user: Annotated[
            str,
            Field(
                max_length=256,
                description="Whose memory inside the agent's ('' = the agent's own).",
            ),
        ] = "",
    ) -> dict[str, Any]:
        """Search the assistant's long-term memory (notes, documents, past conversations)."""
        stub: memory_pb2_grpc.MemoryStub = self.state.memory
        scope = memory_pb2.MemoryScope(agent=agent or self.settings.default_agent, user=user)
        try:
            found = await stub.Search(
                memory_pb2.SearchRequest(scope=scope, query=query, k=k, mode="hybrid"),
                timeout=MEMORY_TIMEOUT_S,
            )
        except grpc.aio.AioRpcError as exc:
            raise _failed(backend_error(exc, MEMORY, "Search")) from exc
        return {
            "hits": [
                {
                    "text": h.text,
                    "score": round(h.score, 6),
                    "source": h.source,
                    "path": h.path,
                    "lines": [h.start_line, h.end_line],
                    "session_key": h.session_key,
                }
                for h in found.hits
            ],
            "degraded": found.degraded,
        }
