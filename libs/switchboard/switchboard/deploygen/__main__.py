"""``python -m switchboard.deploygen [--check] [--root DIR]``: write the generated deployment
files, or (``--check``, in ``make lint``) fail when one differs from what the registry gives."""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

from .outputs import generate
from .regions import MarkerError

ROOT = Path(__file__).resolve().parents[4]
DIFF_LINES = 40  # of each stale file, enough to see what differs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m switchboard.deploygen", description=__doc__)
    parser.add_argument("--check", action="store_true", help="write nothing; fail on a difference")
    parser.add_argument(
        "--root", type=Path, default=ROOT, help="the repository (default: this one)"
    )
    args = parser.parse_args(argv)
    try:
        files = generate(args.root)
    except (MarkerError, OSError) as error:
        print(f"deploygen: {error}", file=sys.stderr)
        return 2
    stale = {
        path: text for path, text in files.items() if not path.exists() or path.read_text() != text
    }
    for path, text in stale.items():
        name = str(path.relative_to(args.root))
        if args.check:
            current = path.read_text().splitlines() if path.exists() else []
            diff = difflib.unified_diff(current, text.splitlines(), name, "generated", lineterm="")
            print("\n".join(list(diff)[:DIFF_LINES]), file=sys.stderr)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {name}")
    if args.check and stale:
        print(
            f"deploygen: {len(stale)} file(s) differ from the registry: run"
            " `python -m switchboard.deploygen` (and edit the registry or deploygen/overrides.py,"
            " not the generated lines)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
