"""``python -m switchboard_gateway.web [--check]``: fetch the vendored browser libraries again
from npm and write ``vendor/LOCK.json`` (``make vendor-web``), or (``--check``, in ``make
lint``) exit 1 when a copy is missing or differs from the lock. See :mod:`.vendor_lock`."""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from .vendor_lock import LOCK, ROOT, WANTED, destination


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _key(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def check() -> list[str]:
    """Every problem: a copy missing, or not what the lock says; the lock not the wanted list."""
    locked: dict[str, str] = json.loads(LOCK.read_text()) if LOCK.exists() else {}
    problems = []
    wanted = {_key(destination(w)): w for w in WANTED}
    for key in sorted(set(locked) ^ set(wanted)):
        problems.append(f"{key}: in {'the lock' if key in locked else 'vendor_lock.py'} only")
    for key, w in wanted.items():
        path = destination(w)
        if not path.exists():
            problems.append(f"{key}: missing (make vendor-web)")
        elif key in locked and _digest(path) != locked[key]:
            problems.append(f"{key}: differs from {w.package}'s {w.source} (make vendor-web)")
    return problems


def fetch() -> None:
    """``npm pack`` each package into a temporary directory, copy the wanted files, lock."""
    with tempfile.TemporaryDirectory() as work:
        root = Path(work)
        unpacked: dict[str, Path] = {}
        for package in sorted({w.package for w in WANTED}):
            done = subprocess.run(
                ["npm", "pack", "--silent", package],
                cwd=root,
                capture_output=True,
                text=True,
                check=True,
            )
            archive = root / done.stdout.strip().splitlines()[-1]
            target = root / archive.stem
            with tarfile.open(archive) as tar:
                tar.extractall(target, filter="data")
            unpacked[package] = target / "package"
        lock = {}
        for w in WANTED:
            path = destination(w)
            path.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(unpacked[w.package] / w.source, path)
            lock[_key(path)] = _digest(path)
    LOCK.write_text(json.dumps(lock, indent=1, sort_keys=True) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m switchboard_gateway.web")
    parser.add_argument("--check", action="store_true", help="compare with the lock only")
    args = parser.parse_args(argv)
    if args.check:
        problems = check()
        for problem in problems:
            print(problem, file=sys.stderr)
        if not problems:
            print(f"{LOCK}: {len(WANTED)} vendored files as locked")
        return 1 if problems else 0
    fetch()
    print(f"wrote {LOCK}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
