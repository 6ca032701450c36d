"""``python -m switchboard.settings_reference [--check] [--schema] [--output PATH]``: write the
configuration reference (``--schema``: the configuration file's JSON Schema), or (``--check``)
exit 1 when the reference or the schema differs from what the settings classes give, so neither
can drift from the code."""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

from switchboard.configfile import schema

from . import collect, missing, render, sources

# The repository's copy: this package is libs/switchboard/switchboard/settings_reference/.
DEFAULT_OUTPUT = Path(__file__).resolve().parents[4] / "docs" / "configuration.md"
SCHEMA_OUTPUT = DEFAULT_OUTPUT.with_name("switchboard.schema.json")
DIFF_LINES = 40


def generate() -> str:
    chosen = sources()
    return render(collect(chosen), chosen)


def check(path: Path, expected: str) -> list[str]:
    """The problems of ``path`` against ``expected`` (empty: up to date)."""
    try:
        actual = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return [f"{path} does not exist"]
    if actual == expected:
        return []
    diff = list(
        difflib.unified_diff(
            actual.splitlines(), expected.splitlines(), "written", "generated", lineterm=""
        )
    )
    shown = diff[:DIFF_LINES] + (["..."] if len(diff) > DIFF_LINES else [])
    return [f"{path} differs from the settings classes:", *shown]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m switchboard.settings_reference", description=__doc__
    )
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    parser.add_argument("--output", type=Path, help="the file (default: the repository's)")
    parser.add_argument(
        "--schema", action="store_true", help="the JSON Schema of switchboard.toml instead"
    )
    parser.add_argument(
        "--schema-output", type=Path, default=SCHEMA_OUTPUT, help="the schema --check compares"
    )
    args = parser.parse_args(argv)
    if args.schema and not args.check:
        output = args.output or SCHEMA_OUTPUT
        output.write_text(schema.render(), encoding="utf-8")
        print(f"wrote {output}")
        return 0
    args.output = args.output or DEFAULT_OUTPUT
    chosen = sources()
    settings = collect(chosen)
    text = render(settings, chosen)
    undescribed = missing(settings)
    if undescribed:
        print(
            f"{len(undescribed)} of {len(settings)} settings have no description (a comment"
            f" above the field, or Field(description=...)): {', '.join(undescribed)}",
            file=sys.stderr,
        )
    if not args.check:
        args.output.write_text(text, encoding="utf-8")
        print(f"wrote {args.output}: {len(settings)} settings")
        return 0
    problems = check(args.output, text) + check(args.schema_output, schema.render())
    if problems:
        print("\n".join(problems), file=sys.stderr)
        print(
            "The configuration reference or schema is out of date: run"
            " `python -m switchboard.settings_reference` (and `--schema`) and commit"
            " docs/configuration.md and docs/switchboard.schema.json.",
            file=sys.stderr,
        )
        return 1
    print(f"{args.output}, {args.schema_output}: up to date ({len(settings)} settings)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
