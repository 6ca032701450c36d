"""The campaign's report: ``bench-results/soak.json`` and a markdown table on stdout."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RESULTS = Path("bench-results") / "soak.json"


def write(report: dict[str, Any], path: Path = RESULTS) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, sort_keys=False) + "\n")
    return path


def _mib(value: int | None) -> str:
    return f"{value / 2**20:.0f}" if value else "-"


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"Soak: {report.get('minutes')} min, seed {report.get('seed')}, "
        f"NATS {report.get('nats', '?')}: {'PASSED' if report.get('passed') else 'FAILED'}",
        "",
        "| channel | accepted | unknown | refused | answered once | lost | duplicated "
        "| out of order | delivered once | platform retries |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, c in report.get("per_channel", {}).items():
        lines.append(
            f"| {name} | {c.get('accepted', 0)} | {c.get('unknown', 0)} | {c.get('refused', 0)} "
            f"| {c.get('answered_once', 0)} | {c.get('lost', 0) + c.get('not_delivered', 0)} "
            f"| {c.get('duplicated', 0) + c.get('delivered_twice', 0)} "
            f"| {c.get('out_of_order', 0)} | {c.get('delivered_once', '-')} "
            f"| {c.get('platform_retries', 0)} |"
        )
    lines += ["", "| cron job | slots fired | fired twice | unanswered | missed slots |",
              "|---|---|---|---|---|"]  # fmt: skip
    for job, j in report.get("cron", {}).items():
        lines.append(f"| {job} | {j['slots_fired']} | {j['fired_twice']} | {j['unanswered']} "
                     f"| {j['missed_slots']} |")  # fmt: skip
    memory = report.get("memory", {})
    lines += [
        "",
        f"Memory: documents {memory.get('documents_found')}/{memory.get('documents_written')} "
        f"found, facts {memory.get('facts_found')}/{memory.get('facts_stored')} found.",
        f"Lost {report.get('lost')}, duplicated {report.get('duplicated')}, processes left "
        f"{report.get('processes_left')}, faults {report.get('faults_per_kind')} "
        f"(unrecovered {report.get('unrecovered_faults')}).",
        "",
        "| process | RSS start (MiB) | RSS end (MiB) | restarts |",
        "|---|---|---|---|",
    ]
    start, end = report.get("rss_start", {}), report.get("rss_end", {})
    restarts = report.get("restarts", {})
    for name in sorted(set(start) | set(end)):
        lines.append(f"| {name} | {_mib(start.get(name))} | {_mib(end.get(name))} "
                     f"| {restarts.get(name, 0)} |")  # fmt: skip
    if report.get("evidence"):
        lines += ["", "Evidence:", *(f"- {e}" for e in report["evidence"][:50])]
    return "\n".join(lines)
