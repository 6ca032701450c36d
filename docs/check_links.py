"""Check that every relative link in README.md and docs/ resolves: the file exists, and a
``#fragment`` names a heading of it (GitHub's anchor rules). Moving a README section into docs/
broke links silently before; this makes it a lint failure. Run from anywhere:
``python3 docs/check_links.py``; exits 1 and prints each broken link. Standard library only, so
``make lint`` can run it before anything is installed."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"(?<!!)\[(?:[^\]]|\][^(])*?\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")
EXTERNAL = ("http://", "https://", "mailto:")


def prose(text: str) -> list[tuple[int, str]]:
    """The numbered lines outside fenced code blocks (links and headings in code are not
    links)."""
    out: list[tuple[int, str]] = []
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append((number, line))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, markup and punctuation dropped, spaces to -."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's label only
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor of a markdown file (repeated headings get -1, -2... as on GitHub)."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for _, line in prose(path.read_text(encoding="utf-8")):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken(path: Path) -> list[str]:
    """The broken relative links of one markdown file, each with its line number."""
    problems: list[str] = []
    for number, line in prose(path.read_text(encoding="utf-8")):
        stripped = re.sub(r"`[^`]*`", "", line)  # links inside code spans are not links
        for target in LINK.findall(stripped):
            if target.startswith(EXTERNAL):
                continue
            file_part, _, fragment = target.partition("#")
            dest = (path.parent / file_part).resolve() if file_part else path
            where = f"{path.relative_to(ROOT)}:{number}: {target}"
            if not dest.exists():
                problems.append(f"{where}: no such file")
            elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
                problems.append(f"{where}: no heading #{fragment}")
    return problems


def main() -> int:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    problems = [problem for path in files for problem in broken(path)]
    for problem in problems:
        print(problem)
    print(f"{len(files)} files, {len(problems)} broken links", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
