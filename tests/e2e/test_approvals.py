"""Tool policy, approvals and /tools/invoke against the real services: a call matching an
approval rule waits (in Postgres, not on an executor) until POST /api/approvals/{id}; the wait
survives a SIGKILL of the agent; a session policy refuses tools with a readable error."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes.llm import FakeLLM, FakeRequest, Reply
from tests.support.services import ServiceProcesses, with_fake_model


def script(req: FakeRequest) -> Reply:
    """``exec: <command>`` calls exec with that command, ``time`` calls get_time; after tool
    results the answer quotes them."""
    if req.last_tool_results:
        return Reply(text="done: " + " | ".join(req.last_tool_results))
    if req.last_user_text.startswith("exec: "):
        return Reply(tool_calls=[("exec", {"command": req.last_user_text[6:]})])
    if req.last_user_text.startswith("sh: "):
        args = {"command": req.last_user_text[4:], "mode": "sandbox"}
        return Reply(tool_calls=[("exec", args)])
    if req.last_user_text == "time":
        return Reply(tool_calls=[("get_time", {"timezone": "UTC"})])
    return Reply(text="hello")


@pytest.fixture
def services(tmp_path: Path, nats_url: str, database_url: str) -> Iterator[ServiceProcesses]:
    env = {
        "SB_EXEC_ALLOWLIST": '["echo"]',
        "SB_TOOL_APPROVALS": '["exec:command=echo guarded*"]',
        # One run at a time: a run waiting for a person must lend its slot to others.
        "SB_AGENT_MAX_CONCURRENT_RUNS": "1",
    }
    with with_fake_model(tmp_path, nats_url, database_url, script, env) as procs:
        yield procs


def client(services: ServiceProcesses, token: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token or services.token}"}
    return httpx.Client(base_url=services.url, headers=headers, timeout=10)


def wait_for(predicate: Callable[[], Any], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


def history(c: httpx.Client, key: str) -> list[dict[str, Any]]:
    return list(c.get(f"/api/sessions/{key}/history").json()["messages"])


def final_text(c: httpx.Client, key: str) -> str | None:
    messages = history(c, key)
    if not messages or messages[-1]["role"] != "assistant":
        return None
    return str(messages[-1]["content"][0].get("text"))


def next_reply(c: httpx.Client, key: str, before: int, timeout: float = 30.0) -> str:
    """The final text once the transcript grew past ``before`` messages."""
    return str(
        wait_for(lambda: len(history(c, key)) > before and final_text(c, key), timeout=timeout)
    )


def waiting(c: httpx.Client, key: str) -> list[dict[str, Any]]:
    params = {"session_key": key, "status": "awaiting_approval"}
    return list(c.get("/api/approvals", params=params).json()["approvals"])


class EventTap:
    """Reads a session's SSE event stream in a thread."""

    def __init__(self, services: ServiceProcesses, key: str) -> None:
        self.events: list[dict[str, Any]] = []
        self.connected = threading.Event()
        self._client = client(services)
        self._thread = threading.Thread(target=self._read, args=(key,), daemon=True)
        self._thread.start()
        assert self.connected.wait(10)

    def _read(self, key: str) -> None:
        try:
            with self._client.stream("GET", f"/api/sessions/{key}/events", timeout=None) as r:
                for line in r.iter_lines():
                    self.connected.set()
                    if line.startswith("data: "):
                        self.events.append(json.loads(line[6:]))
        except httpx.HTTPError:
            pass  # closed at the end of the test

    def close(self) -> None:
        self._client.close()


