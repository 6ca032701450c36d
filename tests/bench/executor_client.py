"""The agent's side of the executor protocol, for the executor benchmark: ToolCall protobufs
published straight onto JetStream ``sb.tools.call.default`` (as the agent's ToolDispatcher does),
ToolResults collected on the core subject ``sb.tools.result.<run id>``, a fixed number of calls
in flight."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections import Counter
from typing import Any

import nats
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from switchboard import bus
from switchboard.v1 import messages_pb2
from tests.bench.stats import summarize

AGENT = "bench"
CALL_TIMEOUT_S = 30.0


class Client:
    """One NATS connection playing the agent's part for one tools stack."""

    def __init__(self, nc: NATS, subjects: bus.Subjects) -> None:
        self.nc = nc
        self.js: JetStreamContext = nc.jetstream()
        self.subjects = subjects
        self.tag = os.urandom(4).hex()
        self.last: messages_pb2.ToolResult | None = None  # the last successful result

    @classmethod
    async def connect(cls, nats_url: str) -> Client:
        return cls(await nats.connect(nats_url, name="bench-tools-client"), bus.Subjects())

    async def close(self) -> None:
        await self.nc.close()

    async def wait_for_executors(self, replicas: int, timeout_s: float = 60.0) -> dict[str, Any]:
        """Until ``replicas`` pull requests wait on the executors' consumer (each executor keeps
        one fetch outstanding while it has a free slot): every replica probed and pulling."""
        start = time.monotonic()
        waiting = 0
        while time.monotonic() - start < timeout_s:
            try:
                info = await self.js.consumer_info(self.subjects.stream("TOOLS"), "executor")
                waiting = int(info.num_waiting or 0)
            except Exception:  # the consumer is created by the first executor to start
                waiting = 0
            if waiting >= replicas:
                break
            await asyncio.sleep(0.2)
        return {"pull_requests_waiting": waiting, "waited_s": round(time.monotonic() - start, 1)}

    async def one(self, tool: str, args: dict[str, Any]) -> str:
        """A single call (e.g. the set-up ``write``): its content; RuntimeError if it failed."""
        results = await self.run(tool, args, n=1, in_flight=1, warmup=0, cap_s=CALL_TIMEOUT_S)
        if results["ok"] != 1 or self.last is None:
            raise RuntimeError(f"{tool} failed: {results['errors']}")
        return self.last.content

    async def run(
        self, tool: str, args: dict[str, Any], n: int, in_flight: int, warmup: int, cap_s: float
    ) -> dict[str, Any]:
        """``warmup`` + ``n`` calls of ``tool``, ``in_flight`` at a time; the timed part's rate."""
        run_id = f"bench-{self.tag}-{tool}-{os.urandom(3).hex()}"
        self.last = None
        pending: dict[str, asyncio.Future[messages_pb2.ToolResult]] = {}
        loop = asyncio.get_running_loop()

        async def on_result(msg: Msg) -> None:
            result = messages_pb2.ToolResult()
            result.ParseFromString(msg.data)
            future = pending.pop(result.call_id, None)
            if future is not None and not future.done():
                future.set_result(result)

        sub = await self.nc.subscribe(self.subjects.tools_result(run_id), cb=on_result)
        await self.nc.flush()
        args_json = json.dumps(args)
        latency: list[float] = []
        executor_ms: list[float] = []
        errors: Counter[str] = Counter()
        counter = iter(range(warmup + n))

        async def call(i: int) -> None:
            call_id = f"c{i}"
            future = pending[call_id] = loop.create_future()
            message = messages_pb2.ToolCall(
                call_id=call_id,
                run_id=run_id,
                session_key=f"{AGENT}:bench:{self.tag}",
                agent=AGENT,
                tool=tool,
                args_json=args_json,
                profile="default",
                timeout_s=CALL_TIMEOUT_S,
            )
            start = time.perf_counter()
            subject = self.subjects.tools_call("default")
            await bus.js_publish(self.js, subject, message, msg_id=f"{run_id}:{call_id}")
            try:
                result = await asyncio.wait_for(future, CALL_TIMEOUT_S + 5)
            except TimeoutError:
                pending.pop(call_id, None)
                errors["no result in time"] += 1
                return
            if i < warmup:
                return
            if result.is_error:
                errors[result.content.strip()[:120]] += 1
                return
            latency.append((time.perf_counter() - start) * 1000)
            executor_ms.append(result.duration_ms)
            self.last = result

        timed_start = [0.0]

        async def slot() -> None:
            for i in counter:
                if i == warmup:
                    timed_start[0] = time.monotonic()
                await call(i)

        timed_start[0] = time.monotonic()
        tasks = [asyncio.create_task(slot()) for _ in range(max(1, in_flight))]
        try:
            done, _ = await asyncio.wait(tasks, timeout=cap_s)
            wall = time.monotonic() - timed_start[0]
            for task in done:
                task.result()  # a publish failure is a benchmark failure, not a statistic
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await sub.unsubscribe()
        ok = len(latency)
        if unfinished := n - ok - sum(errors.values()):
            errors["not finished within the time cap"] += unfinished
        return {
            "tool": tool,
            "args": args,
            "in_flight": in_flight,
            "calls": n,
            "ok": ok,
            "wall_s": round(wall, 3),
            "calls_per_s": round(ok / wall, 1) if wall > 0 else 0.0,
            "latency_ms": summarize(latency),
            "executor_ms": summarize(executor_ms),
            "errors": dict(errors),
        }
