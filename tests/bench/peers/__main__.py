"""`python -m tests.bench.peers` (`make bench-peers`): Switchboard and nanobot on the same work,
several rounds alternating which goes first; bench-results/peers.json and peers.md.

Each peer has its own fake model for the whole run (its own process, excluded from the peer's
CPU); each round starts each peer on a fresh home. Nothing is left running: every process
started here is stopped in a ``finally``, by pid.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from tests.bench import procs
from tests.bench.peers import measure, report
from tests.bench.peers.nanobot import TOOL, TOOL_ARGS, VERSION, Nanobot, installed_version
from tests.bench.peers.switchboard import Switchboard
from tests.bench.procs import REPO


def say(text: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {text}", flush=True)


def _git(*args: str) -> str:
    """Read-only git (``--no-optional-locks``: not even the index's stat cache is written)."""
    done = subprocess.run(
        ["git", "--no-optional-locks", *args], cwd=REPO, capture_output=True, text=True
    )
    return done.stdout.strip()


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.peers", description=__doc__)
    parser.add_argument("--rounds", type=int, default=None, help="default 3 (--short: 1)")
    parser.add_argument("--short", action="store_true", help="one round of fewer turns")
    parser.add_argument("--venv", type=Path, default=REPO / ".venv-peers", help="nanobot's")
    parser.add_argument("--out", type=Path, default=REPO / "bench-results")
    return parser.parse_args(argv)


def run(plan: measure.Plan, venv: Path) -> dict[str, Any]:
    """Every round; a peer that fails in a round is recorded under ``failed`` and left out of
    the medians of that round."""
    version = installed_version(venv)
    if version != VERSION:
        say(f"note: {venv} has nanobot-ai {version}, requirements-peers.txt pins {VERSION}")
    result: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": _git("rev-parse", "HEAD"),
        # Switchboard runs from the work tree: what it held beyond the commit.
        "uncommitted": _git("status", "--porcelain").splitlines(),
        "machine": {
            "cpus": psutil.cpu_count(),
            "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        },
        "plan": dataclasses.asdict(plan),
        "nanobot_version": version,
        "tools": {"switchboard": "get_time {'timezone': 'UTC'}", "nanobot": f"{TOOL} {TOOL_ARGS}"},
        "rounds": [],
    }
    with contextlib.ExitStack() as stack:
        sb_fake = Switchboard.start_model()
        stack.callback(sb_fake.stop)
        nb_fake = Nanobot.start_model()
        stack.callback(nb_fake.stop)
        nanobot = Nanobot(venv, nb_fake)
        stack.callback(nanobot.close)
        switchboard = Switchboard(sb_fake)
        stack.callback(switchboard.close)
        peers: dict[str, measure.Peer] = {"switchboard": switchboard, "nanobot": nanobot}
        for i in range(plan.rounds):
            order = list(report.PEERS if i % 2 == 0 else reversed(report.PEERS))
            this: dict[str, Any] = {"order": order, "failed": {}}
            for name in order:
                say(f"round {i + 1}/{plan.rounds}: {name}")
                try:
                    this[name] = measure.measure_round(peers[name], plan, f"r{i}", say)
                except Exception as exc:  # recorded; the other peer goes on
                    say(f"[{name}] failed: {exc}")
                    this["failed"][name] = str(exc)[-2000:]
            result["rounds"].append(this)
    result["medians"] = report.medians(result["rounds"])
    result["ratios"] = report.ratios(result["medians"])
    return result


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    procs.allow_bytecode()  # both peers start with their bytecode cached, as installed
    plan = measure.Plan.short() if args.short else measure.Plan()
    if args.rounds is not None:
        plan = dataclasses.replace(plan, rounds=args.rounds)
    result = run(plan, args.venv)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "peers.json").write_text(json.dumps(result, indent=2) + "\n")
    table = "\n".join(report.markdown(result)) + "\n"
    (args.out / "peers.md").write_text(table)
    print(table)
    failed = [f"{name}: {err[:200]}" for r in result["rounds"] for name, err in r["failed"].items()]
    if failed:
        print("failed:\n" + "\n".join(failed), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
