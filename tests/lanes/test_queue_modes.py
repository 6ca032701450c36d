"""Queue modes against the real services: `steer` injects a message into the active run before
its next model call; `interrupt` aborts the active run (and its tool call in flight) and starts
on the new message."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from tests.fakes.llm import FakeLLM, FakeRequest, Reply
from tests.support.services import ServiceProcesses, with_fake_model


def script(req: FakeRequest) -> Reply:
    """ "slow" starts a long tool call and "first" a one-second one; any other message gets a
    quick tool call; after tool results, a text answer."""
    if req.last_tool_results:
        return Reply(text=f"done: {req.last_user_text}")
    if req.last_user_text == "slow":
        return Reply(tool_calls=[("exec", {"command": "sleep 30"})])
    if req.last_user_text == "first":
        return Reply(tool_calls=[("exec", {"command": "sleep 1"})])
    return Reply(tool_calls=[("get_time", {"timezone": "UTC"})])


@pytest.fixture
def services(tmp_path: Path, nats_url: str, database_url: str) -> Iterator[ServiceProcesses]:
    env = {"SB_EXEC_ALLOWLIST": '["sleep", "echo"]'}
    with with_fake_model(tmp_path, nats_url, database_url, script, env) as procs:
        yield procs


def client(services: ServiceProcesses) -> httpx.Client:
    headers = {"Authorization": f"Bearer {services.token}"}
    return httpx.Client(base_url=services.url, headers=headers, timeout=10)


def history(c: httpx.Client, key: str) -> list[dict]:
    return list(c.get(f"/api/sessions/{key}/history").json()["messages"])


def last_text(messages: list[dict]) -> str | None:
    if not messages or messages[-1]["role"] != "assistant":
        return None
    return messages[-1]["content"][0].get("text")


def wait_for(predicate: Callable[[], object], timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def sleeps() -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        if (p.info["cmdline"] or [])[-2:] == ["sleep", "30"]:
            found.append(p)
    return found


def test_steer_injects_into_the_active_run(services: ServiceProcesses) -> None:
    llm: FakeLLM = services.llm  # type: ignore[attr-defined]
    key = "main:modes:steer"
    with client(services) as c:
        assert c.patch(f"/api/sessions/{key}", json={"queue_mode": "steer"}).json() == {
            "session_key": key,
            "queue_mode": "steer",
            "tool_policy": None,
        }
        c.post(f"/api/sessions/{key}/messages", json={"text": "first"})
        assert wait_for(lambda: len(llm.calls) >= 1)  # the run is in its one-second tool call
        c.post(f"/api/sessions/{key}/messages", json={"text": "second"})
        assert wait_for(lambda: last_text(history(c, key)) == "done: second"), history(c, key)
        messages = history(c, key)
    texts = [(m["role"], b.get("text")) for m in messages for b in m["content"]]
    assert ("user", "first") in texts and ("user", "second") in texts
    # one run: the second message joined it before its second model call, no second run
    assert len({m["run_id"] for m in messages}) == 1, [
        (c.request.last_user_text, c.reply, c.status) for c in llm.calls
    ]
    assert messages[-1]["content"][0]["text"] == "done: second"
    # call 2 already saw "second" as the newest user message (it then asked for one more tool)
    assert [c.request.last_user_text for c in llm.calls] == ["first", "second", "second"]


def test_interrupt_aborts_the_run_and_its_tool_call(services: ServiceProcesses) -> None:
    key = "main:modes:interrupt"
    with client(services) as c:
        c.patch(f"/api/sessions/{key}", json={"queue_mode": "interrupt"})
        c.post(f"/api/sessions/{key}/messages", json={"text": "slow"})
        assert wait_for(lambda: bool(sleeps())), "the slow tool call never started"
        c.post(f"/api/sessions/{key}/messages", json={"text": "fast"})
        assert wait_for(lambda: not sleeps(), timeout=10), "the tool call was not cancelled"
        assert wait_for(
            lambda: (
                history(c, key)[-1:]
                and history(c, key)[-1]["role"] == "assistant"
                and history(c, key)[-1]["content"][0].get("text") == "done: fast"
            )
        )
        messages = history(c, key)
    runs = list(dict.fromkeys(m["run_id"] for m in messages))
    assert len(runs) == 2
    first = [m for m in messages if m["run_id"] == runs[0]]
    result = first[-1]["content"][0]
    assert result["type"] == "tool_result" and result["is_error"]
    assert "interrupted" in result["content"]
    assert os.environ.get("SB_QUEUE_MODE") is None  # the mode came from the session override
