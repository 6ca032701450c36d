"""A real MCP server for the MCP client's tests, written with the ``mcp`` package's own
``MCPServer`` (mcp 2's name for FastMCP). ``python3 mcp_server.py`` serves it over stdio;
:func:`build` gives it for streamable HTTP (``build().streamable_http_app()``).

Tools: ``echo`` (text in, text out), ``add`` (two integers), ``crash`` (the process exits),
``hang`` (the server freezes), ``grow`` (adds the tool ``late`` and sends
``notifications/tools/list_changed``), ``secret_drop`` (for deny patterns), ``fail`` (raises:
the SDK answers with an error result)."""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import mcp
from mcp.server.mcpserver import Context, MCPServer


def interpreter() -> str | None:
    """A python of this interpreter's version that the sandbox uid can run (this one may live
    under root's home), to run this file as a stdio server with this environment's
    site-packages on its ``PYTHONPATH``; ``None`` when the host has none."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for directory in ("/usr/bin", "/usr/local/bin"):
        if os.path.exists(os.path.join(directory, version)):
            return os.path.join(directory, version)
    return None


def stdio_server(name: str = "srv") -> dict[str, Any]:
    """This file as a stdio server entry of ``SB_MCP_SERVERS`` (``command`` ``None``: the host
    has no interpreter the sandbox can run)."""
    site_packages = os.path.dirname(os.path.dirname(mcp.__file__))
    here = os.path.abspath(__file__)
    return {
        "name": name,
        "command": interpreter(),
        "args": [here],
        "env": {"PYTHONPATH": site_packages},
        "read_paths": [site_packages, os.path.dirname(here)],
    }


def build() -> MCPServer:
    server = MCPServer("switchboard-test")

    @server.tool(description="Echo the text back.")
    def echo(text: str) -> str:
        return f"echo: {text}"

    @server.tool(description="Add two integers.")
    def add(a: int, b: int) -> str:
        return str(a + b)

    @server.tool(description="Exit the server process at once.")
    def crash() -> str:
        os._exit(3)

    @server.tool(description="Freeze the whole server (it answers nothing any more).")
    def hang() -> str:
        os.kill(os.getpid(), signal.SIGSTOP)
        return "woke up"

    @server.tool(description="Add the tool 'late' and tell the client.")
    async def grow(ctx: Context) -> str:
        def late() -> str:
            return "late tool ran"

        server.add_tool(late, name="late", description="Added at run time.")
        await ctx.session.send_tool_list_changed()
        return "grown"

    @server.tool(description="A tool the operator denies.")
    def secret_drop() -> str:
        return "dropped everything"

    @server.tool(description="Raise an exception.")
    def fail() -> str:
        raise ValueError("the tool could not do it")

    return server


if __name__ == "__main__":
    build().run("stdio")
