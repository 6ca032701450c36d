"""Turns through the OpenAI-compatible API: sequential latency, one growing session, concurrent
throughput, and a check of every session's transcript."""

from __future__ import annotations

import asyncio
import contextlib
import math
import ssl
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.bench.stats import summarize
from tests.support.stack import Stack

AGENT = "main"  # the gateway's default agent: model "switchboard" talks to it
REPLY_PREFIX = "Tool said:"  # tool_then_text's final answer: the tool loop ran to the end
EXACT = "exactly one reply per turn"  # the verdict on a session's transcript that is right


@dataclass
class Turn:
    ok: bool
    ms: float
    error: str = ""


def _request(user: str, text: str) -> dict[str, Any]:
    return {"model": "switchboard", "user": user, "messages": [{"role": "user", "content": text}]}


def _check(resp: httpx.Response) -> str:
    """'' for a complete reply of the tool loop, else what is wrong with it."""
    if resp.status_code != 200:
        return f"http {resp.status_code}"
    try:
        content = resp.json()["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        return "malformed reply"
    if not isinstance(content, str) or not content.startswith(REPLY_PREFIX):
        return "reply without the tool result"
    return ""


def _auth(stack: Stack) -> dict[str, str]:
    return {"Authorization": f"Bearer {stack.token}"}


# --------------------------------------------------------------------------- sequential


@dataclass
class Sequential:
    turns: list[Turn] = field(default_factory=list)

    @property
    def ok_ms(self) -> list[float]:
        return [t.ms for t in self.turns if t.ok]

    @property
    def errors(self) -> dict[str, int]:
        return dict(Counter(t.error for t in self.turns if not t.ok))


def sequential_turns(
    stack: Stack, n: int, tag: str, warmup: int = 5, time_cap_s: float = 120.0
) -> Sequential:
    """``n`` turns one after another, each in a fresh session, over one persistent client."""
    out = Sequential()
    deadline = time.monotonic() + time_cap_s
    headers = _auth(stack)
    with httpx.Client(base_url=stack.url, headers=headers, timeout=30.0, trust_env=False) as client:
        for i in range(warmup + n):
            if time.monotonic() > deadline:
                out.turns.append(Turn(False, 0.0, "time cap reached"))
                break
            body = _request(f"seq-{tag}-{i}", f"turn {i}")
            start = time.perf_counter()
            try:
                error = _check(client.post("/v1/chat/completions", json=body))
            except httpx.HTTPError as exc:
                error = type(exc).__name__
            ms = (time.perf_counter() - start) * 1000
            if i >= warmup:
                out.turns.append(Turn(not error, ms, error))
    return out


def session_growth(stack: Stack, n: int, tag: str, time_cap_s: float = 60.0) -> dict[str, Any]:
    """``n`` turns one after another in one session: how a turn's time grows with the
    transcript (least-squares slope in ms per earlier turn)."""
    ms: list[float] = []
    errors: Counter[str] = Counter()
    with httpx.Client(
        base_url=stack.url, headers=_auth(stack), timeout=30.0, trust_env=False
    ) as client:
        deadline = time.monotonic() + time_cap_s
        for _ in range(n):
            if time.monotonic() > deadline:
                errors["time cap reached"] += 1
                break
            start = time.perf_counter()
            try:
                error = _check(client.post("/v1/chat/completions", json=_request(f"g-{tag}", "t")))
            except httpx.HTTPError as exc:
                error = type(exc).__name__
            ms.append((time.perf_counter() - start) * 1000 if not error else math.nan)
            if error:
                errors[error] += 1
    points = [(x, y) for x, y in enumerate(ms) if not math.isnan(y)]
    slope = math.nan
    if len(points) >= 2:
        mean_x = sum(x for x, _ in points) / len(points)
        mean_y = sum(y for _, y in points) / len(points)
        slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / sum(
            (x - mean_x) ** 2 for x, _ in points
        )
    edge = max(1, n // 6)  # how many turns make "the first" and "the last" ones
    return {
        "turns": len(ms),
        "first_turns_p50_ms": summarize([v for v in ms[:edge] if not math.isnan(v)])["p50"],
        "last_turns_p50_ms": summarize([v for v in ms[-edge:] if not math.isnan(v)])["p50"],
        "ms_per_earlier_turn": round(slope, 3),
        "latency_ms": [round(v, 1) for v in ms],
        "errors": dict(errors),
    }


# --------------------------------------------------------------------------- concurrent


@dataclass
class Throughput:
    concurrency: int
    sessions: int
    turns_per_session: int
    turns: list[Turn]
    wall_s: float
    unfinished: int
    users: list[str] = field(default_factory=list)
    history: dict[str, int] = field(default_factory=dict)  # after a grace period if needed
    history_at_end: dict[str, int] = field(default_factory=dict)  # right after the last reply
    settled_s: float = 0.0  # how long after the run the transcripts became exact

    @property
    def ok(self) -> int:
        return sum(t.ok for t in self.turns)

    @property
    def turns_per_s(self) -> float:
        return round(self.ok / self.wall_s, 2) if self.wall_s > 0 else 0.0

    @property
    def errors(self) -> dict[str, int]:
        errors = Counter(t.error for t in self.turns if not t.ok)
        if self.unfinished:
            errors["not finished within the time cap"] += self.unfinished
        return dict(errors)

    def as_dict(self) -> dict[str, Any]:
        return {
            "concurrent_sessions": self.concurrency,
            "sessions": self.sessions,
            "turns_per_session": self.turns_per_session,
            "turns_sent": self.sessions * self.turns_per_session,
            "turns_ok": self.ok,
            "wall_s": round(self.wall_s, 3),
            "turns_per_s": self.turns_per_s,
            "latency_ms": summarize([t.ms for t in self.turns if t.ok]),
            "errors": self.errors,
            "history_check": self.history,
            "history_check_at_end": self.history_at_end,
            "history_settled_s": round(self.settled_s, 1),
        }


async def concurrent_turns(
    stack: Stack, concurrency: int, turns_per_session: int, sessions: int, tag: str, cap_s: float
) -> Throughput:
    """``sessions`` sessions of ``turns_per_session`` turns, ``concurrency`` of them at a time;
    each session sends its turns one after another, and a finished session's slot takes the
    next one (so every level sees the same transcript lengths)."""
    results: list[Turn] = []
    users = [f"tp-{tag}-{concurrency}-{i}" for i in range(sessions)]
    todo = list(reversed(users))
    # One client with one connection per slot: a shared pool of 100 connections costs the
    # client O(connections x waiting requests) per event in httpcore's pool (it used 4-12 ms
    # of CPU per turn, taken from the stack under test on the same two cores). Idle
    # connections expire before uvicorn's 5 s keep-alive timeout could close one under a
    # request being sent on it (an httpx.ReadError that is the client's, not the system's).
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1, keepalive_expiry=2.0)
    tls = ssl.create_default_context()  # unused (http), but each client would load its own
    async with contextlib.AsyncExitStack() as clients:

        async def slot() -> None:
            client = await clients.enter_async_context(
                httpx.AsyncClient(
                    base_url=stack.url,
                    headers=_auth(stack),
                    limits=limits,
                    timeout=60.0,
                    trust_env=False,
                    verify=tls,
                )
            )
            while todo:
                user = todo.pop()
                for k in range(turns_per_session):
                    start = time.perf_counter()
                    try:
                        resp = await client.post(
                            "/v1/chat/completions", json=_request(user, f"m{k}")
                        )
                        error = _check(resp)
                    except httpx.HTTPError as exc:
                        error = type(exc).__name__
                    results.append(Turn(not error, (time.perf_counter() - start) * 1000, error))

        start = time.monotonic()
        tasks = [asyncio.create_task(slot()) for _ in range(min(concurrency, sessions))]
        try:
            await asyncio.wait(tasks, timeout=cap_s)
            wall = time.monotonic() - start
        finally:  # time cap, Ctrl-C or error: no request outlives the client
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        unfinished = sessions * turns_per_session - len(results)
    return Throughput(concurrency, sessions, turns_per_session, results, wall, unfinished, users)


async def verify(stack: Stack, run: Throughput, grace_s: float = 15.0) -> None:
    """Fill ``run.history`` from the sessions' transcripts (after the run, not timed); when
    some are not exact, look again for up to ``grace_s`` to tell late replies from lost ones."""
    async with httpx.AsyncClient(
        base_url=stack.url, headers=_auth(stack), timeout=10.0, trust_env=False
    ) as client:
        start = time.monotonic()
        run.history = run.history_at_end = await check_histories(
            client, run.users, run.turns_per_session
        )
        while set(run.history) != {EXACT} and time.monotonic() - start < grace_s:
            await asyncio.sleep(1.0)
            run.history = await check_histories(client, run.users, run.turns_per_session)
        if run.history != run.history_at_end:
            run.settled_s = time.monotonic() - start


async def check_histories(
    client: httpx.AsyncClient, users: list[str], expected: int
) -> dict[str, int]:
    """Every session's transcript holds exactly ``expected`` user turns, each answered by
    exactly one final reply in its own run; counts of sessions that do and do not."""
    sem = asyncio.Semaphore(16)
    verdicts: Counter[str] = Counter()

    async def one(user: str) -> None:
        async with sem:
            try:
                resp = await client.get(f"/api/sessions/{AGENT}:openai:{user}/history")
                messages = resp.json()["messages"] if resp.status_code == 200 else None
            except (httpx.HTTPError, ValueError, KeyError):
                messages = None
        if messages is None:
            verdicts["history unavailable"] += 1
            return
        asked = [m for m in messages if m["role"] == "user" and _has_text(m)]
        answers = [m for m in messages if m["role"] == "assistant" and _has_text(m)]
        runs = {m.get("run_id") for m in answers}
        if len(asked) == len(answers) == len(runs) == expected:
            verdicts[EXACT] += 1
        elif len(answers) > len(asked) or len(runs) < len(answers):
            verdicts["duplicate replies"] += 1
        else:
            verdicts["missing turns or replies"] += 1

    await asyncio.gather(*(one(u) for u in users))
    return dict(verdicts)


def _has_text(message: dict[str, Any]) -> bool:
    content = message.get("content")
    if isinstance(content, str):
        return bool(content)
    return any(isinstance(b, dict) and b.get("type") == "text" for b in content or [])
