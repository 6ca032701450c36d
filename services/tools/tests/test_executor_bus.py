"""Real executor processes (``python -m switchboard_tools``) on a real nats-server, driven only
through the bus: process handles routed between two replicas that share the TOOLS work queue
(through their own ``executor`` consumer), a gone owner reported, and exec's partial output
streamed as ToolUpdate before the ToolResult."""

from __future__ import annotations

from collections.abc import AsyncIterator

import psutil
import pytest
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeoutError

from switchboard.v1 import messages_pb2
from switchboard_tools.procs import GONE, owner_of

from .executor_procs import SUBJECTS, ExecutorProcesses, Replica, ToolBus, details
from .sandbox_checks import wait_until

# The process started in the routing tests: it prints, then waits for a file the test creates.
MARKER = "sb-bus-marker"
COMMAND = f"echo ready; while [ ! -e go ]; do sleep 0.05; done; echo later; sleep 120 # {MARKER}"


@pytest.fixture
async def executors(nats_url: str) -> AsyncIterator[ExecutorProcesses]:
    # One slot each: a replica whose slot is taken pulls nothing more, which lets the test
    # decide which replica serves a call (see occupy()).
    env = {"SB_TOOLS_MAX_CONCURRENCY": "1", "SB_EXEC_MODE": "sandbox"}
    async with ExecutorProcesses(nats_url, env) as procs:
        yield procs


@pytest.fixture
async def client(nats_url: str) -> AsyncIterator[ToolBus]:
    tool_bus = await ToolBus.connect(nats_url)
    try:
        yield tool_bus
    finally:
        await tool_bus.close()


async def counts(replicas: list[Replica], tool: str = "process") -> dict[str, float]:
    return {r.name: await r.executions(tool) for r in replicas}


async def counted(replicas: list[Replica], total: float) -> dict[str, float]:
    """Each replica's own count of process calls, once together they counted ``total`` (a
    result is published just before the executor counts it)."""
    seen: dict[str, float] = {}

    async def reached() -> bool:
        seen.update(await counts(replicas))
        return sum(seen.values()) >= total

    assert await wait_until(reached), f"expected {total} process calls, replicas counted {seen}"
    assert sum(seen.values()) == total, seen
    return seen


def owner_among(replicas: list[Replica]) -> Replica:
    """The replica whose sandbox runs the test's process (it is that executor's descendant)."""
    owners = [r for r in replicas if r.sandboxed(MARKER)]
    assert len(owners) == 1, [(r.name, r.sandboxed(MARKER)) for r in replicas]
    return owners[0]


async def occupy(
    client: ToolBus, executors: ExecutorProcesses, replicas: list[Replica], busy: Replica
) -> str:
    """Take ``busy``'s only slot with an exec call that waits for a file, so that calls
    published from now on are pulled by the other replica. Returns that file's name."""
    ws = executors.workspace()
    held: list[tuple[str, Replica, messages_pb2.ToolCall]] = []
    for n in range(2):  # the first lands on either replica, the second on the one still free
        name = f"hold-{n}"
        args = {"command": f"while [ ! -e {name} ]; do sleep 0.05; done"}
        call = await client.publish("exec", args, timeout_s=120)

        async def taken(count: int = n + 1, name: str = name) -> bool:
            busy_slots = [await r.busy_slots() for r in replicas]
            return sum(busy_slots) == count and any(r.sandboxed(name) for r in replicas)

        assert await wait_until(taken), f"{name} was not taken"
        [holder] = [r for r in replicas if r.sandboxed(name)]
        held.append((name, holder, call))
        if holder is busy:
            break
    release = ""
    for name, holder, call in held:
        if holder is busy:
            release = name
        else:  # free the other replica again
            (ws / name).touch()
            result = await client.result(call)
            assert not result.is_error, result.content
    assert release, "the owner never took a hold call"
    return release


