"""Turns through an OpenAI-compatible chat endpoint, the same code for every peer.

tests/bench/load.py drives Switchboard alone: its requests name the session in ``user`` and
its transcript check reads Switchboard's session API. Nanobot names the session in
``session_id`` (without it every request lands in one session, serialized by its lock), so
the request body comes from the peer here, and a turn counts when its reply carries the tool's
result (the whole tool loop ran).
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.bench.stats import Summary, summarize

Body = Callable[[str, str], dict[str, Any]]  # (session, text) -> the request's JSON body
PATH = "/v1/chat/completions"
REPLY_PREFIX = "Tool said:"  # tool_then_text's final answer, after a tool result came back


@dataclass(frozen=True)
class Endpoint:
    url: str  # http://127.0.0.1:PORT
    headers: dict[str, str]
    body: Body
    expect: str  # a piece of the tool's result that a complete reply carries


def check(resp: httpx.Response, expect: str) -> str:
    """'' for a complete reply of the tool loop, else what is wrong with it."""
    if resp.status_code != 200:
        return f"http {resp.status_code}"
    try:
        content = resp.json()["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        return "malformed reply"
    if not isinstance(content, str) or not content.startswith(REPLY_PREFIX):
        return "reply without a tool result"
    if expect not in content:
        return "reply without the expected tool result"
    return ""


def first_answer(
    ep: Endpoint, proc: subprocess.Popen[str], started: float, cap_s: float = 120.0
) -> float:
    """Seconds from ``started`` (time.monotonic() when the peer was launched) to its first
    complete answer; polls every 50 ms while the port refuses or the answer is incomplete."""
    deadline = started + cap_s
    last = "no answer"
    with httpx.Client(base_url=ep.url, headers=ep.headers, timeout=60.0, trust_env=False) as c:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"the peer exited ({proc.returncode}) before answering")
            try:
                last = check(c.post(PATH, json=ep.body("ready-check", "hello")), ep.expect)
            except httpx.HTTPError as exc:
                last = type(exc).__name__
            if not last:
                return round(time.monotonic() - started, 3)
            time.sleep(0.05)
    raise RuntimeError(f"no complete answer within {cap_s:.0f} s (last: {last})")


@dataclass
class Turns:
    ms: list[float] = field(default_factory=list)  # successful turns only
    errors: Counter[str] = field(default_factory=Counter)
    wall_s: float = 0.0

    @property
    def ok(self) -> int:
        return len(self.ms)

    def summary(self) -> Summary:
        return summarize(self.ms)


def sequential(ep: Endpoint, n: int, tag: str, warmup: int, cap_s: float) -> Turns:
    """``n`` turns one after another (after ``warmup`` unmeasured ones), each in a fresh
    session, over one persistent connection."""
    out = Turns()
    deadline = time.monotonic() + cap_s
    with httpx.Client(base_url=ep.url, headers=ep.headers, timeout=60.0, trust_env=False) as c:
        start_all = time.monotonic()
        for i in range(warmup + n):
            if time.monotonic() > deadline:
                out.errors["time cap reached"] += warmup + n - i
                break
            if i == warmup:
                start_all = time.monotonic()
            start = time.perf_counter()
            try:
                error = check(c.post(PATH, json=ep.body(f"seq-{tag}-{i}", f"turn {i}")), ep.expect)
            except httpx.HTTPError as exc:
                error = type(exc).__name__
            ms = (time.perf_counter() - start) * 1000
            if i < warmup:
                continue
            if error:
                out.errors[error] += 1
            else:
                out.ms.append(ms)
        out.wall_s = time.monotonic() - start_all
    return out


async def concurrent(ep: Endpoint, sessions: int, turns_each: int, tag: str, cap_s: float) -> Turns:
    """``sessions`` sessions at once, each sending ``turns_each`` turns one after another on
    its own connection; turns/s = successful turns over the wall time of the whole run."""
    out = Turns()
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1, keepalive_expiry=2.0)
    async with contextlib.AsyncExitStack() as stack:

        async def session(k: int) -> None:
            client = await stack.enter_async_context(
                httpx.AsyncClient(
                    base_url=ep.url,
                    headers=ep.headers,
                    limits=limits,
                    timeout=120.0,
                    trust_env=False,
                )
            )
            for i in range(turns_each):
                start = time.perf_counter()
                try:
                    resp = await client.post(PATH, json=ep.body(f"c-{tag}-{k}", f"m{i}"))
                    error = check(resp, ep.expect)
                except httpx.HTTPError as exc:
                    error = type(exc).__name__
                if error:
                    out.errors[error] += 1
                else:
                    out.ms.append((time.perf_counter() - start) * 1000)

        start = time.monotonic()
        tasks = [asyncio.create_task(session(k)) for k in range(sessions)]
        try:
            await asyncio.wait(tasks, timeout=cap_s)
            out.wall_s = time.monotonic() - start
        finally:  # time cap, Ctrl-C or error: no request outlives its client
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    missing = sessions * turns_each - out.ok - sum(out.errors.values())
    if missing:
        out.errors["not finished within the time cap"] += missing
    return out
