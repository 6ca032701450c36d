"""What the e2e tests share: an authenticated HTTP client of the gateway, polling with a bound,
a session's transcript and live events (SSE), Prometheus samples, the services' JSON logs, the
lane lease of a session and its committed runs."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import nats
from nats.js.errors import KeyNotFoundError

from switchboard import bus
from switchboard.sessions import session_token
from tests.support.servers import run_sync


def client(url: str, token: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=10)


def wait_for(predicate: Callable[[], Any], timeout: float = 30.0, what: str = "") -> Any:
    """The first truthy value of ``predicate``, polled until ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"condition not met in {timeout:g}s{': ' + what if what else ''}")


def history(c: httpx.Client, key: str) -> list[dict[str, Any]]:
    r = c.get(f"/api/sessions/{key}/history")
    assert r.status_code == 200, r.text
    return list(r.json()["messages"])


def final_text(c: httpx.Client, key: str) -> str | None:
    messages = history(c, key)
    if not messages or messages[-1]["role"] != "assistant":
        return None
    return str(messages[-1]["content"][0].get("text"))


def next_reply(c: httpx.Client, key: str, before: int, timeout: float = 30.0) -> str:
    """The final text once the transcript grew past ``before`` messages."""
    return str(
        wait_for(lambda: len(history(c, key)) > before and final_text(c, key), timeout=timeout)
    )


class EventTap:
    """Reads a session's SSE event stream (``GET /api/sessions/{key}/events``) in a thread."""

    def __init__(self, url: str, token: str, key: str) -> None:
        self.events: list[dict[str, Any]] = []
        self.connected = threading.Event()
        self._client = client(url, token)
        self._thread = threading.Thread(target=self._read, args=(key,), daemon=True)
        self._thread.start()
        assert self.connected.wait(10), "the event stream did not connect"

    def _read(self, key: str) -> None:
        try:
            with self._client.stream("GET", f"/api/sessions/{key}/events", timeout=None) as r:
                for line in r.iter_lines():
                    self.connected.set()
                    if line.startswith("data: "):
                        self.events.append(json.loads(line[6:]))
        except httpx.HTTPError:
            pass  # closed at the end of the test

    def find(self, stream: str, phase: str, **fields: Any) -> list[dict[str, Any]]:
        """The events seen so far of ``stream``/``phase`` whose ``fields`` match."""
        return [
            e
            for e in list(self.events)
            if e["stream"] == stream
            and e["phase"] == phase
            and all(e.get(k) == v for k, v in fields.items())
        ]

    def wait(self, stream: str, phase: str, timeout: float = 30.0, **fields: Any) -> dict[str, Any]:
        """The first event of ``stream``/``phase`` with ``fields``, waiting for it."""
        found = wait_for(
            lambda: self.find(stream, phase, **fields), timeout, f"a {stream}/{phase} event"
        )
        return dict(found[0])

    def close(self) -> None:
        self._client.close()


def metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample in Prometheus text format (0 when absent)."""
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def json_lines(path: Path) -> list[dict[str, Any]]:
    """Every line of a service log, each parsed as JSON (a line that is not fails the test)."""
    out = []
    for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            parsed = json.loads(line)
        except ValueError as exc:
            raise AssertionError(f"{path.name}:{n} is not a JSON line: {line[:300]!r}") from exc
        assert isinstance(parsed, dict), f"{path.name}:{n} is not a JSON object: {line[:300]!r}"
        out.append(parsed)
    return out


def lease_owner(nats_url: str, session_key: str) -> str | None:
    """The owner named by the session's lane lease (KV ``sb_lane_leases``), or None."""

    async def read() -> str | None:
        nc = await nats.connect(nats_url)
        try:
            kv = await nc.jetstream().key_value(bus.Subjects().lease_bucket)
            try:
                entry = await kv.get(session_token(session_key))
            except KeyNotFoundError:
                return None
            return entry.value.decode() if entry.value else None
        finally:
            await nc.close()

    return asyncio.run(read())


def run_rows(database_url: str, session_key: str) -> list[dict[str, Any]]:
    """The session's committed runs as the agent stored them (``agent.runs``), oldest first."""

    async def fetch() -> list[dict[str, Any]]:
        conn = await asyncpg.connect(database_url)
        try:
            rows = await conn.fetch(
                "SELECT run_id, status, stop_reason, iterations FROM agent.runs"
                " WHERE session_key = $1 ORDER BY lane_seq",
                session_key,
            )
            return [dict(r) for r in rows]
        finally:
            await conn.close()

    return run_sync(fetch())
