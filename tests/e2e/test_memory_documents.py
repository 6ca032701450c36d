"""Documents into memory the way an operator does it: `switchboard up` with the local embedding
model (`SB_EMBEDDING_PROVIDER=local`; embedded mode's default is keyword-only memory), Qdrant
local mode under $SB_HOME, then `switchboard memory
ingest|search|show|forget` through the gateway's /api/memory to the memory service. One stack
for the module: the tests' documents have their own names and unrelated contents."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.stack import Stack, start_stack, stop_stack

HANDBOOK = """# Team handbook

## Office

The office plant is a ficus named Gerald; water it on Thursdays.

## Travel

Book trains at least two weeks ahead.
Expense reports go to Priya by the fifth of each month.
"""

PAGE = """<html><head><title>Menu</title><script>var secret = "do-not-index";</script></head>
<body><h1>Canteen</h1><p>On Fridays the canteen serves saffron risotto.</p></body></html>
"""


def tiny_pdf(text: str) -> bytes:
    """A one-page PDF whose page shows ``text`` (Helvetica), built by hand: no library here
    writes text PDFs, and pypdf must read a real one."""
    stream = zlib.compress(f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode())
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for n, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    # Not under pytest's tmp tree (see tests/support/servers.py: pgserver and root).
    home = Path(tempfile.mkdtemp(prefix="sb-memdocs-"))
    s = start_stack(home / "home", {"SB_EMBEDDING_PROVIDER": "local"}, timeout=120)
    try:
        yield s
    finally:
        stop_stack(s)
        shutil.rmtree(home, ignore_errors=True)


def memory_cli(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("SB_")},
        "SB_GATEWAY_URL": stack.url,
        "SB_GATEWAY_TOKEN": stack.token,
        "SB_HOME": str(stack.home),
    }
    return subprocess.run(
        [sys.executable, "-m", "switchboard.cli.main", "memory", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def search(stack: Stack, query: str) -> list[dict[str, object]]:
    done = memory_cli(stack, "search", query, "-k", "3", "--json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["mode"] == "hybrid" and not found["degraded"], found
    hits: list[dict[str, object]] = found["hits"]
    return hits


def test_ingest_search_show_forget(stack: Stack, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "office").mkdir(parents=True)
    (docs / "handbook.md").write_text(HANDBOOK)
    (docs / "office" / "canteen.html").write_text(PAGE)
    (docs / "notes.pdf").write_bytes(tiny_pdf("The spare key is under the blue flowerpot."))
    (docs / "ignored.bin").write_bytes(b"\x00\x01")

    done = memory_cli(stack, "ingest", str(docs))
    assert done.returncode == 0, done.stderr
    lines = sorted(done.stdout.splitlines())
    assert [line.split(":")[0] for line in lines] == [
        "handbook.md",
        "notes.pdf",
        "office/canteen.html",
    ], lines

    top = search(stack, "what is the name of the office plant?")[0]
    assert top["path"] == "handbook.md" and "Gerald" in str(top["text"])
    top = search(stack, "where is the spare key")[0]
    assert top["path"] == "notes.pdf" and "flowerpot" in str(top["text"])
    canteen = search(stack, "canteen friday dish")
    assert canteen[0]["path"] == "office/canteen.html" and "risotto" in str(canteen[0]["text"])
    assert not any("do-not-index" in str(h["text"]) for h in canteen)  # scripts are not text

    again = memory_cli(stack, "ingest", str(docs / "handbook.md"))
    assert again.returncode == 0 and "handbook.md: unchanged" in again.stdout, again.stdout

    shown = memory_cli(stack, "show", "handbook.md", "--from", "5", "--lines", "1")
    assert shown.returncode == 0 and shown.stdout.strip() == HANDBOOK.splitlines()[4]

    gone = memory_cli(stack, "forget", "handbook.md")
    assert gone.returncode == 0 and "forgot handbook.md" in gone.stdout, gone.stdout
    assert all(h["path"] != "handbook.md" for h in search(stack, "office plant name Gerald"))
    missing = memory_cli(stack, "show", "handbook.md")
    assert missing.returncode == 1 and "404" in missing.stderr


def test_bad_documents_are_refused_clearly(stack: Stack, tmp_path: Path) -> None:
    binary = tmp_path / "garbage.txt"
    binary.write_bytes(b"\xff\xfe\xfa" * 100)
    done = memory_cli(stack, "ingest", str(binary))
    assert done.returncode == 1 and "400" in done.stderr and "UTF-8" in done.stderr
    empty = tmp_path / "empty.md"
    empty.write_text("   \n")
    done = memory_cli(stack, "ingest", str(empty))
    assert done.returncode == 1 and "no text" in done.stderr
    done = memory_cli(stack, "search", "anything", "-k", "500")
    assert done.returncode == 1 and "k" in done.stderr
    # Nothing broke: a good document still goes in.
    good = tmp_path / "good.md"
    good.write_text("The wifi network is called Badger.")
    done = memory_cli(stack, "ingest", str(good))
    assert done.returncode == 0, done.stderr
