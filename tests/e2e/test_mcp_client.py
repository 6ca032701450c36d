"""MCP tools end to end: the tool executor (a real process) starts the stdio MCP server of
``tests/support/mcp_server.py`` -- a real server written with the ``mcp`` package
-- in its sandbox from ``SB_MCP_SERVERS``, the agent asks it for the agent's tool specs, and the
scripted fake model calls ``srv__echo``; the reply holds the server's result. The agent's tool
policy and approvals apply to MCP tools as to any: a session policy denying ``group:mcp``
refuses the call (and offers none), and ``srv__add`` (an approval rule) waits for a decision.
Bad input (invalid arguments, an unknown tool, the server's own error) is a tool error the model
reads, and the run goes on. One system for the module; each test its own session."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e import helpers
from tests.e2e.helpers import final_text, history, next_reply, wait_for
from tests.fakes.llm import FakeLLM, FakeRequest, Reply
from tests.support.mcp_server import stdio_server
from tests.support.services import ServiceProcesses, with_fake_model


def script(req: FakeRequest) -> Reply:
    """``call <tool> <json args>`` calls that tool; after tool results the answer quotes them."""
    if req.last_tool_results:
        return Reply(text="done: " + " | ".join(req.last_tool_results))
    if req.last_user_text.startswith("call "):
        _, tool, args = req.last_user_text.split(" ", 2)
        return Reply(tool_calls=[(tool, json.loads(args))])
    return Reply(text="hello")


@pytest.fixture(scope="module")
def services(
    tmp_path_factory: pytest.TempPathFactory, module_nats_url: str, module_database_url: str
) -> Iterator[ServiceProcesses]:
    server = stdio_server()
    if server["command"] is None:
        pytest.fail("no python the sandbox uid can run (/usr/bin/python3.N) for the MCP server")
    env = {"SB_MCP_SERVERS": json.dumps([server]), "SB_TOOL_APPROVALS": '["srv__add"]'}
    home = tmp_path_factory.mktemp("mcp")
    with with_fake_model(home, module_nats_url, module_database_url, script, env) as procs:
        yield procs


def ask(services: ServiceProcesses, key: str, text: str) -> str:
    with helpers.client(services.url, services.token) as c:
        before = len(history(c, key))
        c.post(f"/api/sessions/{key}/messages", json={"text": text})
        return next_reply(c, key, before, timeout=90)


def offered(services: ServiceProcesses) -> list[str]:
    llm: FakeLLM = services.llm  # type: ignore[attr-defined]
    return list(llm.calls[-1].request.tools)


def test_the_model_calls_an_mcp_tool(services: ServiceProcesses) -> None:
    # The executor starts the server in the background: ask until its tools are offered (the
    # fake model calls the tool whether offered or not: the executor knows it either way).
    def echoed() -> str | None:
        reply = ask(services, "main:mcp:echo", 'call srv__echo {"text": "from the model"}')
        return reply if "srv__echo" in offered(services) else None

    assert wait_for(echoed, timeout=120) == "done: echo: from the model"
    assert {"srv__echo", "srv__add", "exec"} <= set(offered(services))


def test_a_denied_mcp_tool_is_refused(services: ServiceProcesses) -> None:
    key = "main:mcp:denied"
    with helpers.client(services.url, services.token) as c:
        r = c.patch(f"/api/sessions/{key}", json={"tool_policy": {"deny": ["group:mcp"]}})
        assert r.status_code == 200, r.text
    reply = ask(services, key, 'call srv__echo {"text": "no"}')
    assert "srv__echo is denied by the session policy" in reply
    assert "echo: no" not in reply
    assert not [name for name in offered(services) if "__" in name]


def test_an_mcp_tool_needing_approval_waits(services: ServiceProcesses) -> None:
    key = "main:mcp:approval"
    with helpers.client(services.url, services.token) as c:
        c.post(f"/api/sessions/{key}/messages", json={"text": 'call srv__add {"a": 2, "b": 40}'})

        def waiting() -> list[dict[str, Any]]:
            params = {"session_key": key, "status": "awaiting_approval"}
            return list(c.get("/api/approvals", params=params).json()["approvals"])

        [approval] = wait_for(waiting, timeout=60)
        assert approval["tool"] == "srv__add" and approval["args"] == {"a": 2, "b": 40}
        assert history(c, key) == []  # nothing ran meanwhile
        r = c.post(f"/api/approvals/{approval['id']}", json={"decision": "approve"})
        assert r.status_code == 200, r.text
        assert wait_for(lambda: final_text(c, key), timeout=60) == "done: 42"


def test_bad_input_is_a_tool_error_and_the_run_goes_on(services: ServiceProcesses) -> None:
    key = "main:mcp:bad"
    reply = ask(services, key, 'call srv__echo {"text": 7}')
    assert (
        reply
        == "done: Error: Invalid arguments for srv__echo: at 'text': 7 is not of type 'string'"
    )
    reply = ask(services, key, "call srv__nope {}")
    assert reply.startswith("done: Error: Unknown tool 'srv__nope': MCP server srv offers: ")
    reply = ask(services, key, "call srv__fail {}")  # the server's own error result
    assert reply == "done: Error: Error executing tool fail"
