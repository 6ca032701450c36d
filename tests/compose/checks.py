"""What the Compose smoke run checks once the stack is up: one message through the OpenAI API
with a tool call, its trace across the services, and the metrics Prometheus scraped."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
import openai

from switchboard import registry

from .fake_model import model_named
from .stack import Stack

T = TypeVar("T")
# The services one message passes through (the trace must show each of them).
TRACED = ("gateway", "router", "agent", "tools")
# What Prometheus scrapes (deploy/prometheus/prometheus.yml): every service, every replica.
SCRAPED = frozenset(registry.names())


class CheckFailed(Exception):
    """A check of the smoke run failed; the message says what was seen instead."""


def wait_for(probe: Callable[[], T | None], timeout: float, what: str) -> T:
    """Poll ``probe`` until it returns something (not None) or ``timeout`` runs out."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise CheckFailed(f"{what}: not seen within {timeout:.0f} s")
        time.sleep(2)


@dataclass
class Message:
    reply: str
    trace_id: str
    model: str | None  # the model the agent asked the fake model for (its reply names it)


def send_message(base_url: str, token: str, user: str = "compose-smoke") -> Message:
    """One chat completion with a W3C traceparent of our own, so its trace id is known."""
    trace_id = os.urandom(16).hex()
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key=token, max_retries=0, timeout=300)
    completion = client.chat.completions.create(
        model="switchboard",
        messages=[{"role": "user", "content": "What time is it in UTC?"}],
        user=user,
        extra_headers={"traceparent": f"00-{trace_id}-{os.urandom(8).hex()}-01"},
    )
    reply = completion.choices[0].message.content or ""
    # The fake model's second answer quotes the tool's result: get_time ran in the tools
    # service and its output (the current year) came back through agent and gateway.
    if not reply.startswith("Tool said: ") or time.strftime("%Y", time.gmtime()) not in reply:
        raise CheckFailed(f"the reply is not the tool's result: {reply!r}")
    return Message(reply, trace_id, model_named(reply))


def json_lines(lines: list[str]) -> list[dict[str, Any]]:
    parsed = []
    for line in lines:
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            parsed.append(value)
    return parsed


def traced_lines(stack: Stack, trace_id: str) -> dict[str, list[dict[str, Any]]]:
    return {
        service: [x for x in json_lines(stack.logs(service)) if x.get("trace_id") == trace_id]
        for service in TRACED
    }


def check_trace(stack: Stack, trace_id: str) -> dict[str, int]:
    """Every service the message passed through logged under its trace id (JSON log lines
    carry the current span's trace id: switchboard.logs). Lines per service."""

    def complete() -> dict[str, int] | None:
        lines = traced_lines(stack, trace_id)
        return {s: len(v) for s, v in lines.items()} if all(lines.values()) else None

    try:
        return wait_for(complete, 60, f"log lines with trace_id {trace_id}")
    except CheckFailed as exc:
        seen = {s: len(v) for s, v in traced_lines(stack, trace_id).items()}
        raise CheckFailed(f"{exc}; lines per service: {seen}") from None


# The spans one message makes along its path (tests/e2e/test_e2e.py asserts their parentage).
SPANS = frozenset(
    {"gateway.receive", "router.route", "agent.run", "llm.call", "tool.call", "tools.execute"}
)


def check_backend_trace(base_url: str, trace_id: str) -> list[str]:
    """The trace backend received the message's spans from every service on its path (over
    OTLP, batched: they come within seconds). Their names."""

    def received() -> list[str] | None:
        response = httpx.get(
            f"{base_url}/v1/projects/default/spans",
            params={"trace_id": trace_id, "limit": 1000},
            timeout=10,
        )
        response.raise_for_status()
        names = sorted(span["name"] for span in response.json()["data"])
        return names if set(names) >= SPANS else None

    try:
        return wait_for(received, 60, f"the spans of trace {trace_id} in the trace backend")
    except CheckFailed as exc:
        raise CheckFailed(f"{exc}; wanted {sorted(SPANS)}") from None


def prometheus_value(base_url: str, query: str) -> float | None:
    """The one value of an instant query (None: no series yet)."""
    response = httpx.get(f"{base_url}/api/v1/query", params={"query": query}, timeout=10)
    response.raise_for_status()
    result = response.json()["data"]["result"]
    return float(result[0]["value"][1]) if result else None


# What Prometheus must show after the message (query -> the least value).
METRICS = {
    "sum(sb_gateway_requests_total)": 1.0,
    "sum(sb_agent_runs_total)": 1.0,
    'sum(sb_agent_tool_calls_total{tool="get_time"})': 1.0,
    "sum(sb_tool_executions_total)": 1.0,
}


def check_metrics(base_url: str, targets: int) -> dict[str, float]:
    """Prometheus scrapes every replica of every service (``up``), and the counters of the
    message's path have counted it."""

    def scraped() -> dict[str, float] | None:
        up = prometheus_value(base_url, 'count(up{job=~"switchboard-.*"} == 1)')
        if up is None or up < targets:
            return None
        values = {"targets up": up}
        for query, least in METRICS.items():
            value = prometheus_value(base_url, query)
            if value is None or value < least:
                return None
            values[query] = value
        return values

    try:
        return wait_for(scraped, 120, "the message's metrics in Prometheus")
    except CheckFailed as exc:
        seen = {q: prometheus_value(base_url, q) for q in ["count(up == 1)", *METRICS]}
        down = httpx.get(f"{base_url}/api/v1/targets", timeout=10).json()["data"]
        health = [
            (t["labels"].get("instance"), t["health"], t.get("lastError", ""))
            for t in down["activeTargets"]
        ]
        raise CheckFailed(f"{exc}; seen {seen}; targets {health}") from None
