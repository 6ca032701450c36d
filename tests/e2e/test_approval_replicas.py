"""A run waiting for an approval survives the death of the agent replica that holds its lane:
the OTHER replica takes the lease over, resumes the run from its checkpoint and finishes it
once the call is approved (two agent processes, no supervisor restarting the dead one)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from switchboard import registry
from switchboard.embedded import free_port
from tests.e2e.helpers import (
    EventTap,
    client,
    history,
    lease_owner,
    metric,
    run_rows,
    wait_for,
)
from tests.fakes.llm import FakeLLM, FakeRequest, Reply
from tests.support.servers import run_sync
from tests.support.services import ServiceProcesses, with_fake_model
from tests.support.streams import LANE_ACK_WAIT_TEST_S, short_lane_leases

SECOND = "agent-b"  # the second agent replica's instance name (the first one's is "agent")


class TwoAgentReplicas(ServiceProcesses):
    """The four services as plain processes plus a second agent replica with its own gRPC and
    ops ports; the gateway balances its gRPC calls over both. Nothing restarts a killed one."""

    def __init__(self, home: Path, nats_url: str, database_url: str, env: Mapping[str, str]):
        super().__init__(home, nats_url, database_url, env)
        agent = registry.get("agent")
        grpc = agent.port("grpc")
        assert grpc is not None
        self.grpc_setting = grpc.setting
        self.second_grpc_port = free_port()
        first = self.env[agent.addr_setting]
        self.env[agent.addr_setting] = f"{first},127.0.0.1:{self.second_grpc_port}"

    def start(self, timeout: float = 60.0) -> None:
        (self.home / "logs").mkdir(parents=True, exist_ok=True)
        for service in registry.SERVICES:
            self._spawn(service.name)
        self._spawn(SECOND, "agent", {self.grpc_setting: str(self.second_grpc_port)})
        if not (self.wait_ready(True, timeout) and self._second_ready(timeout)):
            self.stop()
            raise RuntimeError("services did not become ready")

    def _second_ready(self, timeout: float) -> bool:
        url = f"http://127.0.0.1:{self.ops_ports[SECOND]}/readyz"

        def ready() -> bool:
            try:
                return httpx.get(url, timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        try:
            wait_for(ready, timeout)
        except AssertionError:
            return False
        return True

    def metrics(self, name: str) -> str:
        return httpx.get(f"http://127.0.0.1:{self.ops_ports[name]}/metrics", timeout=5).text


def script(req: FakeRequest) -> Reply:
    if req.last_tool_results:
        return Reply(text="done: " + " | ".join(req.last_tool_results))
    return Reply(tool_calls=[("exec", {"command": req.last_user_text})])


@pytest.fixture
def replicas(tmp_path: Path, nats_url: str, database_url: str) -> Iterator[TwoAgentReplicas]:
    env = {
        "SB_EXEC_ALLOWLIST": '["echo"]',
        "SB_TOOL_APPROVALS": '["exec:command=echo guarded*"]',
        "SB_LOG_LEVEL": "INFO",
        "SB_LANE_ACK_WAIT_S": LANE_ACK_WAIT_TEST_S,  # the killed holder's lanes move sooner
    }
    run_sync(short_lane_leases(nats_url))
    with with_fake_model(tmp_path, nats_url, database_url, script, env, TwoAgentReplicas) as procs:
        assert isinstance(procs, TwoAgentReplicas)
        yield procs


def instance(owner: str | None) -> str | None:
    """The replica named by a lease value (``<instance>-<8 hex>``)."""
    return owner.rsplit("-", 1)[0] if owner else None


def answered(call: Any) -> Any:
    """``call()``'s response, or None while the gateway reports the agent unavailable (503: a
    call balanced onto the killed replica before its connection was seen gone)."""
    r = call()
    return None if r.status_code == 503 else r


def test_other_replica_resumes_a_waiting_run(replicas: TwoAgentReplicas, database_url: str) -> None:
    llm: FakeLLM = replicas.llm  # type: ignore[attr-defined]
    nats_url = replicas.env["SB_NATS_URL"]
    key = "main:approvals:replica"
    events = EventTap(replicas.url, replicas.token, key)
    try:
        with client(replicas.url, replicas.token) as c:

            def approvals(status: str = "") -> list[dict[str, Any]]:
                params = {"session_key": key, "status": status}
                r = wait_for(lambda: answered(lambda: c.get("/api/approvals", params=params)))
                assert r.status_code == 200, r.text
                return list(r.json()["approvals"])

            c.post(f"/api/sessions/{key}/messages", json={"text": "echo guarded-replica"})
            [approval] = wait_for(lambda: approvals("awaiting_approval"))
            first = events.wait("tool", "approval")
            run_id = first["run_id"]
            holder = instance(lease_owner(nats_url, key))
            assert holder in ("agent", SECOND), holder
            survivor = SECOND if holder == "agent" else "agent"
            calls_before = len(llm.calls)

            replicas.kill(holder)
            # The survivor takes the lease once the dead owner's expires, gets the lane item
            # redelivered, and resumes the run from its checkpoint: the same approval again.
            wait_for(
                lambda: instance(lease_owner(nats_url, key)) == survivor,
                timeout=90,
                what=f"{survivor} taking the lane lease",
            )
            resumed = events.wait("lifecycle", "start", timeout=90, data={"resumed": True})
            assert resumed["run_id"] == run_id
            wait_for(
                lambda: len(events.find("tool", "approval", run_id=run_id)) >= 2,
                what="the resumed run announcing its wait again",
            )
            assert [a["id"] for a in approvals()] == [approval["id"]]
            assert len(llm.calls) == calls_before  # nothing asked of the model meanwhile

            r = wait_for(
                lambda: answered(
                    lambda: c.post(f"/api/approvals/{approval['id']}", json={"decision": "approve"})
                )
            )
            assert r.status_code == 200, r.text
            end = events.wait("lifecycle", "end", timeout=60)
            messages = history(c, key)
    finally:
        events.close()
    assert replicas.procs[holder].poll() is not None  # the holder stayed dead
    assert end["run_id"] == run_id and end["text"] == "done: guarded-replica\n"
    # Exactly one more model call (the answer after the tool result), and one run.
    assert len(llm.calls) == calls_before + 1
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    assert {m["run_id"] for m in messages} == {run_id}
    assert [r["run_id"] for r in run_rows(database_url, key)] == [run_id]
    # The survivor finished it: its own counters show the run and the redelivery.
    survivor_metrics = replicas.metrics(survivor)
    assert metric(survivor_metrics, "sb_agent_runs_total", status="completed") == 1
    assert metric(survivor_metrics, "sb_lane_redeliveries_total") >= 1
