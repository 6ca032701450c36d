"""Every sandboxed child dies with the executor (issue 25): a ``run`` still going when the
executor is SIGKILLed -- no clean-up code runs -- must not outlive it, under either wrapper, with
bubblewrap's namespaces or without them. Only long-running children (``spawn``) had the
parent-death signal before; a sandboxed ``sleep`` of a plain ``run`` without namespaces survived
(with them, bubblewrap's own ``--die-with-parent`` took it down).

The executor here is the smallest real spawning path, in a process of its own: the start-up
probe, then :meth:`LayeredSandbox.run` of ``sleep`` in a fresh temporary workspace, with every
layer the host has but the per-call cgroup (see ``EXECUTOR``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from switchboard_tools.sandbox.orphans import become_subreaper, reap_orphans

from .sandbox_checks import SANDBOX_UID, sandbox_processes, skip_or_fail, wait_until
from .wrappers import WRAPPERS, native_wrapper

# The executor: probes, says which layers a call gets, then runs `sleep` until it is killed.
EXECUTOR = """
import asyncio, json, sys
from pathlib import Path
from switchboard_tools.sandbox import probe_sandbox

async def main() -> None:
    wrapper, native, uid, workspace, namespaces = sys.argv[1:]
    sandbox = await probe_sandbox(uid=int(uid), wrapper=wrapper, native_path=native or None)
    # No per-call cgroup: the next executor's clean-up of a dead one's cgroups would kill the
    # sleep too, and the test is about the parent-death signal alone.
    layers = {**sandbox.available(), "cgroup": False}
    layers["namespaces"] = layers["namespaces"] and namespaces == "1"
    print(json.dumps({"wrapper": sandbox.layers.wrapper, "layers": layers}), flush=True)
    await sandbox.run(
        ["sleep", "300"], cwd=Path(workspace), timeout_s=300, output_cap=1024, layers=layers
    )

asyncio.run(main())
"""


@pytest.fixture(params=WRAPPERS)
def wrapper(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """``(kind, compiled wrapper path or "")``."""
    if request.param == "python":
        yield "python", ""
        return
    with native_wrapper() as path:
        yield "native", path


def _sleeps(workspace: Path) -> list[psutil.Process]:
    found = []
    for proc in sandbox_processes(workspace):
        with contextlib.suppress(psutil.Error):
            if proc.name() == "sleep":
                found.append(proc)
    return found


@pytest.mark.parametrize("namespaces", [True, False], ids=["namespaces", "no-namespaces"])
async def test_a_running_call_dies_with_a_killed_executor(
    wrapper: tuple[str, str], namespaces: bool, workspace: Path
) -> None:
    kind, native = wrapper
    # Orphans come to this process, not to pid 1 (which on some hosts kills what it adopts,
    # and would hide a survivor); the executor's own parent in production does not kill them.
    assert become_subreaper()
    args = [kind, native, str(SANDBOX_UID), str(workspace), "1" if namespaces else "0"]
    executor = await asyncio.create_subprocess_exec(
        sys.executable, "-c", EXECUTOR, *args, stdout=asyncio.subprocess.PIPE
    )
    try:
        assert executor.stdout is not None
        line = await asyncio.wait_for(executor.stdout.readline(), 60)
        assert line, f"the executor ended before its probe was done: {await executor.wait()}"
        probed = json.loads(line)
        assert probed["wrapper"] == kind, probed
        if namespaces and not probed["layers"]["namespaces"]:
            skip_or_fail(f"bubblewrap's namespaces do not work here: {probed}")
        assert await wait_until(lambda: bool(_sleeps(workspace)), timeout=60), (
            "the sandboxed sleep never started"
        )
        sleeps = _sleeps(workspace)

        executor.send_signal(signal.SIGKILL)  # no clean-up code runs in it
        await asyncio.wait_for(executor.wait(), 30)
        assert await wait_until(lambda: not _sleeps(workspace), timeout=30), [
            (p.pid, p.cmdline()) for p in sleeps if p.is_running()
        ]
    finally:
        if executor.returncode is None:
            executor.kill()
            await asyncio.wait_for(executor.wait(), 30)
        for proc in sandbox_processes(workspace):  # never leak a survivor into other tests
            with contextlib.suppress(psutil.Error):
                proc.kill()
        await wait_until(lambda: not sandbox_processes(workspace), timeout=10)
        reap_orphans()  # what died and was reparented to this process (a subreaper here)
