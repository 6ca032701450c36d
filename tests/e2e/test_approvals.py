"""Tool policy, approvals and /tools/invoke against the real services: a call matching an
approval rule waits (in Postgres, not on an executor) until POST /api/approvals/{id}, or until
it expires; the wait survives a SIGKILL of the agent; a session policy refuses tools with a
readable error; sandboxed calls report the isolation measured in force.

One system for the module (each test its own session keys; counts compared before/after); the
test that kills the agent and the one with other settings start their own."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from tests.e2e import helpers
from tests.e2e.helpers import (
    EventTap,
    final_text,
    history,
    json_lines,
    metric,
    next_reply,
    wait_for,
)
from tests.fakes.llm import FakeLLM, FakeRequest, Reply
from tests.support.servers import run_sync
from tests.support.services import ServiceProcesses, with_fake_model
from tests.support.streams import LANE_ACK_WAIT_TEST_S, short_lane_leases
from tests.support.workers import sandbox_uid

LAYERS = ("seccomp", "landlock", "namespaces")


def script(req: FakeRequest) -> Reply:
    """``exec: <command>`` calls exec with that command, ``time`` calls get_time; after tool
    results the answer quotes them."""
    if req.last_tool_results:
        return Reply(text="done: " + " | ".join(req.last_tool_results))
    if req.last_user_text.startswith("exec: "):
        return Reply(tool_calls=[("exec", {"command": req.last_user_text[6:]})])
    if req.last_user_text.startswith("sh: "):
        args = {"command": req.last_user_text[4:]}
        return Reply(tool_calls=[("exec", args)])
    if req.last_user_text == "time":
        return Reply(tool_calls=[("get_time", {"timezone": "UTC"})])
    return Reply(text="hello")


GUARDED = {
    "SB_EXEC_MODE": "sandbox",  # the operator's choice: commands are shell lines
    "SB_TOOL_APPROVALS": '["exec:command=echo guarded*"]',
    # One run at a time: a run waiting for a person must lend its slot to others.
    "SB_AGENT_MAX_CONCURRENT_RUNS": "1",
}


@pytest.fixture(scope="module")
def services(
    tmp_path_factory: pytest.TempPathFactory, module_nats_url: str, module_database_url: str
) -> Iterator[ServiceProcesses]:
    home = tmp_path_factory.mktemp("approvals")
    with with_fake_model(home, module_nats_url, module_database_url, script, GUARDED) as procs:
        yield procs


@pytest.fixture
def restartable(tmp_path: Path, nats_url: str, database_url: str) -> Iterator[ServiceProcesses]:
    """The settings of ``services`` in a system of the test's own, since the test kills the
    agent (whose lanes then move after 4-5 s, not 10-15 s: short_lane_leases)."""
    run_sync(short_lane_leases(nats_url))
    env = {**GUARDED, "SB_LANE_ACK_WAIT_S": LANE_ACK_WAIT_TEST_S}
    with with_fake_model(tmp_path, nats_url, database_url, script, env) as procs:
        yield procs


@pytest.fixture
def expiring(tmp_path: Path, nats_url: str, database_url: str) -> Iterator[ServiceProcesses]:
    """Every exec call needs approval, and an approval expires after 2 s without a decision."""
    env = {
        "SB_EXEC_ALLOWLIST": '["echo"]',
        "SB_TOOL_APPROVALS": '["exec"]',
        "SB_APPROVAL_TIMEOUT_S": "2",
    }
    with with_fake_model(tmp_path, nats_url, database_url, script, env) as procs:
        yield procs


def client(services: ServiceProcesses, token: str | None = None) -> httpx.Client:
    return helpers.client(services.url, token or services.token)


def tap(services: ServiceProcesses, key: str) -> EventTap:
    return EventTap(services.url, services.token, key)


def waiting(c: httpx.Client, key: str) -> list[dict[str, Any]]:
    return approvals(c, key, "awaiting_approval")


def approvals(c: httpx.Client, key: str, status: str = "") -> list[dict[str, Any]]:
    params = {"session_key": key, **({"status": status} if status else {})}
    r = c.get("/api/approvals", params=params)
    assert r.status_code == 200, r.text
    return list(r.json()["approvals"])


def test_approve_deny_and_timestamps(services: ServiceProcesses) -> None:
    key = "main:approvals:flow"
    with client(services) as c:
        events = tap(services, key)
        try:
            c.post(f"/api/sessions/{key}/messages", json={"text": "exec: echo guarded-1"})
            [approval] = wait_for(lambda: waiting(c, key))
            assert approval["tool"] == "exec"
            assert approval["args"] == {"command": "echo guarded-1"}
            assert approval["rule"] == "exec:command=echo guarded*"
            # The run announced its wait (after saving its checkpoint): nothing ran, nothing was
            # committed.
            asked = events.wait("tool", "approval")
            assert asked["data"]["approval_id"] == approval["id"]
            assert asked["data"]["status"] == "awaiting_approval"
            assert history(c, key) == []
            # Meanwhile another session is served, though the agent runs one run at a time.
            other = "main:approvals:other"
            c.post(f"/api/sessions/{other}/messages", json={"text": "time"})
            assert next_reply(c, other, 0).startswith("done: ")
            assert history(c, key) == []
            assert not events.find("tool", "result")
            assert not events.find("lifecycle", "end")

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
            events.close()

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


def test_waiting_approval_survives_an_agent_kill(restartable: ServiceProcesses) -> None:
    services = restartable
    llm: FakeLLM = services.llm  # type: ignore[attr-defined]
    key = "main:approvals:restart"
    with client(services) as c:
        events = tap(services, key)
        try:
            c.post(f"/api/sessions/{key}/messages", json={"text": "exec: echo guarded-restart"})
            [approval] = wait_for(lambda: waiting(c, key))
            events.wait("tool", "approval")
            calls_before = len(llm.calls)
            services.restart("agent")
            # The new agent takes the lane over (lease expiry, redelivery), resumes the run from
            # its checkpoint and waits again on the same approval instead of asking anew.
            resumed = events.wait("lifecycle", "start", timeout=90, data={"resumed": True})
            run_id = resumed["run_id"]
            wait_for(
                lambda: len(events.find("tool", "approval", run_id=run_id)) >= 2,
                what="the resumed run announcing its wait again",
            )
            assert [a["id"] for a in approvals(c, key)] == [approval["id"]]
            assert [a["id"] for a in waiting(c, key)] == [approval["id"]]
            assert len(llm.calls) == calls_before  # nothing was asked of the model meanwhile
            r = c.post(f"/api/approvals/{approval['id']}", json={"decision": "approve"})
            assert r.status_code == 200
            assert wait_for(lambda: final_text(c, key), timeout=60) == "done: guarded-restart\n"
        finally:
            events.close()
        # Resumed from the checkpoint: the model was not asked for the tool call again.
        assert len(llm.calls) == calls_before + 1
        messages = history(c, key)
        assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
        assert {m["run_id"] for m in messages} == {run_id}


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
        assert body["isolation"]["measured"] is True

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


def test_exec_isolation_is_measured_in_force(services: ServiceProcesses) -> None:
    """Every layer the executor's start-up probe found working is in force in the sandboxed
    process (measured inside it), and a root executor drops the command to its sandbox uid
    (65534 unless SB_EXEC_SANDBOX_UID says otherwise: each test worker has its own)."""
    ready = [
        line
        for line in json_lines(services.home / "logs" / "tools.log")
        if line["msg"] == "tool executor ready"
    ]
    assert ready, "the tools service did not log its isolation at start-up"
    probe = ready[-1]["isolation"]["probe"]
    working = [layer for layer in LAYERS if probe.get(layer) == "ok"]
    with client(services) as c:
        r = c.post("/tools/invoke", json={"tool": "exec", "args": {"command": "echo hi"}})
        assert r.status_code == 200, r.text
        measured = r.json()["isolation"]
        sandboxed = {"command": "id -u"}
        r = c.post("/tools/invoke", json={"tool": "exec", "args": sandboxed})
        assert r.status_code == 200 and r.json()["ok"] is True, r.text
        id_output = r.json()["content"][0]["text"].strip()
    assert measured["measured"] is True
    for layer in working:
        assert measured[layer] is True, f"{layer} probed ok but not in force: {measured}"
    if not working:
        unavailable = ", ".join(f"{layer}: {probe.get(layer)}" for layer in LAYERS)
        if os.environ.get("CI") == "true":
            pytest.fail(f"no isolation layer works on this CI host ({unavailable})")
    executor_uid = psutil.Process(services.procs["tools"].pid).uids().effective
    if executor_uid != 0:
        why = f"the executor runs as uid {executor_uid}, not root: it has no uid to drop to"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{why}; CI must run the executor as root to check the uid drop")
        pytest.skip(why)
    assert measured["uid"] == sandbox_uid(), measured
    assert id_output == str(sandbox_uid())


def test_approval_expires_without_a_decision(expiring: ServiceProcesses) -> None:
    """SB_APPROVAL_TIMEOUT_S=2: an undecided call expires (decided by the system), the model
    gets the refusal as a tool error and answers, and a late decision is refused with 409."""
    llm: FakeLLM = expiring.llm  # type: ignore[attr-defined]
    key = "main:approvals:expiry"
    with client(expiring) as c:
        events = tap(expiring, key)
        try:
            c.post(f"/api/sessions/{key}/messages", json={"text": "exec: echo too-late"})
            [approval] = wait_for(lambda: waiting(c, key))  # it does wait first
            assert approval["rule"] == "exec"
            [expired] = wait_for(lambda: approvals(c, key, "expired"), what="the expiry")
            assert expired["id"] == approval["id"]
            assert expired["decided_by"] == "system"
            assert expired["reason"] == "no decision in time"
            assert expired["decided_at_ms"] >= expired["requested_at_ms"]
            assert expired["started_at_ms"] is None  # the command never ran
            text = next_reply(c, key, 0)
            result = events.wait("tool", "result")
        finally:
            events.close()
        refusal = "The call to exec was not approved (expired: no decision in time)."
        # The model saw the refusal as a tool error (the OpenAI wire format marks it "Error: ").
        assert llm.calls[-1].request.last_tool_results == [f"Error: {refusal}"]
        assert text == f"done: Error: {refusal}"
        assert result["data"]["is_error"] is True and result["text"] == refusal
        tool_result = history(c, key)[2]["content"][0]
        assert tool_result["type"] == "tool_result" and tool_result["is_error"] is True
        late = c.post(f"/api/approvals/{approval['id']}", json={"decision": "approve"})
        assert late.status_code == 409, late.text
        assert late.json()["error"]["code"] == "already_decided"
        assert [a["status"] for a in approvals(c, key)] == ["expired"]


def test_exec_output_streams_as_tool_update_events(services: ServiceProcesses) -> None:
    """Each line reaches the client as an update while the command still runs: the command
    waits for a file that the test creates only after it saw the line before (a handshake,
    so no timing is assumed)."""
    key = "main:approvals:stream"
    workspace = Path(services.env["SB_WORKSPACES_DIR"]) / "main"
    go1, go2 = (f"go-{n}-{os.urandom(4).hex()}" for n in (1, 2))  # none left from another run
    wait = "while [ ! -e {0} ]; do sleep 0.05; done"
    command = f"echo line1; {wait.format(go1)}; echo line2; {wait.format(go2)}; echo line3"
    with client(services) as c:
        events = tap(services, key)
        try:
            c.post(f"/api/sessions/{key}/messages", json={"text": f"sh: {command}"})
            for line, go in (("line1\n", go1), ("line2\n", go2)):

                def streamed(line: str = line) -> bool:
                    return line in "".join(e["text"] for e in events.find("tool", "update"))

                wait_for(streamed, what=f"{line.strip()} as an update before the command ended")
                assert not events.find("tool", "result")  # the command is still running
                (workspace / go).touch()
            events.wait("lifecycle", "end")
        finally:
            events.close()
    tool = [e for e in events.events if e["stream"] == "tool"]
    phases = [e["phase"] for e in tool]
    assert phases[0] == "start" and phases[-1] == "result", phases
    updates = [e["text"] for e in tool if e["phase"] == "update"]
    assert len(updates) >= 3, tool  # one piece per line at least: each came while it ran
    assert "".join(updates) == "line1\nline2\nline3\n"
    assert tool[-1]["text"] == "line1\nline2\nline3\n"
    seqs = [e["seq"] for e in events.events if e["run_id"] == tool[0]["run_id"]]
    assert seqs == sorted(seqs)


def test_every_service_exports_its_metrics(services: ServiceProcesses) -> None:
    key = "main:approvals:metrics"
    with client(services) as c:
        before = len(history(c, key))
        c.post(f"/api/sessions/{key}/messages", json={"text": "time"})
        next_reply(c, key, before)
    urls = {name: f"http://127.0.0.1:{port}" for name, port in services.ops_ports.items()}

    def scrape() -> dict[str, str] | None:
        """Every service's metrics once the consumers' backlog gauges are exported (their
        first refresh comes a few seconds after start-up)."""
        texts = {n: httpx.get(f"{url}/metrics", timeout=5).text for n, url in urls.items()}
        done = all("sb_consumer_backlog{" in texts[n] for n in ("agent", "tools"))
        return texts if done else None

    scraped = wait_for(scrape, what="the backlog gauges of agent and tools")
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
