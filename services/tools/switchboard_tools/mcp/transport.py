"""The two ways to reach an MCP server, each an async context manager of the ``mcp``
package's transport streams: :func:`sandboxed_stdio` (the server is a child started in the
executor's sandbox, like ``exec``'s commands, speaking newline-delimited JSON-RPC over its
stdin/stdout) and :func:`streamable_http` (the ``mcp`` package's own streamable HTTP client).

The ``mcp`` package's ``stdio_client`` starts its child with ``anyio.open_process``, which cannot
apply the sandbox (pre-exec limits, inherited descriptors, the wrapper's isolation report), so
the stdio side is bridged here over the sandboxed process's pipes, as ``stdio_client`` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import mcp_types
from mcp.client._transport import TransportStreams
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.message import SessionMessage

from switchboard_tools.mcp.config import McpServerConfig
from switchboard_tools.sandbox import LayeredSandbox, SandboxProfile
from switchboard_tools.sandbox.child import kill_group

log = logging.getLogger(__name__)

# CPU seconds a stdio server may use in one life (it is restarted when it exceeds them).
SERVER_CPU_SECONDS = 24 * 3600.0
# How long a server may take to exit once its stdin is closed, before its group is killed.
EXIT_GRACE_S = 1.0
# Longest stderr line of a server that is logged.
_STDERR_LINE = 500


@asynccontextmanager
async def sandboxed_stdio(
    config: McpServerConfig,
    sandbox: LayeredSandbox,
    workdir: Path,
    profile: SandboxProfile,
    on_closed: Callable[[], None],
    on_started: Callable[[dict[str, Any]], None],
) -> AsyncIterator[TransportStreams]:
    """Start ``config``'s command in ``sandbox`` (``workdir`` its only writable directory,
    network as the config says) and bridge its pipes; ``on_started`` receives its isolation as
    measured in force, ``on_closed`` is called once its stdout has ended (it exited or closed
    it). The whole process group is killed on exit."""
    assert config.command is not None
    proc, isolation = await sandbox.spawn_piped(
        [config.command, *config.args],
        cwd=workdir,
        cpu_seconds=SERVER_CPU_SECONDS,
        env=config.env,
        profile=replace(profile, network=config.network),
        read_paths=config.read_paths,
    )
    log.info(
        "MCP server %s started (pid %d)",
        config.name,
        proc.pid,
        extra={"mcp_server": config.name, "isolation": isolation},
    )
    on_started(isolation)
    try:
        async with _bridge(proc, config.name, on_closed) as streams:
            yield streams
    finally:
        await _stop(proc)


async def _stop(proc: asyncio.subprocess.Process) -> None:
    """Close stdin (the MCP way to ask a stdio server to exit), wait a moment, kill the group."""
    if proc.stdin is not None:
        proc.stdin.close()
    try:
        await asyncio.wait_for(asyncio.shield(proc.wait()), EXIT_GRACE_S)
    except TimeoutError:
        pass  # it did not exit by itself: killed below
    finally:
        kill_group(proc.pid)


@asynccontextmanager
async def _bridge(
    proc: asyncio.subprocess.Process, name: str, on_closed: Callable[[], None]
) -> AsyncIterator[TransportStreams]:
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    stdin, stdout, stderr = proc.stdin, proc.stdout, proc.stderr
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def read() -> None:
        try:
            async with read_writer:
                while True:
                    try:
                        line = await stdout.readline()
                    except ValueError:
                        log.warning("MCP server %s wrote a line over 16 MiB; disconnecting", name)
                        return
                    if not line:
                        return
                    if not line.strip():
                        continue
                    try:
                        message = mcp_types.jsonrpc_message_adapter.validate_json(
                            line, by_name=False
                        )
                    except ValueError as exc:
                        log.warning("MCP server %s wrote a line that is not JSON-RPC", name)
                        await read_writer.send(exc)
                        continue
                    await read_writer.send(SessionMessage(message))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # the session is gone; nothing left to deliver to
        finally:
            on_closed()

    async def write() -> None:
        try:
            async with write_reader:
                async for item in write_reader:
                    if stdin.is_closing():  # it exited (uvloop refuses to write then)
                        raise ConnectionResetError("the server's stdin is closed")
                    data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                    stdin.write(data.encode() + b"\n")
                    await stdin.drain()
        except (ConnectionError, anyio.ClosedResourceError, anyio.BrokenResourceError):
            await read_writer.aclose()  # the server's stdin is gone: end the session

    async def log_stderr() -> None:
        while line := await stderr.readline():
            text = line.decode("utf-8", "replace").rstrip()[:_STDERR_LINE]
            log.info("MCP server %s: %s", name, text, extra={"mcp_server": name})

    async with anyio.create_task_group() as tg:
        tg.start_soon(read)
        tg.start_soon(write)
        tg.start_soon(log_stderr)
        try:
            yield read_stream, write_stream
        finally:
            tg.cancel_scope.cancel()
            for stream in (read_stream, write_stream):
                with contextlib.suppress(anyio.ClosedResourceError):
                    await stream.aclose()


@asynccontextmanager
async def streamable_http(config: McpServerConfig) -> AsyncIterator[TransportStreams]:
    """The ``mcp`` package's streamable HTTP client to ``config.url`` with its headers."""
    assert config.url is not None
    async with (
        create_mcp_http_client(headers=dict(config.headers)) as http,
        streamable_http_client(config.url, http_client=http) as streams,
    ):
        yield streams
