"""The browser libraries the web pages use: each a file of a pinned npm package, copied into
``vendor/`` (ES modules, no build step) with the package's licence. ``vendor/LOCK.json`` holds
the SHA-256 of every copy; ``python -m switchboard_gateway.web --check`` (in ``make lint``) fails
when a copy differs from it or is missing, and ``python -m switchboard_gateway.web`` (``make
vendor-web``) fetches the packages again with ``npm pack`` from npm's registry, copies the files
and writes the lock.

Why these (docs/web-ui.md): marked (Markdown: CommonMark and GitHub's tables), DOMPurify (the
sanitiser every rendered reply goes through), highlight.js (code blocks: its core and the
languages below), uPlot (the usage charts: small, no dependencies, draws on a canvas). axe-core
is for the accessibility tests only: it is copied next to them, not served.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
VENDOR = HERE / "vendor"
LOCK = VENDOR / "LOCK.json"
ROOT = HERE.parents[3]  # the repository (the lock names files from it)
TEST_VENDOR = ROOT / "tests" / "e2e" / "vendor"  # not package data: never served


@dataclass(frozen=True)
class Wanted:
    package: str  # npm name@version
    source: str  # the file inside the package (package/ stripped)
    name: str  # the copy's name
    served: bool = True  # False: a test's (TEST_VENDOR)


HLJS = "@highlightjs/cdn-assets@11.12.0"
LANGUAGES = (
    "bash", "css", "diff", "dockerfile", "go", "ini", "java", "javascript", "json", "markdown",
    "python", "rust", "shell", "sql", "typescript", "xml", "yaml",
)  # fmt: skip

WANTED: tuple[Wanted, ...] = (
    Wanted("marked@18.2.1", "lib/marked.esm.js", "marked.esm.js"),
    Wanted("marked@18.2.1", "LICENSE", "marked.LICENSE"),
    Wanted("dompurify@3.5.0", "dist/purify.es.mjs", "purify.es.mjs"),
    Wanted("dompurify@3.5.0", "LICENSE", "dompurify.LICENSE"),
    Wanted("uplot@1.6.32", "dist/uPlot.esm.js", "uPlot.esm.js"),
    Wanted("uplot@1.6.32", "dist/uPlot.min.css", "uPlot.min.css"),
    Wanted("uplot@1.6.32", "LICENSE", "uplot.LICENSE"),
    Wanted(HLJS, "es/core.min.js", "hljs/core.min.js"),
    *(Wanted(HLJS, f"es/languages/{n}.min.js", f"hljs/{n}.min.js") for n in LANGUAGES),
    Wanted(HLJS, "styles/github.min.css", "hljs/github.min.css"),
    Wanted(HLJS, "styles/github-dark.min.css", "hljs/github-dark.min.css"),
    Wanted(HLJS, "LICENSE", "hljs/LICENSE"),
    Wanted("axe-core@4.14.1", "axe.min.js", "axe.min.js", served=False),
    Wanted("axe-core@4.14.1", "LICENSE", "axe.LICENSE", served=False),
)


def destination(wanted: Wanted) -> Path:
    return (VENDOR if wanted.served else TEST_VENDOR) / wanted.name
