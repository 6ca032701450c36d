"""Queue modes against the real services: `steer` injects a message into the active run before
its next model call; `interrupt` aborts the active run (and its tool call in flight) and starts
on the new message. The agent runs with SB_QUEUE_MODE=collect, so each mode here is the
session's override winning over the agent's default (which a control session shows in force).
One system for the module: each test its own sessions, the fake model's calls reset before
each.

Nothing here races the clock: the steered message is known to be on the lane while the run's
tool call is known to be running (a sandboxed command that waits for a file the test creates)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import nats
import psutil
import pytest

from switchboard.v1 import messages_pb2
from tests.fakes.llm import FakeLLM, FakeRequest, Reply
from tests.lanes.pipeline import settle
from tests.support.services import ServiceProcesses, fresh_model, with_fake_model
from tests.support.streams import stored

# The steer test's hold: its tool call creates STARTED, then waits (bounded) for GO.
STARTED, GO = "steer-started.flag", "steer-go.flag"
HOLD_ROUNDS = 1000  # of 0.05 s: the command gives up by itself after 50 s or more


def hold_command() -> str:
    """A sandboxed shell line that marks that it runs, then waits for the test's go-file."""
    return (
        f"touch {STARTED}; i=0; "
        f"while [ ! -e {GO} ] && [ $i -lt {HOLD_ROUNDS} ]; do sleep 0.05; i=$((i+1)); done; "
        f"if [ -e {GO} ]; then echo released; else echo never released; exit 1; fi"
    )


def script(req: FakeRequest) -> Reply:
    """ "slow" starts a long tool call and "first" one that runs until the test lets it go; any
    other message gets a quick tool call; after tool results, a text answer."""
    if req.last_tool_results:
        return Reply(text=f"done: {req.last_user_text}")
    if req.last_user_text == "slow":
        return Reply(tool_calls=[("exec", {"command": "sleep 30"})])
    if req.last_user_text == "first":
        return Reply(tool_calls=[("exec", {"command": hold_command(), "timeout_s": 60})])
    return Reply(tool_calls=[("get_time", {"timezone": "UTC"})])


@pytest.fixture(scope="module")
def system(
    tmp_path_factory: pytest.TempPathFactory, module_nats_url: str, module_database_url: str
) -> Iterator[ServiceProcesses]:
    env = {
        "SB_EXEC_ALLOWLIST": '["sleep", "echo"]',
        "SB_EXEC_MODE": "sandbox",  # the steer test's hold is a shell line
        "SB_QUEUE_MODE": "collect",
    }
    home = tmp_path_factory.mktemp("queue-modes")
    with with_fake_model(home, module_nats_url, module_database_url, script, env) as procs:
        yield procs


@pytest.fixture
def services(system: ServiceProcesses) -> ServiceProcesses:
    fresh_model(system)
    return system


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


def sleeps(services: ServiceProcesses) -> list[psutil.Process]:
    """The `sleep 30` processes the tools service runs (not another test's on this machine)."""
    found = []
    for p in psutil.Process(services.procs["tools"].pid).children(recursive=True):
        try:
            if p.cmdline()[-2:] == ["sleep", "30"]:
                found.append(p)
        except psutil.NoSuchProcess:
            continue
    return found


def on_lane(services: ServiceProcesses, key: str, text: str) -> bool:
    """Whether the LANES stream holds an item of session ``key`` with ``text``: the router
    routed it, so the run's next look at its lane (a steer) finds it."""

    async def read() -> bool:
        nc = await nats.connect(services.nats_url)
        try:
            items = await stored(nc.jetstream(), "LANES", messages_pb2.LaneItem)
        finally:
            await nc.close()
        return any(i.message.session_key == key and i.message.message.text == text for i in items)

    return asyncio.run(read())


def started_in(services: ServiceProcesses) -> Path | None:
    """The workspace the held tool call runs in, once it created its start mark."""
    found = next(Path(services.env["SB_WORKSPACES_DIR"]).rglob(STARTED), None)
    return found.parent if found else None