def test_approve_deny_and_timestamps(services: ServiceProcesses) -> None:
    key = "main:approvals:flow"
    with client(services) as c:
        tap = EventTap(services, key)
        try:
            c.post(f"/api/sessions/{key}/messages", json={"text": "exec: echo guarded-1"})
            [approval] = wait_for(lambda: waiting(c, key))
            assert approval["tool"] == "exec"
            assert approval["args"] == {"command": "echo guarded-1"}
            assert approval["rule"] == "exec:command=echo guarded*"
            time.sleep(1.0)  # the run waits: nothing ran, nothing was committed
            assert history(c, key) == []
            # Meanwhile another session is served, though the agent runs one run at a time.
            other = "main:approvals:other"
            c.post(f"/api/sessions/{other}/messages", json={"text": "time"})
            assert next_reply(c, other, 0).startswith("done: ")
            assert history(c, key) == []
            phases = [(e["stream"], e["phase"]) for e in tap.events]
            assert ("tool", "approval") in phases
            assert ("tool", "result") not in phases

            r = c.post(f"/api/approvals/{approval['id']}", json={"decision": "approve"})
            assert r.status_code == 200 and r.json()["status"] == "approved"
            text = wait_for(lambda: final_text(c, key))
            assert text == "done: guarded-1\n"
            decided = c.get("/api/approvals", params={"session_key": key}).json()["approvals"][0]
            assert decided["status"] == "approved" and decided["decided_by"] == "api"
            stamps = [decided[f"{k}_at_ms"] for k in ("requested", "decided", "started")]
            assert all(stamps) and stamps == sorted(stamps)
            assert decided["finished_at_ms"] >= decided["started_at_ms"]
            again = c.post(f"/api/approvals/{approval['id']}", json={"decision": "deny"})
            assert again.status_code == 409
            assert c.post("/api/approvals/ap_nope", json={"decision": "deny"}).status_code == 404
            bad = c.post(f"/api/approvals/{approval['id']}", json={"decision": "maybe"})
            assert bad.status_code == 400
        finally:
            tap.close()

        # A denied call gets a readable error result; the run goes on and answers.
        before = len(history(c, key))
        c.post(f"/api/sessions/{key}/messages", json={"text": "exec: echo guarded-2"})
        [approval] = wait_for(lambda: waiting(c, key))
        r = c.post(
            f"/api/approvals/{approval['id']}", json={"decision": "deny", "reason": "not now"}
        )
        assert r.json()["status"] == "denied"
        assert "was not approved (denied: not now)" in next_reply(c, key, before)
        # An unguarded command runs without asking.
        before = len(history(c, key))
        c.post(f"/api/sessions/{key}/messages", json={"text": "exec: echo free"})
        assert next_reply(c, key, before) == "done: free\n"


def test_waiting_approval_survives_an_agent_kill(services: ServiceProcesses) -> None:
    llm: FakeLLM = services.llm  # type: ignore[attr-defined]
    key = "main:approvals:restart"
    with client(services) as c:
        c.post(f"/api/sessions/{key}/messages", json={"text": "exec: echo guarded-restart"})
        [approval] = wait_for(lambda: waiting(c, key))
        calls_before = len(llm.calls)
        services.restart("agent")
        # The new agent takes the lane over (lease expiry, redelivery) and waits again on the
        # same approval instead of asking anew.
        time.sleep(2)
        assert [a["id"] for a in waiting(c, key)] == [approval["id"]]
        r = c.post(f"/api/approvals/{approval['id']}", json={"decision": "approve"})
        assert r.status_code == 200
        assert wait_for(lambda: final_text(c, key), timeout=60) == "done: guarded-restart\n"
        # Resumed from the checkpoint: the model was not asked for the tool call again.
        assert len(llm.calls) == calls_before + 1
        messages = history(c, key)
        assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
        assert len({m["run_id"] for m in messages}) == 1


def test_session_policy_refuses_tools(services: ServiceProcesses) -> None:
    llm: FakeLLM = services.llm  # type: ignore[attr-defined]
    key = "main:approvals:policy"
    with client(services) as c:
        r = c.patch(f"/api/sessions/{key}", json={"tool_policy": {"deny": ["get_time"]}})
        assert r.status_code == 200
        assert r.json()["tool_policy"] == {"deny": ["get_time"]}
        bad = c.patch(f"/api/sessions/{key}", json={"tool_policy": {"profile": "everything"}})
        assert bad.status_code == 400 and "unknown profile" in bad.json()["error"]["message"]
        assert c.patch(f"/api/sessions/{key}", json={}).status_code == 400

        c.post(f"/api/sessions/{key}/messages", json={"text": "time"})
        text = wait_for(lambda: final_text(c, key))
        assert "get_time is denied by the session policy (deny: get_time)" in text
        offered = llm.calls[-1].request.tools
        assert "get_time" not in offered and "exec" in offered

        r = c.patch(f"/api/sessions/{key}", json={"tool_policy": None})
        assert r.json()["tool_policy"] is None
        before = len(history(c, key))
        c.post(f"/api/sessions/{key}/messages", json={"text": "time"})
        assert "denied" not in next_reply(c, key, before)


