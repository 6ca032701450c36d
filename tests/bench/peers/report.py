"""The peers report: medians over the rounds, the ratios Switchboard/nanobot, the markdown."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

PEERS = ("switchboard", "nanobot")
NAMES = {"switchboard": "Switchboard", "nanobot": "nanobot"}

# (key, label, the better direction, digits). {sessions} is the plan's count at once.
FIGURES: tuple[tuple[str, str, str, int], ...] = (
    ("ready_s", "ready: start on a fresh home to the first answer (s)", "lower", 2),
    ("ready_again_s", "ready: start on the same home again (s)", "lower", 2),
    ("turn_p50_ms", "turn p50, one at a time (ms)", "lower", 1),
    ("turn_p99_ms", "turn p99, one at a time (ms)", "lower", 1),
    ("turns_per_s", "turns/s, {sessions} sessions at once", "higher", 1),
    ("pss_idle_mb", "PSS after the first answer, idle (MiB, every process)", "lower", 1),
    ("pss_after_mb", "PSS after the load (MiB, every process)", "lower", 1),
    ("cpu_ms_per_turn_sequential", "CPU per turn, one at a time (ms)", "lower", 1),
    ("cpu_ms_per_turn", "CPU per turn, {sessions} sessions at once (ms)", "lower", 1),
    ("processes", "processes", "lower", 0),
)


def median(values: Sequence[float | None]) -> float | None:
    """The median of the values that were measured (None: none was)."""
    got = [v for v in values if v is not None and not math.isnan(v)]
    return round(statistics.median(got), 3) if got else None


def medians(rounds: Sequence[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """Per peer, the median of each figure over the rounds."""
    return {
        peer: {
            key: median([r[peer]["figures"].get(key) for r in rounds if peer in r])
            for key, *_ in FIGURES
        }
        for peer in PEERS
    }


def ratio(ours: float | None, theirs: float | None) -> float | None:
    """Switchboard/nanobot, or None when either is missing or nanobot's is zero."""
    if ours is None or theirs is None or theirs == 0:
        return None
    return round(ours / theirs, 2)


def ratios(meds: dict[str, dict[str, float | None]]) -> dict[str, float | None]:
    """Switchboard/nanobot for each figure, from the medians."""
    sb, nb = meds["switchboard"], meds["nanobot"]
    return {key: ratio(sb.get(key), nb.get(key)) for key, *_ in FIGURES}


def _f(value: float | None, digits: int) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def markdown(result: dict[str, Any]) -> list[str]:
    """The table (medians, ratio, each round's values), with what the run was."""
    plan, meds, rat = result["plan"], result["medians"], result["ratios"]
    rounds = result["rounds"]
    changes = len(result.get("uncommitted", []))
    tree = f" and {changes} paths changed in the work tree" if changes else ""
    lines = [
        f"Switchboard (`switchboard up`, one process, at {result['commit'][:8]}{tree}) and nanobot "
        f"{result['nanobot_version']} (`nanobot serve`), {result['date']}; "
        f"{len(rounds)} round(s), medians; order alternating.",
        "",
        "| figure | Switchboard | nanobot | Switchboard/nanobot | rounds (Switchboard; nanobot) |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for key, label, _better, digits in FIGURES:
        per = "; ".join(
            " / ".join(_f(r[p]["figures"].get(key), digits) if p in r else "failed" for r in rounds)
            for p in PEERS
        )
        lines.append(
            f"| {label.format(sessions=plan['sessions'])} | {_f(meds['switchboard'][key], digits)}"
            f" | {_f(meds['nanobot'][key], digits)} | {_f(rat[key], 2)} | {per} |"
        )
    lines += ["", *notes(result)]
    return lines


def notes(result: dict[str, Any]) -> list[str]:
    """Quiet checks, errors, outbound attempts: what the figures should be read with."""
    out = [
        "Switchboard/nanobot: below 1 means less time, memory or CPU for Switchboard, except "
        "turns/s, where above 1 means more turns for Switchboard. Quiet checks (cores busy with "
        "other programs before each start, and during the sessions):",
    ]
    for i, r in enumerate(result["rounds"], 1):
        quiet = ", ".join(
            f"{p} {r[p]['quiet_check']['busy_cores']} cores busy before start, "
            f"{_f(r[p]['figures'].get('other_cores_busy'), 2)} during the sessions"
            for p in r["order"]
            if p in r
        )
        out.append(f"- round {i} ({' then '.join(r['order'])}): {quiet}")
        for p in r["order"]:
            if p not in r:
                continue
            errors = {**r[p]["sequential"]["errors"], **r[p]["concurrent"]["errors"]}
            if errors:
                out.append(f"  - {p} errors: {errors}")
            if r[p].get("outbound_attempts") or r[p].get("remote_connections"):
                seen = [*r[p].get("outbound_attempts", []), *r[p].get("remote_connections", [])]
                out.append(f"  - {p} tried to reach beyond this machine: {seen}")
    return out
