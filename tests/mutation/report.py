"""Figures per module from mutmut's verdicts, the judged-equivalent list and the "before"
baseline: ``bench-results/mutation.json`` and its markdown table.

A mutant counts as caught when a test failed (killed) or the tests ran past their bound
(timeout: the mutant hangs, which the tests noticed). ``kill_rate`` is caught over all mutants
less those judged equivalent (tests/mutation/equivalent.toml: only where no input can tell the
mutant from the original). A mutant no selected test reaches ("no tests") counts as not caught.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from tests.mutation.modules import Module
from tests.mutation.stage import Outcome

HERE = Path(__file__).parent
EQUIVALENT = HERE / "equivalent.toml"
BASELINE = HERE / "baseline.toml"
TARGET = 0.85


def change_lines(diff: str) -> list[str]:
    """The removed and added lines of a mutant's diff (what equivalent.toml records)."""
    return [
        line.rstrip()
        for line in diff.splitlines()
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


def equivalents(module: str) -> list[dict[str, Any]]:
    entries = tomllib.loads(EQUIVALENT.read_text()).get("mutant", [])
    return [e for e in entries if e["module"] == module]


def baseline() -> dict[str, Any]:
    return tomllib.loads(BASELINE.read_text()) if BASELINE.exists() else {}


def _rate(caught: int, judged: int) -> float | None:
    return round(caught / judged, 4) if judged else None


def figures(module: Module, outcome: Outcome, date: str, commit: str) -> dict[str, Any]:
    """One module's entry of mutation.json. An equivalent entry counts only while its mutant
    still survives with the recorded change (the source moved on: it is reported as stale)."""
    judged: list[dict[str, Any]] = []
    stale: list[str] = []
    unkilled = set(outcome.survived + outcome.no_tests + outcome.other)
    for entry in equivalents(module.name):
        diff = outcome.diffs.get(entry["id"])
        if entry["id"] in unkilled and diff is not None and change_lines(diff) == entry["change"]:
            judged.append(entry)
        else:
            stale.append(entry["id"])
    equivalent_ids = {e["id"] for e in judged}
    caught = len(outcome.killed) + len(outcome.timeout)
    before = baseline().get("modules", {}).get(module.name)
    if before is None and not module.added:
        # No test was added for this module: this run is its "before" too.
        before = {"killed": len(outcome.killed), "timeout": len(outcome.timeout)}
        before |= {"mutants": outcome.total, "same_run": True}
    before_rate = None
    if before:
        before_rate = _rate(before["killed"] + before["timeout"], before["mutants"] - len(judged))
    return {
        "file": module.source,
        "tests": list(module.test_files),
        "mutants": outcome.total,
        "killed": len(outcome.killed),
        "survived": len(outcome.survived),
        "timeout": len(outcome.timeout),
        "no_tests": len(outcome.no_tests),
        "other": len(outcome.other),
        "equivalent": len(judged),
        "kill_rate": _rate(caught, outcome.total - len(judged)),
        "kill_rate_before": before_rate,
        "before": before,
        "seconds": round(outcome.seconds, 1),
        "date": date,
        "commit": commit,
        "not_caught": {
            name: outcome.diffs.get(name, "") for name in sorted(unkilled - equivalent_ids)
        },
        "stale_equivalents": stale,
        "note": module.note,
    }


def _pct(rate: float | None) -> str:
    return "n/a" if rate is None else f"{rate * 100:.1f} %"


def table(modules: dict[str, dict[str, Any]]) -> str:
    head = (
        "| module | file | mutants | killed | timeout | survived | no tests | equivalent "
        "| kill rate | before | time |\n"
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    )
    rows = [
        f"| {name} | {m['file']} | {m['mutants']} | {m['killed']} | {m['timeout']} "
        f"| {m['survived']} | {m['no_tests']} | {m['equivalent']} | {_pct(m['kill_rate'])} "
        f"| {_pct(m['kill_rate_before'])} | {m['seconds']:.0f} s |"
        for name, m in modules.items()
    ]
    return head + "\n".join(rows) + "\n"


def baseline_toml(entries: dict[str, dict[str, Any]], date: str, commit: str) -> str:
    lines = [
        "# Mutation figures of the tests that existed before issue 24's item 3 (written by",
        "# `python -m tests.mutation --before`: the modules' `added` test files left out).",
        f'date = "{date}"',
        f'commit = "{commit}"',
        "",
    ]
    for name, m in entries.items():
        lines.append(f"[modules.{name}]")
        for key in ("date", "commit"):
            if key in m:
                lines.append(f'{key} = "{m[key]}"')
        for key in ("mutants", "killed", "timeout", "survived", "no_tests", "other"):
            lines.append(f"{key} = {m[key]}")
        lines.append("")
    return "\n".join(lines)
