"""``python -m tests.mutation [--modules ssrf,chunker] [--children 2] [--before]``
(``make mutation``, ``MODULES=`` for a subset).

Runs the modules one after another (each with ``--children`` forked test runs at once), then
merges their entries into ``bench-results/mutation.json`` (modules not run keep their last
entry) and prints the table. Exits 1 when a module run stays under the 85 % target or mutmut
stopped early.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

from tests.mutation import report, stage
from tests.mutation.modules import BY_NAME, MODULES, Module


def _say(message: str) -> None:
    print(f"mutation: {message}", file=sys.stderr, flush=True)


def _commit() -> str:
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=stage.REPO, capture_output=True, text=True, check=False
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=stage.REPO,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return f"{head}{'+changes' if dirty else ''}"


def _chosen(names: str) -> list[Module]:
    if not names:
        return list(MODULES)
    wanted = [n.strip() for n in names.replace(" ", ",").split(",") if n.strip()]
    unknown = [n for n in wanted if n not in BY_NAME]
    if unknown:
        raise SystemExit(f"unknown module(s) {unknown}; known: {', '.join(BY_NAME)}")
    return [BY_NAME[n] for n in wanted]


def _previous(out: Path) -> dict[str, Any]:
    path = out / "mutation.json"
    return dict(json.loads(path.read_text())) if path.exists() else {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mutation")
    parser.add_argument("--modules", default="", help="comma-separated subset (default: all)")
    parser.add_argument(
        "--children", type=int, default=None, help="test runs at once (default: the module's)"
    )
    parser.add_argument("--out", type=Path, default=stage.REPO / "bench-results")
    parser.add_argument(
        "--before",
        action="store_true",
        help="leave out the tests added for item 3 and write tests/mutation/baseline.toml",
    )
    parser.add_argument(
        "--from-stages",
        action="store_true",
        help="run nothing: report again from the last run's stages (after editing equivalents)",
    )
    args = parser.parse_args(argv)
    modules = _chosen(args.modules)
    date = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    commit = _commit()
    args.out.mkdir(parents=True, exist_ok=True)
    entries: dict[str, dict[str, Any]] = {}
    failed: list[str] = []
    for module in modules:
        files = module.tests if args.before else module.test_files
        if not files:
            _say(f"{module.name}: no test files for this run, skipped")
            continue
        log = args.out / f"mutation-{module.name}{'-before' if args.before else ''}.log"
        if args.from_stages:
            last = _previous(args.out).get("modules", {}).get(module.name)
            if last is None or not (stage.STAGES / module.name / "mutants").exists():
                _say(f"{module.name}: no previous run to report from, skipped")
                continue
            outcome = stage.results(stage.STAGES / module.name, module)
            outcome.seconds = last["seconds"]
            entries[module.name] = report.figures(module, outcome, last["date"], last["commit"])
            continue
        _say(f"{module.name}: {module.source} against {len(files)} test file(s); log {log}")
        try:
            # A before run has a stage of its own: the last run's stays for --from-stages.
            name = f"{module.name}-before" if args.before else module.name
            children = args.children or module.children
            outcome = stage.run(module, files, children, log, name)
        except subprocess.CalledProcessError:
            _say(f"{module.name}: mutmut stopped early, see {log}")
            failed.append(module.name)
            continue
        entries[module.name] = report.figures(module, outcome, date, commit)
        m = entries[module.name]
        caught = m["killed"] + m["timeout"]
        _say(f"{module.name}: {caught}/{m['mutants']} caught in {m['seconds']} s")
    if args.before:
        kept = report.baseline().get("modules", {})
        report.BASELINE.write_text(report.baseline_toml({**kept, **entries}, date, commit))
        (args.out / "mutation-before.json").write_text(json.dumps(entries, indent=2) + "\n")
        print(report.table(entries))
        return 1 if failed else 0
    path = args.out / "mutation.json"
    previous = _previous(args.out)
    merged = {**previous.get("modules", {}), **entries}
    ordered = {m.name: merged[m.name] for m in MODULES if m.name in merged}
    result = {
        "tool": "mutmut",
        "version": version("mutmut"),
        "date": date,
        "commit": commit,
        "target": report.TARGET,
        "modules": ordered,
    }
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(report.table(ordered))
    _say(f"wrote {path}")
    low = [n for n, m in entries.items() if (m["kill_rate"] or 0) < report.TARGET]
    if low:
        _say(f"under {report.TARGET:.0%}: {', '.join(low)}")
    return 1 if failed or low else 0


if __name__ == "__main__":
    sys.exit(main())
