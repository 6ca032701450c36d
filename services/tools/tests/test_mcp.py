"""The executor's MCP client against real MCP servers written with the ``mcp`` package
(``tests/support/mcp_server.py``): one over stdio, started in the probed sandbox the executor
uses, and one over streamable HTTP served by uvicorn in this process. One hub for the module
(the servers start once); the tests run in order and leave the servers usable."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest
import pytest_asyncio
import uvicorn

from switchboard import bus
from switchboard.embedded import free_port
from switchboard_tools.config import ToolsSettings
from switchboard_tools.mcp import McpHub, McpServerConfig
from switchboard_tools.mcp.config import McpSettings
from switchboard_tools.metrics import MCP_CALLS, MCP_CONNECTS
from switchboard_tools.registry import ToolContext, ToolOutput, ToolRegistry
from switchboard_tools.sandbox import LayeredSandbox, ProcessSandbox
from switchboard_tools.server import Executor
from switchboard_tools.tools.get_time import GetTimeTool
from tests.support.mcp_server import build, interpreter, stdio_server

from .sandbox_checks import skip_or_fail, wait_until

pytestmark = pytest.mark.asyncio(loop_scope="module")


def stdio_config(**overrides: Any) -> McpServerConfig:
    """The stdio test server as an operator would configure it."""
    fields = {**stdio_server(), "deny": ["secret_*"], "timeout_s": 30}
    return McpServerConfig.model_validate({**fields, **overrides})


def scratch_root() -> Path:
    """A workspaces root the sandbox uid can reach (not under pytest's root-only tmp tree)."""
    root = Path(tempfile.mkdtemp(prefix="sb-mcp-test-"))
    root.chmod(0o711)
    return root


class WebServer:
    """The test server over streamable HTTP, served by uvicorn in this process."""

    def __init__(self) -> None:
        self.port = free_port()
        self.server: uvicorn.Server | None = None
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        config = uvicorn.Config(
            build().streamable_http_app(), host="127.0.0.1", port=self.port, log_level="critical"
        )
        server = self.server = uvicorn.Server(config)
        self.task = asyncio.create_task(server.serve())
        assert await wait_until(lambda: server.started, timeout=60)

    async def stop(self) -> None:
        if self.server is not None and self.task is not None:
            self.server.should_exit = True
            await self.task


class Hub:
    def __init__(self, hub: McpHub, workspace: Path, web: WebServer) -> None:
        self.hub = hub
        self.workspace = workspace
        self.web = web

    async def call(
        self, name: str, args: dict[str, Any] | str, agent: str = "agent-1", timeout: float = 60
    ) -> ToolOutput:
        ctx = ToolContext(agent, "s", "c1", self.workspace, timeout_s=timeout)
        args_json = args if isinstance(args, str) else json.dumps(args)
        return await self.hub.execute(name, args_json, ctx)

    def names(self, agent: str | None) -> set[str]:
        return {spec.name for spec in self.hub.specs(agent)}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def system(layered: LayeredSandbox) -> AsyncIterator[Hub]:
    if layered.missing(layered.default_profile) or interpreter() is None:
        skip_or_fail("the sandbox cannot start the stdio MCP server on this host")
    web = WebServer()
    root = scratch_root()
    configs = [
        stdio_config(),
        McpServerConfig(name="web", url=f"http://127.0.0.1:{web.port}/mcp", agents=["agent-1"]),
    ]
    hub = McpHub(
        configs, layered, layered.default_profile, root, backoff_s=(0.1, 1.0), ping_timeout_s=1.0
    )
    try:
        await web.start()
        hub.start()
        yield Hub(hub, root / "agent-1", web)
    finally:
        await hub.close()
        await web.stop()
        shutil.rmtree(root, ignore_errors=True)


async def test_settings_read_servers_as_data(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = json.dumps([{"name": "a-1", "url": "https://x.test/mcp", "agents": ["main"]}])
    monkeypatch.setenv("SB_MCP_SERVERS", raw)
    (server,) = McpSettings().mcp_servers
    assert server.transport == "http" and server.serves("main") and not server.serves(None)
    for bad in (
        {"name": "Bad"},
        {"name": "a__b", "url": "https://x.test"},
        {"name": "a", "url": "https://x.test", "command": "x"},
        {"name": "a", "url": "file:///etc/passwd"},
    ):
        with pytest.raises(ValueError):
            McpServerConfig.model_validate(bad)


async def test_tools_are_listed_namespaced_per_agent(system: Hub) -> None:
    assert await wait_until(lambda: {"srv__echo", "web__echo"} <= system.names("agent-1"), 60)
    names = system.names("agent-1")
    assert {"srv__add", "srv__crash", "srv__hang", "web__add"} <= names
    assert "srv__secret_drop" not in names  # denied by the server's config
    assert "web__echo" not in system.names("other")  # web is for agent-1 only
    assert "srv__echo" in system.names(None)  # srv is for every agent
    spec = next(s for s in system.hub.specs("agent-1") if s.name == "srv__add")
    assert spec.parameters["properties"]["a"]["type"] == "integer"
    assert spec.groups == ("mcp",)


async def test_call_results_pass_through(system: Hub) -> None:
    out = await system.call("srv__echo", {"text": "hi there"})
    assert not out.is_error and out.content == "echo: hi there"
    isolation = out.details["isolation"]  # the stdio server's, measured when it started
    assert isolation["ok"] and isolation["workspace_confined"] and isolation["network"] is False
    out = await system.call("web__add", {"a": 2, "b": 40})
    assert not out.is_error and out.content == "42"
    assert MCP_CALLS.labels("srv", "ok")._value.get() >= 1


async def test_bad_input_is_a_readable_error(system: Hub) -> None:
    out = await system.call("srv__add", {"a": "two", "b": 1})
    assert out.is_error and out.details["error"] == "invalid_arguments"
    assert "Invalid arguments for srv__add" in out.content and "'two'" in out.content
    out = await system.call("srv__nope", {})
    assert out.is_error and out.details["error"] == "unknown_tool"
    assert "srv__echo" in out.content and "srv__secret_drop" not in out.content
    out = await system.call("srv__secret_drop", {})  # denied: not callable either
    assert out.is_error and out.details["error"] == "unknown_tool"
    out = await system.call("web__echo", {"text": "x"}, agent="other")
    assert out.is_error and "not offered to this agent" in out.content
    out = await system.call("srv__fail", {})  # the server's own error result
    assert out.is_error and out.details["error"] == "mcp_tool_error"


async def test_crashed_server_gives_an_error_then_is_restarted(system: Hub) -> None:
    out = await system.call("srv__crash", {})
    assert out.is_error and "closed the connection during the call" in out.content
    out = await system.call("srv__echo", {"text": "back"})
    assert not out.is_error and out.content == "echo: back", out.content


async def test_hung_call_ends_at_its_timeout_and_a_frozen_server_is_restarted(
    system: Hub,
) -> None:
    starts = MCP_CONNECTS.labels("srv", "ok")._value.get()
    out = await system.call("srv__hang", {}, timeout=1.5)
    assert out.is_error and out.details["error"] == "timeout" and "1.5s" in out.content
    # The server answers no ping either (it is stopped): it is restarted and serves again.
    assert await wait_until(lambda: MCP_CONNECTS.labels("srv", "ok")._value.get() > starts, 60)
    out = await system.call("srv__echo", {"text": "still here"})
    assert out.content == "echo: still here"


async def test_list_changed_offers_the_new_tool(system: Hub) -> None:
    assert "srv__late" not in system.names("agent-1")
    out = await system.call("srv__grow", {})
    assert out.content == "grown"
    assert await wait_until(lambda: "srv__late" in system.names("agent-1"), 30)
    out = await system.call("srv__late", {})
    assert out.content == "late tool ran"


async def test_spec_requests_over_nats_name_their_agent(system: Hub, nats_url: str) -> None:
    """The executor's answer on sb.tools.specs: the MCP tools of the agent the request names;
    for an empty request (older agents) those of servers offered to every agent."""
    nc = await nats.connect(nats_url)
    subjects = bus.Subjects(prefix="mcp-test")
    tools = ToolRegistry([GetTimeTool()])
    executor = Executor(nc, subjects, ToolsSettings(), tools, ProcessSandbox(), mcp=system.hub)
    await nc.subscribe(subjects.tools_specs(), cb=executor.answer_specs)

    async def names(request: bytes) -> list[str]:
        reply = await nc.request(subjects.tools_specs(), request, timeout=10)
        return [spec["name"] for spec in json.loads(reply.data)]

    try:
        reply = await nc.request(subjects.tools_specs(), b'{"agent": "agent-1"}', timeout=10)
        wire = {spec["name"]: spec["groups"] for spec in json.loads(reply.data)}
        assert wire["get_time"] == ["time"] and wire["srv__echo"] == ["mcp"]  # declared, sent
        mine = await names(b'{"agent": "agent-1"}')
        assert "get_time" in mine and {"srv__echo", "web__echo"} <= set(mine)
        assert mine == sorted(mine)
        for request in (b"", b'{"agent": "other"}', b"not json"):
            theirs = await names(request)
            assert "srv__echo" in theirs and not [n for n in theirs if n.startswith("web__")]
    finally:
        await nc.close()


async def test_an_http_server_that_went_away_is_reconnected(system: Hub) -> None:
    # Restarted between two calls: it no longer knows the session, and says so; the call is
    # made again on a new session (the MCP spec's answer to a 404 for a session).
    await system.web.stop()
    await system.web.start()
    out = await system.call("web__echo", {"text": "new session"})
    assert not out.is_error and out.content == "echo: new session", out.content
    # Away during a call: a readable error; back: the next call reconnects.
    await system.web.stop()
    out = await system.call("web__echo", {"text": "anyone?"})
    assert out.is_error and out.details["error"] == "tool_error"
    assert "MCP server web" in out.content and "reconnected" in out.content
    await system.web.start()
    out = await system.call("web__echo", {"text": "again"})
    assert not out.is_error and out.content == "echo: again", out.content


async def test_a_server_that_cannot_start_gives_a_readable_error(layered: LayeredSandbox) -> None:
    root = scratch_root()
    config = McpServerConfig(name="gone", command="/nonexistent/server")
    hub = McpHub([config], layered, layered.default_profile, root, backoff_s=(0.1, 1.0))
    hub.start()
    try:
        ctx = ToolContext("agent-1", "s", "c1", root, timeout_s=20)
        out = await hub.execute("gone__tool", "{}", ctx)
        assert out.is_error and out.details["error"] == "unknown_tool"
        assert "MCP server gone offers: (none); it is not connected: it ended" in out.content
        assert "/nonexistent" not in out.content
    finally:
        await hub.close()
        shutil.rmtree(root, ignore_errors=True)
