"""MCP servers change without a restart (issue 27, part 5): a real executor process
(``python -m switchboard_tools``) watches its configuration file, and ``mcp_servers`` edited in
it is applied while it runs. Seen only from outside, as the agent sees it: the tool specs it
asks for on ``sb.tools.specs``, calls on the TOOLS stream, the executor's ``/metrics``, log and
processes. The servers are real: the stdio server of ``tests/support/mcp_server.py`` in the
executor's sandbox (twice, as ``srv`` and ``two``) and an HTTP server in this process whose
``hold`` call stays open until the test releases it (``mcp_hold_server.py``).

One executor, edited in turn: servers added to an executor that had none, one added to a
running hub, one changed (restarted: its old process gone, its tools as the new configuration
says), one removed while a call on it is going on (the call ends with an error saying so, its
process is gone), one that cannot start (logged and counted, the others keep working); the
unchanged HTTP server keeps its one session throughout, and its call open across three reloads
completes."""

from __future__ import annotations

import json
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from switchboard_agent.tools import client as tools_client
from switchboard_agent.tools.client import ToolDispatcher
from tests.support.mcp_server import interpreter, stdio_server

from .executor_procs import SUBJECTS, ExecutorProcesses, Replica, ToolBus
from .mcp_hold_server import HoldServer
from .sandbox_checks import wait_until

WAIT_S = 60.0  # generous: the file is looked at every second, a stdio server starts in ~1 s
AGENT = "agent-1"


def toml(value: Any) -> str:
    """``value`` as a TOML value (inline tables and arrays: what an operator may write)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(toml(v) for v in value) + "]"
    pairs = (f"{json.dumps(k)} = {toml(v)}" for k, v in value.items())
    return "{ " + ", ".join(pairs) + " }"


def write(path: Path, servers: list[dict[str, Any]]) -> None:
    """The file with ``servers`` as ``[tools] mcp_servers``, saved as an editor does."""
    text = "# MCP servers of the reload test\n[tools]\nmcp_servers = [\n"
    text += "".join(f"  {toml(s)},\n" for s in servers) + "]\n"
    temporary = path.with_name(".switchboard.toml.new")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def stdio(name: str, **overrides: Any) -> dict[str, Any]:
    """The test server over stdio as ``name``; its command line carries a marker that finds
    its processes."""
    server = stdio_server(name)
    return {**server, "args": [*server["args"], f"sb-reload-{name}"], **overrides}


def processes(replica: Replica, name: str) -> list[psutil.Process]:
    return replica.sandboxed(f"sb-reload-{name}")


def started(replica: Replica, name: str) -> list[int]:
    """The pids the executor logged for ``name``'s starts, in order."""
    return [int(p) for p in re.findall(rf"MCP server {name} started \(pid (\d+)\)", replica.log())]


class Agent:
    """What the agent does with the executor: its own :class:`ToolDispatcher` for the tool
    specs (kept until the executor announces a change: the test makes their TTL an hour),
    tool calls on the TOOLS stream."""

    def __init__(self, client: ToolBus) -> None:
        self.client = client
        self.dispatcher = ToolDispatcher(client.nc, client.js, SUBJECTS, 60.0)

    async def names(self) -> set[str]:
        return {spec.name for spec in await self.dispatcher.specs(AGENT)}

    async def listed(self, wanted: set[str], gone: frozenset[str] = frozenset()) -> None:
        """Wait until the specs hold every tool of ``wanted`` and none of ``gone``."""
        seen: set[str] = set()

        async def check() -> bool:
            seen.clear()
            seen.update(await self.names())
            return wanted <= seen and not gone & seen

        assert await wait_until(check, WAIT_S, step=0.2), (wanted, gone, sorted(seen))

    async def call(self, tool: str, args: dict[str, Any]) -> tuple[str, bool]:
        result = await self.client.call(tool, args, agent=AGENT)
        return result.content, result.is_error


@pytest.fixture
async def hold() -> AsyncIterator[HoldServer]:
    server = HoldServer()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