async def test_process_calls_are_routed_to_the_owning_replica(
    executors: ExecutorProcesses, client: ToolBus
) -> None:
    replicas = [await executors.start("tools-a"), await executors.start("tools-b")]
    await client.listen("sb.tools.result.>")
    start = {"action": "start", "command": COMMAND, "wait_s": 0}
    result = await client.call("process", start)
    assert not result.is_error, result.content
    handle = details(result)["handle"]
    owner = owner_among(replicas)
    other = next(r for r in replicas if r is not owner)
    base = await counted(replicas, 1)
    assert base[owner.name] == 1, "the replica that ran the start owns the process"
    executor_id = owner_of(handle)
    assert handle == f"p_{executor_id}_1"

    # Poll until both replicas have served polls (the work queue spreads them): every answer,
    # from the owner or forwarded by the other replica, is the same process's state.
    text = details(result)["output"]
    polls = 0
    served = {r.name: 0.0 for r in replicas}
    while min(served.values()) == 0:
        assert polls < 40, f"polls never reached both replicas: {served}"
        result = await client.call("process", {"action": "poll", "handle": handle})
        polls += 1
        assert not result.is_error, result.content
        poll = details(result)
        assert (poll["handle"], poll["status"], poll["running"]) == (handle, "running", True)
        text += poll["output"]
        assert "ready\n".startswith(text), text  # no output lost, repeated or invented
        now = await counted(replicas, 1 + polls)
        served = {name: now[name] - base[name] for name in now}
    assert all(n >= 1 for n in served.values()) and sum(served.values()) == polls

    # Now the process writes more; the rest arrives exactly once, whoever serves the poll.
    (executors.workspace() / "go").touch()
    for _ in range(40):
        if text == "ready\nlater\n":
            break
        wait = {"action": "poll", "handle": handle, "wait_s": 2}
        result = await client.call("process", wait)
        polls += 1
        assert not result.is_error, result.content
        text += details(result)["output"]
    assert text == "ready\nlater\n"

    # With the owner's only slot taken, every call below is served by the other replica.
    release = await occupy(client, executors, replicas, owner)
    before = await counted(replicas, 1 + polls)

    async def by_other(args: dict[str, object], agent: str = "agent-1") -> str:
        nonlocal before
        result = await client.call("process", args, agent)
        now = await counted(replicas, sum(before.values()) + 1)
        assert now[other.name] == before[other.name] + 1, "served by the owner"
        before = now
        return result.content if not result.is_error else f"ERROR {result.content}"

    listed = await by_other({"action": "list"})
    assert handle in listed and "running" in listed, listed
    assert await by_other({"action": "list"}, "agent-2") == "No processes."
    refused = await by_other({"action": "kill", "handle": handle}, "agent-2")
    assert refused.startswith("ERROR") and "No process" in refused  # the owner checks the agent
    assert owner.sandboxed(MARKER), "a refused kill killed the process"

    result = await client.call("process", {"action": "kill", "handle": handle})
    assert not result.is_error, result.content
    assert details(result)["status"] == "killed" and details(result)["was_running"] is True
    assert (await counted(replicas, sum(before.values()) + 1))[other.name] == before[other.name] + 1
    assert await wait_until(lambda: not owner.sandboxed(MARKER)), "the process still runs"

    (executors.workspace() / release).touch()


async def test_a_gone_owner_is_reported(executors: ExecutorProcesses, client: ToolBus) -> None:
    replicas = [await executors.start("tools-a"), await executors.start("tools-b")]
    await client.listen("sb.tools.result.>")
    command = f"sleep 120 # {MARKER}"
    start = {"action": "start", "command": command, "wait_s": 0}
    result = await client.call("process", start)
    assert not result.is_error, result.content
    handle = details(result)["handle"]
    owner = owner_among(replicas)
    survivor = next(r for r in replicas if r is not owner)
    sandboxed = owner.sandboxed(MARKER)
    assert sandboxed

    executors.kill(owner.name)  # SIGKILL: no shutdown code runs in the owner
    # Its processes die with it (parent-death signal, bubblewrap's --die-with-parent).
    assert await wait_until(lambda: not any(_running(p) for p in sandboxed)), sandboxed

    # Wait until the server dropped the dead connection's subscriptions (a request to the
    # owner finds no responder), so the poll below cannot race the disconnect.
    async def owner_unsubscribed() -> bool:
        try:
            await client.nc.request(SUBJECTS.tools_proc(owner_of(handle)), b"{}", timeout=1)
        except NoRespondersError:
            return True
        except NatsTimeoutError:
            return False
        raise AssertionError("a killed executor answered")

    assert await wait_until(owner_unsubscribed)

    result = await client.call("process", {"action": "poll", "handle": handle})
    assert result.is_error
    assert result.content == f"Process {handle}: {GONE}"
    assert "the executor that started this process is gone" in result.content

    async def survivor_served() -> bool:
        return await survivor.executions("process") == 1

    assert await wait_until(survivor_served)  # the poll, forwarded by the survivor
    result = await client.call("process", {"action": "list"})
    assert result.content == "No processes."


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


async def test_exec_streams_partial_output_before_the_result(
    executors: ExecutorProcesses, client: ToolBus
) -> None:
    await executors.start("tools-a")
    await client.listen("sb.tools.>")  # one subscription: arrival order is publish order
    # Each part waits for a file the test creates only after it saw the previous part as an
    # update: the result cannot exist before the updates did.
    command = (
        "echo part 1; while [ ! -e go-1 ]; do sleep 0.05; done; "
        "echo part 2; while [ ! -e go-2 ]; do sleep 0.05; done; echo part 3"
    )
    call = await client.publish("exec", {"command": command})
    ws = executors.workspace()
    first = await client.updates(call, 1)
    assert [u.text for u in first] == ["part 1\n"]
    assert client.order(call) == ["update"]
    (ws / "go-1").touch()
    second = await client.updates(call, 2)
    assert [u.text for u in second] == ["part 1\n", "part 2\n"]
    assert client.order(call) == ["update", "update"]
    (ws / "go-2").touch()

    result = await client.result(call)
    assert not result.is_error, result.content
    assert result.content == "part 1\npart 2\npart 3\n"
    updates = await client.updates(call, 3)
    assert [u.text for u in updates] == ["part 1\n", "part 2\n", "part 3\n"]
    assert client.order(call) == ["update", "update", "update", "result"]
    assert [u.seq for u in updates] == [1, 2, 3]
    assert {(u.call_id, u.run_id, u.stream) for u in updates} == {
        (result.call_id, result.run_id, "output")
    }
