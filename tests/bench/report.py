"""bench-results/latest.json and latest.md: every figure, and the issue's targets with PASS/MISS."""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

from tests.bench.channels import targets as channel_targets
from tests.bench.executor import clean_run
from tests.bench.executor import targets as executor_targets
from tests.bench.load import EXACT
from tests.bench.markdown import render
from tests.bench.modes import targets as modes_targets
from tests.bench.procs import REPO

P50_TARGET_MS = 15.0
P99_TARGET_MS = 50.0
TPS_TARGET = 250.0


def machine() -> dict[str, Any]:
    cpu_model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu_model,
        "load_avg_1m_at_start": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def git_state() -> dict[str, Any]:
    def git(*args: str) -> str:
        try:
            done = subprocess.run(
                ["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10, check=True
            )
        except (OSError, subprocess.SubprocessError):
            return ""
        return done.stdout.strip()

    changed = [line[3:] for line in git("status", "--porcelain").splitlines() if line]
    return {"commit": git("rev-parse", "HEAD"), "uncommitted_changes": changed}


def _clean(value: Any) -> Any:
    """NaN -> None, so the file is strict JSON."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def _tps(results: dict[str, Any], stack: str, sessions: int) -> float:
    run = results["stacks"].get(stack, {}).get("throughput", {}).get(str(sessions))
    return float(run["turns_per_s"]) if run else math.nan


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target of the issue against what was measured: PASS, MISS, or n/a if not run."""
    one = results["stacks"].get("agent=1", {})
    overhead = one.get("turn_overhead_ms", {})
    rows: list[dict[str, Any]] = []

    def row(name: str, target: str, value: float, ok: bool, shown: str = "") -> None:
        verdict = "n/a" if math.isnan(value) else ("PASS" if ok else "MISS")
        shown = "-" if math.isnan(value) else (shown or f"{value:.1f}")
        rows.append({"figure": name, "target": target, "measured": shown, "verdict": verdict})

    p50 = float(overhead.get("p50", math.nan))
    p99 = float(overhead.get("p99", math.nan))
    row("turn_overhead_ms p50 (1 agent)", f"<= {P50_TARGET_MS:g} ms", p50, p50 <= P50_TARGET_MS)
    row("turn_overhead_ms p99 (1 agent)", f"<= {P99_TARGET_MS:g} ms", p99, p99 <= P99_TARGET_MS)
    for stack in ("agent=1", "agent=2"):
        tps = _tps(results, stack, 100)
        row(f"turns_per_s, 100 sessions, {stack}", f">= {TPS_TARGET:g}", tps, tps >= TPS_TARGET)
    for sessions in (10, 100):
        one_tps, two_tps = _tps(results, "agent=1", sessions), _tps(results, "agent=2", sessions)
        ratio = two_tps / one_tps if one_tps > 0 else math.nan
        shown = f"{ratio:.2f}x ({two_tps:.1f} vs {one_tps:.1f})"
        name = f"2 agents vs 1, turns/s at {sessions} sessions"
        row(name, ">= 1.00x (not slower)", ratio, ratio >= 1.0, shown)
    bad = [
        f"{name}@{level}"
        for name, stack in results["stacks"].items()
        for level, run in stack.get("throughput", {}).items()
        if run["errors"] or set(run["history_check"]) != {EXACT}
    ]
    runs = sum(len(s.get("throughput", {})) for s in results["stacks"].values())
    rows.append(
        {
            "figure": "every turn answered exactly once (all throughput runs)",
            "target": "no errors, transcripts exact",
            "measured": f"{runs - len(bad)}/{runs} runs clean"
            + (f" ({', '.join(bad)})" if bad else ""),
            "verdict": "n/a" if not runs else ("PASS" if not bad else "MISS"),
        }
    )
    runs, bad = clean_run(results["executor"]) if results.get("executor") else (0, [])
    rows.append(
        {
            "figure": "every tool call answered (executor throughput runs)",
            "target": "no errors, none missing",
            "measured": f"{runs - len(bad)}/{runs} runs clean"
            + (f" ({', '.join(bad)})" if bad else ""),
            "verdict": "n/a" if not runs else ("PASS" if not bad else "MISS"),
        }
    )
    # The embedded modes (one-process is the default): after the rows above, which keep their
    # order and meaning.
    for t in modes_targets(results.get("modes") or {}):
        rows.append({k: v for k, v in t.items() if k != "key"})
    rows += executor_targets(results.get("executor") or {})
    rows += channel_targets(results.get("channels") or {})
    rows += memory_targets(results.get("memory") or {})
    rows += scheduler_targets(results.get("scheduler") or {})
    rows += media_targets(results.get("media") or {})
    return rows


def scheduler_targets(s: dict[str, Any]) -> list[dict[str, Any]]:
    """Fire lag p99 at 1,000 due jobs against issue 12's target."""
    if not s.get("fire_lag_ms"):
        return []
    p99 = float(s["fire_lag_ms"]["p99"])
    target = float(s["targets"]["fire_lag_ms_p99"])
    return [
        {
            "figure": f"scheduler: fire lag p99 ({s['jobs']} jobs due in one second; due ->"
            " event on INBOUND)",
            "target": f"<= {target:.0f} ms",
            "measured": f"{p99:.0f} ms",
            "verdict": "PASS" if p99 <= target and s["fired"] == s["jobs"] else "MISS",
        }
    ]


def media_targets(media: dict[str, Any]) -> list[dict[str, Any]]:
    """A 12-megapixel JPEG's resize to the model's size against issue 12's target."""
    if not media.get("resize_ms"):
        return []
    target = float(media["targets"]["resize_ms_p50"])
    p50 = float(media["resize_ms"]["p50"])
    return [
        {
            "figure": "media: resize of a 12 MP JPEG to 1568 px (p50)",
            "target": f"<= {target:.0f} ms",
            "measured": f"{p50:.1f} ms",
            "verdict": "PASS" if p50 <= target else "MISS",
        }
    ]


def memory_targets(memory: dict[str, Any]) -> list[dict[str, Any]]:
    """LoCoMo recall@10 (categories 1-4) and search p50 against issue 11's targets."""
    if not memory.get("locomo"):
        return []
    t = memory["targets"]
    recall = float(memory["locomo"]["recall_at_10"])
    p50 = float(memory["search_ms"]["p50"])
    return [
        {
            "figure": "memory: LoCoMo recall@10 (categories 1-4, hybrid)",
            "target": f">= {t['recall_at_10']}",
            "measured": f"{recall:.3f}",
            "verdict": "PASS" if recall >= t["recall_at_10"] else "MISS",
        },
        {
            "figure": "memory: search p50 (query embedded + hybrid query)",
            "target": f"<= {t['search_ms_p50']} ms",
            "measured": f"{p50:.1f} ms",
            "verdict": "PASS" if p50 <= t["search_ms_p50"] else "MISS",
        },
    ]


def write(results: dict[str, Any], out_dir: Path) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    results["targets"] = targets(results)
    json_path, md_path = out_dir / "latest.json", out_dir / "latest.md"
    json_path.write_text(json.dumps(_clean(results), indent=2, sort_keys=False) + "\n")
    md_path.write_text("\n".join(render(results)) + "\n")
    return json_path, md_path
