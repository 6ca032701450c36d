"""The chaos driver: faults at random intervals (a seeded schedule), one at a time, each
logged with its time, target and how long the system took to be ready again. Kinds:

- ``kill``: SIGKILL a random service process (its whole process group); the supervisor
  restarts it.
- ``stop``: SIGSTOP an agent replica for longer than its lane lease (10 s) and the lanes'
  ack wait (15 s), then SIGCONT: the other replica takes its lanes meanwhile, and the stopped
  one must not answer twice when it wakes up.
- ``postgres``: stop PostgreSQL (fast shutdown: every connection is cut), start it again.
- ``nats``: SIGKILL one NATS node (the whole server when single), start it again.
- ``nats_all``: SIGKILL every NATS node at once (an outage of the whole bus), start them all
  again: the streams come back from the nodes' stores; meanwhile nothing is accepted.
- ``drop``: cut every live connection through the two proxies (clients to the gateway, agents
  to the model), mid request and mid stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import time
from datetime import UTC, datetime
from typing import Any

from switchboard.bus import LEASE_TTL_S
from tests.soak.system import System

KINDS = ("kill", "stop", "postgres", "nats", "nats_all", "drop")
WEIGHTS = (4, 1, 1, 2, 1, 2)
LANE_ACK_WAIT_S = 15.0  # the agent's SB_LANE_ACK_WAIT_S default
STOP_FOR_S = max(LEASE_TTL_S, LANE_ACK_WAIT_S) + 5.0
RECOVERY_S = 180.0


class Chaos:
    def __init__(
        self,
        system: System,
        rng: random.Random,
        gap_s: tuple[float, float] = (8.0, 25.0),
        plan: list[str] | None = None,
    ) -> None:
        """``plan``: these kinds in this order, then stop (else random kinds until stopped)."""
        self.system = system
        self.rng = rng
        self.gap_s = gap_s
        self.plan = list(plan) if plan is not None else None
        self.faults: list[dict[str, Any]] = []
        self.stopping = asyncio.Event()
        self.started = time.monotonic()

    def stop(self) -> None:
        self.stopping.set()

    async def run(self) -> None:
        while not self.stopping.is_set():
            try:
                await asyncio.wait_for(self.stopping.wait(), self.rng.uniform(*self.gap_s))
                return
            except TimeoutError:
                pass
            if self.plan is not None:
                if not self.plan:
                    return
                kind = self.plan.pop(0)
            else:
                kind = self.rng.choices(KINDS, WEIGHTS)[0]
            await self.inject(kind)

    async def inject(self, kind: str) -> None:
        began = time.monotonic()
        fault: dict[str, Any] = {
            "at": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "t_s": round(began - self.started, 1),
            "kind": kind,
        }
        self.faults.append(fault)
        fault["target"] = await getattr(self, f"_{kind}")()
        fault["held_s"] = round(time.monotonic() - began, 1)
        ready = await self.system.wait_ready(RECOVERY_S)
        fault["recovered_s"] = round(time.monotonic() - began, 1) if ready else None
        print(f"soak: fault {fault}", flush=True)

    async def _kill(self) -> str:
        candidates = [i for i in self.system.instances if i.pid is not None]
        inst = self.rng.choice(candidates)
        assert inst.pid is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(inst.pid, signal.SIGKILL)
        return inst.name

    async def _stop(self) -> str:
        agents = [i for i in self.system.instances if i.service.name == "agent" and i.pid]
        inst = self.rng.choice(agents)
        pid = inst.pid
        assert pid is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGSTOP)
        try:
            await asyncio.sleep(STOP_FOR_S)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGCONT)
        return f"{inst.name} for {STOP_FOR_S:g} s"

    async def _postgres(self) -> str:
        await asyncio.to_thread(self.system.postgres.stop)
        await asyncio.sleep(self.rng.uniform(1.0, 4.0))
        await asyncio.to_thread(self.system.postgres.start)
        return "postgres"

    async def _nats(self) -> str:
        nats = self.system.nats
        node = self.rng.randrange(nats.size)
        await asyncio.to_thread(nats.kill_node, node)
        await asyncio.sleep(self.rng.uniform(2.0, 6.0))
        await asyncio.to_thread(nats.restart_node, node)
        return f"node {node} of {nats.size}" if nats.size > 1 else "the whole server"

    async def _nats_all(self) -> str:
        nats = self.system.nats
        for node in range(nats.size):
            await asyncio.to_thread(nats.kill_node, node)
        await asyncio.sleep(self.rng.uniform(2.0, 6.0))
        # Together: a node of a cluster answers JetStream only once a quorum is back.
        await asyncio.gather(*(asyncio.to_thread(nats.restart_node, n) for n in range(nats.size)))
        return f"all {nats.size} nodes" if nats.size > 1 else "the whole server"

    async def _drop(self) -> str:
        gateway = self.system.gateway_proxy
        model = self.system.model_proxy
        assert gateway is not None and model is not None
        cut = gateway.drop_all(), model.drop_all()
        return f"{cut[0]} client and {cut[1]} model connections"
