"""Where a turn's time goes, from the services' own OTLP spans (``--profile``).

Each chat turn is one trace rooted at the gateway's ``gateway.receive``. Along one trace the
spans give marks (the gateway receives, the router routes, the agent starts its run, calls the
model, calls the tool, ...); the medians of the gaps between consecutive marks say which hop
costs what. Span clocks are the machine's wall clock in every process, so gaps across processes
are comparable.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from tests.bench.stats import percentile, summarize
from tests.support.otlp import ReceivedSpan

# (mark, span name, occurrence in start order, "start" | "end"), in the order a turn runs.
MARKS: tuple[tuple[str, str, int, str], ...] = (
    ("gateway receives the request", "gateway.receive", 0, "start"),
    ("router starts routing", "router.route", 0, "start"),
    ("router has routed", "router.route", 0, "end"),
    ("agent starts the run", "agent.run", 0, "start"),
    ("model call 1 starts", "llm.call", 0, "start"),
    ("model call 1 done", "llm.call", 0, "end"),
    ("tool call sent", "tool.call", 0, "start"),
    ("executor starts the tool", "tools.execute", 0, "start"),
    ("executor done", "tools.execute", 0, "end"),
    ("tool result back in the agent", "tool.call", 0, "end"),
    ("model call 2 starts", "llm.call", 1, "start"),
    ("model call 2 done", "llm.call", 1, "end"),
    ("agent run ends", "agent.run", 0, "end"),
    ("gateway has answered", "gateway.receive", 0, "end"),
)


def _turn_traces(spans: Sequence[ReceivedSpan]) -> dict[str, list[ReceivedSpan]]:
    """Traces of chat turns (a gateway span on /v1/chat/completions and an agent run)."""
    traces: dict[str, list[ReceivedSpan]] = defaultdict(list)
    for span in spans:
        traces[span.trace_id].append(span)
    return {
        tid: group
        for tid, group in traces.items()
        if any(
            s.name == "gateway.receive" and s.attributes.get("url.path") == "/v1/chat/completions"
            for s in group
        )
        and any(s.name == "agent.run" for s in group)
    }


def _marks(group: list[ReceivedSpan]) -> dict[str, int] | None:
    by_name: dict[str, list[ReceivedSpan]] = defaultdict(list)
    for span in sorted(group, key=lambda s: s.start_ns):
        by_name[span.name].append(span)
    marks: dict[str, int] = {}
    for mark, name, index, edge in MARKS:
        found = by_name.get(name, [])
        if len(found) <= index:
            return None
        marks[mark] = found[index].start_ns if edge == "start" else found[index].end_ns
    return marks


def breakdown(spans: Sequence[ReceivedSpan]) -> dict[str, Any]:
    """Median gap between consecutive marks of complete turn traces, and every span name's
    duration summary, in ms."""
    traces = _turn_traces(spans)
    complete = [m for g in traces.values() if (m := _marks(g)) is not None]
    names = [mark for mark, *_ in MARKS]
    segments: list[dict[str, Any]] = []
    for before, after in itertools.pairwise(names):
        gaps = [(m[after] - m[before]) / 1e6 for m in complete]
        segments.append(
            {
                "from": before,
                "to": after,
                "p50_ms": round(percentile(gaps, 50), 3),
                "p90_ms": round(percentile(gaps, 90), 3),
            }
        )
    durations: dict[str, list[float]] = defaultdict(list)
    for group in traces.values():
        for span in group:
            durations[f"{span.service}/{span.name}"].append(span.duration_ms)
    return {
        "turn_traces": len(traces),
        "complete_traces": len(complete),
        "segments": segments,
        "span_ms": {name: summarize(values) for name, values in sorted(durations.items())},
    }


def markdown(profile: dict[str, Any]) -> list[str]:
    """The breakdown as markdown lines."""
    lines = [
        f"Turn traces: {profile['turn_traces']} ({profile['complete_traces']} with every mark).",
        "",
        "| from | to | p50 ms | p90 ms |",
        "|---|---|---:|---:|",
    ]
    for seg in profile["segments"]:
        lines.append(f"| {seg['from']} | {seg['to']} | {seg['p50_ms']:.2f} | {seg['p90_ms']:.2f} |")
    lines += ["", "| span | n | p50 ms | p99 ms |", "|---|---:|---:|---:|"]
    for name, s in profile["span_ms"].items():
        lines.append(f"| {name} | {s['n']} | {s['p50']:.2f} | {s['p99']:.2f} |")
    return lines
