"""Long-running processes of the ``process`` tool, owned by one executor.

Each process runs under the executor's sandbox exactly like an exec command (same layers,
whole process group killed at the end), is limited in lifetime and in number per agent, and
keeps the last ``output_cap`` bytes of its output in a ring buffer. Handles are
``p_<executor id>_<n>``: the executor that owns a process is readable from its handle, so a
call that lands on another replica is forwarded to the owner (:mod:`switchboard_tools.procbus`,
the :class:`Peers` of this manager). Processes are scoped to the agent that started them and
to the workspace they run in (``scope``: the session whose private workspace it is, ``""`` for
the agent's, as :attr:`switchboard_tools.registry.ToolContext.workspace_session`): a session
working in a private workspace neither sees nor reaches the processes of the agent's workspace
(whose output may hold the owner's files) nor another session's, and theirs stay its own. The
limit per agent counts every scope.
"""

from __future__ import annotations

import asyncio
import codecs
import itertools
import re
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from switchboard_tools.errors import ToolError
from switchboard_tools.output import RingOutput
from switchboard_tools.sandbox import Child, ProfiledSandbox, SandboxProfile, SpawningSandbox

HANDLE = re.compile(r"p_([A-Za-z0-9-]{1,64})_([0-9]{1,18})")
GONE = (
    "the executor that started this process is gone (restarted or scaled down), and its "
    "processes were killed with it; start the command again"
)
_SHUTDOWN_WAIT_S = 10.0


@dataclass(frozen=True)
class ProcessLimits:
    max_per_agent: int = 4
    max_total: int = 64
    max_lifetime_s: float = 3600.0
    output_cap: int = 64 * 1024
    keep_finished_s: float = 600.0
    max_finished_per_agent: int = 16


class Peers(Protocol):
    """Reaches the other executors (see :class:`switchboard_tools.procbus.ProcessBus`)."""

    async def forward(self, executor: str, request: dict[str, Any]) -> dict[str, Any]: ...

    async def gather(self, request: dict[str, Any]) -> list[dict[str, Any]]:
        """The concatenated answers of every *other* executor to a broadcast ``request``."""
        ...


@dataclass
class Managed:
    handle: str
    agent: str
    scope: str
    command: str
    mode: str
    cwd: str
    child: Child
    lifetime_s: float
    started_at: float = field(default_factory=time.time)
    cursor: int = 0
    decoder: codecs.IncrementalDecoder = field(
        default_factory=lambda: codecs.getincrementaldecoder("utf-8")(errors="replace")
    )

    @property
    def running(self) -> bool:
        return not self.child.finished.is_set()

    def status(self) -> str:
        child = self.child
        if self.running:
            return "running"
        if child.killed:
            return "killed"
        if child.timed_out:
            return "timed_out"
        return "exited"

    def summary(self) -> dict[str, Any]:
        return {
            "handle": self.handle,
            "command": self.command,
            "mode": self.mode,
            "cwd": self.cwd,
            "status": self.status(),
            "running": self.running,
            "exit_code": self.child.exit_code,
            "runtime_s": round(self.child.duration_ms() / 1000, 3),
            "started_at": self.started_at,
            "lifetime_s": self.lifetime_s,
        }

    def read_new(self) -> dict[str, Any]:
        """The summary plus the output that arrived since the last read."""
        sink = self.child.sink
        assert isinstance(sink, RingOutput)
        data, dropped = sink.since(self.cursor)
        self.cursor = sink.total
        if dropped:
            self.decoder.reset()  # resynchronise after the gap
        text = self.decoder.decode(data, final=not self.running)
        return {**self.summary(), "output": text, "dropped_bytes": dropped}


async def wait_for_event(event: asyncio.Event, timeout: float) -> None:
    """Wait for ``event`` at most ``timeout`` seconds (no error when it is not set by then)."""
    if timeout <= 0 or event.is_set():
        return
    try:
        await asyncio.wait_for(event.wait(), timeout)
    except TimeoutError:
        return  # waited long enough: the caller reports the state as it is now


def owner_of(handle: str) -> str:
    m = HANDLE.fullmatch(handle)
    if m is None:
        raise ToolError(f"Invalid process handle {handle!r} (expected p_<executor>_<number>)")
    return m[1]