def test_steer_injects_into_the_active_run(services: ServiceProcesses) -> None:
    """The second message is on the session's lane while the first run's tool call is known to
    run (it waits for the test's go-file); only then does the tool call end. The run's next
    model call must carry it: one run, no second one."""
    llm: FakeLLM = services.llm  # type: ignore[attr-defined]
    key = "main:modes:steer"
    with client(services) as c:
        assert c.patch(f"/api/sessions/{key}", json={"queue_mode": "steer"}).json() == {
            "session_key": key,
            "queue_mode": "steer",
            "tool_policy": None,
            "model": "default",
        }
        c.post(f"/api/sessions/{key}/messages", json={"text": "first"})
        assert wait_for(lambda: started_in(services)), "the held tool call never started"
        workspace = started_in(services)
        assert workspace is not None
        c.post(f"/api/sessions/{key}/messages", json={"text": "second"})
        assert wait_for(lambda: on_lane(services, key, "second"), 45), "second is not on the lane"
        assert len(llm.calls) == 1  # the run is still in its first tool call
        (workspace / GO).touch()
        assert wait_for(lambda: last_text(history(c, key)) == "done: second"), history(c, key)
        messages = history(c, key)
    texts = [(m["role"], b.get("text")) for m in messages for b in m["content"]]
    assert ("user", "first") in texts and ("user", "second") in texts
    held = next(b for m in messages for b in m["content"] if b["type"] == "tool_result")
    assert not held["is_error"] and "released" in str(held["content"]), held
    # one run: the second message joined it before its second model call, no second run
    assert len({m["run_id"] for m in messages}) == 1, [
        (c.request.last_user_text, c.reply, c.status) for c in llm.calls
    ]
    assert messages[-1]["content"][0]["text"] == "done: second"
    # call 2 already saw "second" as the newest user message (it then asked for one more tool)
    assert [c.request.last_user_text for c in llm.calls] == ["first", "second", "second"]


def user_texts(message: dict) -> list[str]:
    return [b["text"] for b in message["content"] if b["type"] == "text"]


def test_interrupt_aborts_the_run_and_its_tool_call(services: ServiceProcesses) -> None:
    """The session's `interrupt` beats the agent's `collect`: the newer message aborts the run
    in its tool call (two runs, the first closed by an "interrupted" tool result). Under the
    agent's collect the sleep would run its 30 s; a control session without an override, fed
    two quick messages, shows collect in force (one run answering both)."""
    key, control = "main:modes:interrupt", "main:modes:agent-default"
    with client(services) as c:
        patched = c.patch(f"/api/sessions/{key}", json={"queue_mode": "interrupt"}).json()
        assert patched["queue_mode"] == "interrupt"
        for text in ("one", "two"):  # well inside collect's 2 s window
            assert c.post(f"/api/sessions/{control}/messages", json={"text": text}).is_success
        c.post(f"/api/sessions/{key}/messages", json={"text": "slow"})
        assert wait_for(lambda: bool(sleeps(services))), "the slow tool call never started"
        c.post(f"/api/sessions/{key}/messages", json={"text": "fast"})
        # (Below the sleep's 30 s; a sleep that ended on its own leaves no "interrupted" result.)
        assert wait_for(lambda: not sleeps(services), timeout=25), (
            "the tool call was not cancelled: the session's interrupt did not apply"
        )
        assert wait_for(
            lambda: (
                history(c, key)[-1:]
                and history(c, key)[-1]["role"] == "assistant"
                and history(c, key)[-1]["content"][0].get("text") == "done: fast"
            )
        )
        settle(services.env["SB_NATS_URL"])  # every message routed and answered
        messages = history(c, key)
        defaults = history(c, control)
    runs = list(dict.fromkeys(m["run_id"] for m in messages))
    assert len(runs) == 2
    first = [m for m in messages if m["run_id"] == runs[0]]
    result = first[-1]["content"][0]
    assert result["type"] == "tool_result" and result["is_error"]
    assert "interrupted" in result["content"]
    second = [m for m in messages if m["run_id"] == runs[1]]
    assert user_texts(second[0]) == ["fast"]
    # The agent's default in these services is collect: one run answered both messages.
    assert len({m["run_id"] for m in defaults}) == 1, defaults
    assert user_texts(defaults[0]) == ["one", "two"], defaults
    assert defaults[-1]["role"] == "assistant", defaults