async def test_servers_are_added_changed_and_removed_while_the_executor_runs(
    nats_url: str, hold: HoldServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    if interpreter() is None:
        pytest.fail("no python the sandbox uid can run (/usr/bin/python3.N) for the MCP server")
    monkeypatch.setattr(tools_client, "SPECS_TTL_S", 3600.0)  # only a notice refreshes them
    web = {"name": "web", "url": hold.url, "timeout_s": 600}
    srv, two = stdio("srv"), stdio("two")
    client = await ToolBus.connect(nats_url)
    await client.listen(f"{SUBJECTS.prefix}.tools.result.>")
    agent = Agent(client)
    await agent.dispatcher.watch_changes()
    async with ExecutorProcesses(nats_url) as executors:
        path = executors.home / "switchboard.toml"
        path.write_text("# no MCP server yet\n", encoding="utf-8")
        executors.env["SB_CONFIG_FILE"] = str(path)
        replica = await executors.start("tools-0")
        try:
            assert not [n for n in await agent.names() if "__" in n]

            # Added to an executor that started with none.
            write(path, [srv, web])
            await agent.listed({"srv__echo", "srv__hang", "web__echo", "web__hold"})
            assert await agent.call("srv__echo", {"text": "one"}) == ("echo: one", False)
            assert await agent.call("web__echo", {"text": "one"}) == ("echo: one", False)

            # A call on the unchanged server stays open across the next three reloads.
            holding = await client.publish("web__hold", {}, agent=AGENT, timeout_s=600)
            assert await wait_until(hold.holding.is_set, WAIT_S), "web__hold did not arrive"

            # Added to the running servers.
            write(path, [srv, web, two])
            await agent.listed({"two__echo", "two__add", "srv__echo", "web__hold"})
            assert await agent.call("two__add", {"a": 2, "b": 3}) == ("5", False)
            (first,) = started(replica, "two")

            # Changed: restarted with its new configuration (its old process gone).
            write(path, [srv, web, {**two, "deny": ["add"]}])
            await agent.listed({"two__echo"}, gone=frozenset({"two__add"}))
            assert await agent.call("two__echo", {"text": "new"}) == ("echo: new", False)
            old_gone = await wait_until(
                lambda: first not in [p.pid for p in processes(replica, "two")], WAIT_S
            )
            assert old_gone, "the old process of two is still running"
            pids = started(replica, "two")
            assert len(pids) == 2 and pids[1] != first, pids
            content, is_error = await agent.call("two__add", {"a": 2, "b": 3})
            assert is_error and "two__echo" in content, content  # no longer offered

            # Removed while a call on it is going on (the server froze in it).
            hanging = await client.publish("srv__hang", {}, agent=AGENT, timeout_s=600)
            assert await wait_until(lambda: frozen(replica, "srv"), WAIT_S), "srv__hang not running"
            write(path, [web, {**two, "deny": ["add"]}])
            result = await client.result(hanging, timeout=WAIT_S)
            assert result.is_error and "removed from the configuration" in result.content
            await agent.listed(
                {"two__echo", "web__echo"}, gone=frozenset({"srv__echo", "srv__hang"})
            )
            content, is_error = await agent.call("srv__echo", {"text": "gone"})
            assert is_error and "Unknown tool" in content, content
            assert await wait_until(lambda: not processes(replica, "srv"), WAIT_S), "orphan"

            # One that cannot start: logged and counted as at start; the others keep working.
            broken = {"name": "broken", "command": "/nonexistent/mcp-server"}
            write(path, [web, {**two, "deny": ["add"]}, broken])

            async def refused() -> bool:
                return (
                    await replica.metric("sb_mcp_connects_total", server="broken", outcome="error")
                    >= 1
                )

            assert await wait_until(refused, WAIT_S)
            assert "MCP server broken: it ended the connection" in replica.log()
            assert await agent.call("two__echo", {"text": "still"}) == ("echo: still", False)
            content, is_error = await agent.call("broken__anything", {})
            assert is_error and "MCP server broken offers: (none); it is not connected" in content

            # The unchanged server: its call completed, on the one session it ever had.
            hold.release()
            result = await client.result(holding, timeout=WAIT_S)
            assert (result.content, result.is_error) == ("released", False)
            connects = await replica.metric("sb_mcp_connects_total", server="web", outcome="ok")
            assert connects == 1
        except BaseException:
            print(replica.log())  # the executor's log, in the failure's report
            raise
        finally:
            await client.close()


def frozen(replica: Replica, name: str) -> bool:
    """Whether a process of ``name`` is stopped (``hang`` sends itself SIGSTOP)."""
    for process in processes(replica, name):
        try:
            if process.status() == psutil.STATUS_STOPPED:
                return True
        except psutil.NoSuchProcess:
            continue
    return False