class ProcessManager:
    """This executor's processes, and the entry point for any process call (:meth:`request`
    and :meth:`list_all` reach the other executors through :attr:`peers`)."""

    def __init__(
        self,
        sandbox: SpawningSandbox,
        limits: ProcessLimits | None = None,
        *,
        executor_id: str | None = None,
        profile: SandboxProfile | None = None,
    ) -> None:
        self.sandbox = sandbox
        self.limits = limits or ProcessLimits()
        self.executor_id = executor_id or secrets.token_hex(6)
        self.profile = profile
        self.peers: Peers | None = None
        self._procs: dict[str, Managed] = {}
        self._numbers = itertools.count(1)
        self._starting: dict[str, int] = {}  # per agent: starts in progress count as running
        self._closed = False

    # -- this executor's processes --------------------------------------------------------

    async def start(
        self,
        agent: str,
        argv: list[str],
        *,
        cwd: Path,
        workspace: Path,
        command: str,
        mode: str,
        shown_cwd: str,
        lifetime_s: float | None = None,
        scope: str = "",
    ) -> Managed:
        if self._closed:
            raise ToolError("This executor is shutting down; start the process again")
        self._prune()
        running = sum(p.running for p in self._procs.values() if p.agent == agent)
        running += self._starting.get(agent, 0)
        if running >= self.limits.max_per_agent:
            raise ToolError(
                f"Too many processes: this agent already runs {running} (at most "
                f"{self.limits.max_per_agent}, in all its workspaces); kill one first (action "
                "'list' shows those of this workspace)"
            )
        total = sum(p.running for p in self._procs.values()) + sum(self._starting.values())
        if total >= self.limits.max_total:
            raise ToolError("Too many processes on this executor; try again later")
        self._starting[agent] = self._starting.get(agent, 0) + 1
        try:
            child, lifetime = await self._spawn(argv, cwd, workspace, lifetime_s)
        finally:
            self._starting[agent] -= 1
            if not self._starting[agent]:
                del self._starting[agent]
        if self._closed:  # shut down while it was starting
            child.kill()
            await child.finish()
            raise ToolError("This executor is shutting down; start the process again")
        handle = f"p_{self.executor_id}_{next(self._numbers)}"
        managed = Managed(handle, agent, scope, command, mode, shown_cwd, child, lifetime)
        self._procs[handle] = managed
        return managed

    async def _spawn(
        self, argv: list[str], cwd: Path, workspace: Path, lifetime_s: float | None
    ) -> tuple[Child, float]:
        lifetime = min(lifetime_s or self.limits.max_lifetime_s, self.limits.max_lifetime_s)
        cap = self.limits.output_cap
        if isinstance(self.sandbox, ProfiledSandbox):
            spawn: Any = self.sandbox.spawn  # the profiled signature (see SpawningSandbox)
            child: Child = await spawn(
                argv,
                cwd=cwd,
                lifetime_s=lifetime,
                output_cap=cap,
                profile=self.profile,
                workspace=workspace,
            )
        else:
            child = await self.sandbox.spawn(argv, cwd=cwd, lifetime_s=lifetime, output_cap=cap)
        return child, lifetime

    def get(self, agent: str, handle: str, scope: str = "") -> Managed:
        managed = self._procs.get(handle)
        if managed is None or managed.agent != agent or managed.scope != scope:
            raise ToolError(f"No process {handle} belongs to this agent (action 'list' shows them)")
        return managed

    async def poll_local(
        self, agent: str, handle: str, wait_s: float = 0.0, scope: str = ""
    ) -> dict[str, Any]:
        """New output since the last poll; with ``wait_s``, wait that long for some first."""
        managed = self.get(agent, handle, scope)
        child = managed.child
        if managed.running and child.sink.total == managed.cursor:
            child.activity.clear()  # set again by new output or the end
            await wait_for_event(child.activity, wait_s)
        return managed.read_new()

    async def kill_local(self, agent: str, handle: str, scope: str = "") -> dict[str, Any]:
        managed = self.get(agent, handle, scope)
        was_running = managed.running
        managed.child.kill()
        await wait_for_event(managed.child.finished, _SHUTDOWN_WAIT_S)
        return {**managed.read_new(), "was_running": was_running}

    def list_local(self, agent: str, scope: str = "") -> list[dict[str, Any]]:
        self._prune()
        mine = (p for p in self._procs.values() if p.agent == agent and p.scope == scope)
        return [p.summary() for p in mine]

    async def handle_request(self, request: dict[str, Any]) -> Any:
        """Serve one request from another executor (or from this one)."""
        op, agent = request.get("op"), str(request.get("agent", ""))
        scope = str(request.get("scope", ""))
        if op == "list":
            return self.list_local(agent, scope)
        handle = str(request.get("handle", ""))
        if op == "poll":
            wait_s = float(request.get("wait_s", 0.0))
            return await self.poll_local(agent, handle, wait_s, scope)
        if op == "kill":
            return await self.kill_local(agent, handle, scope)
        raise ToolError(f"unknown process operation {op!r}")

    async def shutdown(self) -> None:
        """Kill every process (the executor is stopping); refuse new ones."""
        self._closed = True
        for managed in self._procs.values():
            managed.child.kill()
        tasks = [p.child.supervisor for p in self._procs.values() if p.child.supervisor]
        if tasks:
            await asyncio.wait(tasks, timeout=_SHUTDOWN_WAIT_S)
        for managed in self._procs.values():
            await managed.child.finish()

    def _prune(self) -> None:
        """Forget finished processes that were kept long enough (or too many of them)."""
        now = time.monotonic()
        finished: dict[str, list[Managed]] = {}
        for managed in list(self._procs.values()):
            ended = managed.child.ended
            if managed.running or ended is None:
                continue
            if now - ended > self.limits.keep_finished_s:
                del self._procs[managed.handle]
            else:
                finished.setdefault(managed.agent, []).append(managed)
        for items in finished.values():
            items.sort(key=lambda p: p.child.ended or 0.0)
            for managed in items[: max(0, len(items) - self.limits.max_finished_per_agent)]:
                del self._procs[managed.handle]

    # -- any executor's processes -------------------------------------------------------

    async def request(
        self, op: str, agent: str, handle: str, wait_s: float = 0.0, scope: str = ""
    ) -> dict[str, Any]:
        """poll/kill ``handle`` wherever it runs: here, or forwarded to its owner."""
        owner = owner_of(handle)
        body = {"op": op, "agent": agent, "handle": handle, "wait_s": wait_s, "scope": scope}
        if owner == self.executor_id:
            result: dict[str, Any] = await self.handle_request(body)
            return result
        if self.peers is None:
            raise ToolError(f"Process {handle}: {GONE}")
        return await self.peers.forward(owner, body)

    async def list_all(self, agent: str, scope: str = "") -> list[dict[str, Any]]:
        """This agent's processes of ``scope`` here and on every other executor that answers
        in time."""
        items = self.list_local(agent, scope)
        if self.peers is not None:
            items += await self.peers.gather({"op": "list", "agent": agent, "scope": scope})
        return sorted(items, key=lambda item: float(item.get("started_at", 0.0)))