def test_tools_invoke(services: ServiceProcesses) -> None:
    with client(services) as c:
        r = c.post("/tools/invoke", json={"tool": "exec", "args": {"command": "echo hi"}})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["ok"] is True and body["content"] == [{"type": "text", "text": "hi\n"}]
        assert body["isolation"]["uid"] != 0 and "namespaces" in body["isolation"]

        dry = c.post("/tools/invoke", json={"tool": "get_time", "args": {}, "dryRun": True})
        assert dry.status_code == 200 and dry.json()["dryRun"] is True

        failed = c.post("/tools/invoke", json={"tool": "read", "args": {"path": "/etc/passwd"}})
        assert failed.status_code == 200 and failed.json()["ok"] is False
        assert "outside the workspace" in failed.json()["content"][0]["text"]

        def status(body: dict[str, Any]) -> tuple[int, str | None]:
            r = c.post("/tools/invoke", json=body)
            return r.status_code, r.json()["error"].get("code")

        assert status({"tool": "nope"}) == (404, "unknown_tool")
        assert status({"tool": "exec", "args": {"command": 5}}) == (400, "invalid_arguments")
        guarded = {"tool": "exec", "args": {"command": "echo guarded-x"}}
        assert status(guarded) == (403, "approval_required")
        key = "main:approvals:invoke"
        c.patch(f"/api/sessions/{key}", json={"tool_policy": {"profile": "minimal"}})
        denied = {"tool": "exec", "args": {"command": "echo hi"}, "sessionKey": key}
        assert status(denied) == (403, "policy_denied")
        assert status({"tool": "get_time", "sessionKey": "bad key"})[0] == 400

    with client(services, token="wrong") as c:
        assert c.post("/tools/invoke", json={"tool": "get_time"}).status_code == 401
        assert c.get("/api/approvals").status_code == 401


def test_exec_output_streams_as_tool_update_events(services: ServiceProcesses) -> None:
    key = "main:approvals:stream"
    with client(services) as c:
        tap = EventTap(services, key)
        try:
            command = "for i in 1 2 3; do echo line$i; sleep 0.4; done"
            c.post(f"/api/sessions/{key}/messages", json={"text": f"sh: {command}"})
            wait_for(lambda: any(e["phase"] == "end" for e in tap.events))
        finally:
            tap.close()
    tool = [e for e in tap.events if e["stream"] == "tool"]
    phases = [e["phase"] for e in tool]
    assert phases[0] == "start" and phases[-1] == "result", phases
    updates = [e["text"] for e in tool if e["phase"] == "update"]
    assert len(updates) >= 2, tool  # the lines came while the command ran, not in one piece
    assert "".join(updates) == "line1\nline2\nline3\n"
    assert tool[-1]["text"] == "line1\nline2\nline3\n"
    seqs = [e["seq"] for e in tap.events if e["run_id"] == tool[0]["run_id"]]
    assert seqs == sorted(seqs)


def metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample in Prometheus text format (0 when absent)."""
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_every_service_exports_its_metrics(services: ServiceProcesses) -> None:
    key = "main:approvals:metrics"
    with client(services) as c:
        before = len(history(c, key))
        c.post(f"/api/sessions/{key}/messages", json={"text": "time"})
        next_reply(c, key, before)
    time.sleep(5.5)  # one backlog refresh
    urls = {name: f"http://127.0.0.1:{port}" for name, port in services.ops_ports.items()}
    urls["gateway"] = services.url  # the gateway serves its ops endpoints on its HTTP port
    scraped = {name: httpx.get(f"{url}/metrics", timeout=5).text for name, url in urls.items()}
    assert metric(scraped["gateway"], "sb_inbound_messages_total", channel="api") >= 1
    assert metric(scraped["router"], "sb_router_messages_total", channel="api") >= 1
    agent = scraped["agent"]
    assert metric(agent, "sb_agent_runs_total", status="completed") >= 1
    assert metric(agent, "sb_lane_wait_seconds_count") >= 1
    assert metric(agent, "sb_agent_run_seconds_count") >= 1
    assert 'sb_consumer_backlog{consumer="dispatch",kind="pending",stream="LANES"}' in agent
    tools = scraped["tools"]
    assert metric(tools, "sb_tool_executions_total", tool="get_time", outcome="ok") >= 1
    assert 'sb_consumer_backlog{consumer="executor",kind="pending",stream="TOOLS"}' in tools
