"""Why an MCP server failed, in our own words: :func:`describe` (a connection) and
:func:`short` (a server's own error message, cut), and :class:`SessionGone`."""

from __future__ import annotations

import mcp_types
from mcp import MCPError

from switchboard_tools.errors import McpUnavailable, ToolError
from switchboard_tools.sandbox import SandboxUnavailable

# The longest the connection, the initialize handshake and one tools/list may take.
CONNECT_TIMEOUT_S = 30.0
# Longest MCP protocol error message passed on to the model.
MAX_MESSAGE = 300


class SessionGone(Exception):
    """An HTTP server refused the session of a call (the call did not run)."""


def short(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."


def describe(exc: BaseException) -> str:
    """Our own words for why a connection failed or ended (never the exception's text, except
    the sandbox's and the MCP protocol's, which are written for the caller)."""
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        return describe(exc.exceptions[0])
    if isinstance(exc, SandboxUnavailable | McpUnavailable):
        return exc.message
    if isinstance(exc, TimeoutError):
        return f"it did not complete the MCP handshake within {CONNECT_TIMEOUT_S:g}s"
    if isinstance(exc, MCPError) and exc.code == mcp_types.CONNECTION_CLOSED:
        return "it ended the connection before the MCP handshake completed (it exited?)"
    if isinstance(exc, MCPError):
        return f"it answered with an MCP error: {short(exc.message)}"
    if isinstance(exc, OSError | ToolError):
        return "it could not be started or reached"
    if type(exc).__module__.startswith("httpx"):
        return "it could not be reached over HTTP"
    return "the connection failed"
