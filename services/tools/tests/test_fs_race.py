"""The symlink-swap race against the file tools (issue 9, item 2's acceptance test).

A separate process exchanges, as fast as it can, a directory ``d`` of the workspace with a
symlink to a second temporary directory outside the workspace (``renameat2(RENAME_EXCHANGE)``:
``d`` is always one or the other), while ``write`` and ``read`` are called on ``d/...`` through
the tool registry, thousands of times. Nothing may ever be written to, or read from, the
outside directory; the calls that find the real directory must still succeed.

Check-then-open code loses this race (the path is checked while ``d`` is the directory and
opened by name after it became the link). :func:`race` takes any ``execute`` so the same attack
can be pointed at another implementation of the tools.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from switchboard_tools.registry import ToolOutput

Execute = Callable[[str, dict[str, Any]], Awaitable[ToolOutput]]
SECRET = "sb-race-outside-secret-5d1e"
INSIDE = "inside text\n"
MARKER = "outside-only-marker"
ITERATIONS = 3000

# Exchanges "d" and "d.swap" (a directory and a symlink leading out) until SIGTERM, then prints
# how many exchanges it made.
SWAPPER = r"""
import ctypes, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
os.chdir(sys.argv[1])
count = 0
def stop(*_):
    print(count, flush=True)
    os._exit(0)
signal.signal(signal.SIGTERM, stop)
print("ready", flush=True)
while True:
    if libc.renameat2(-100, b"d", -100, b"d.swap", 2) != 0:  # AT_FDCWD, RENAME_EXCHANGE
        raise OSError(ctypes.get_errno(), "renameat2")
    count += 1
"""


@dataclass
class RaceStats:
    iterations: int = 0
    swaps: int = 0
    writes_ok: int = 0
    reads_ok: int = 0
    refused: int = 0
    leaked_reads: int = 0  # results that showed the outside directory's content
    outside_writes: list[str] | None = None  # what appeared outside (must stay None/empty)


@pytest.fixture
def outside() -> Iterator[Path]:
    """The second temporary directory: outside the workspace, holding the secret."""
    root = Path(tempfile.mkdtemp(prefix="sb-race-outside-"))
    try:
        (root / "secret.txt").write_text(SECRET)
        (root / MARKER).write_text("")
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _start_swapper(workspace: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, str(workspace)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    return proc


def _stop_swapper(proc: subprocess.Popen[str]) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    return int(out.strip() or 0)


async def _other_tools(execute: Execute, i: int, stats: RaceStats) -> None:
    """The other file tools on the swapped directory: any of them reaching the outside shows
    as a leak (listing or finding the outside-only marker) or a change outside."""
    patch = f"--- /dev/null\n+++ b/d/patched-{i}.txt\n@@ -0,0 +1 @@\n+x\n"
    for tool, args in [
        ("list_dir", {"path": "d"}),
        ("search_files", {"path": "d", "query": "sb-race"}),
        ("edit", {"path": "d/secret.txt", "old_text": "sb-race", "new_text": "PWNED"}),
        ("apply_patch", {"patch": patch}),
    ]:
        out = await execute(tool, args)
        if SECRET in out.content or MARKER in out.content:
            stats.leaked_reads += 1


async def race(execute: Execute, workspace: Path, outside: Path, iterations: int) -> RaceStats:
    """Run the attack; the caller asserts on the returned numbers."""
    (workspace / "d").mkdir()
    (workspace / "d" / "secret.txt").write_text(INSIDE)
    (workspace / "d.swap").symlink_to(outside)
    stats = RaceStats(iterations=iterations)
    swapper = _start_swapper(workspace)
    try:
        for i in range(iterations):
            out = await execute("write", {"path": "d/written.txt", "content": f"legit {i}\n"})
            stats.writes_ok += not out.is_error
            stats.refused += out.is_error
            out = await execute("read", {"path": "d/secret.txt"})
            if out.is_error:
                stats.refused += 1
                stats.leaked_reads += SECRET in out.content
            elif out.content == INSIDE:
                stats.reads_ok += 1
            else:  # what the outside file holds (perhaps changed by a leaked edit)
                stats.leaked_reads += 1
            if i % 5 == 0:
                await _other_tools(execute, i, stats)
    finally:
        stats.swaps = _stop_swapper(swapper)
    stats.outside_writes = sorted(set(os.listdir(outside)) - {"secret.txt", MARKER})
    if (outside / "secret.txt").read_text() != SECRET:
        stats.outside_writes.append("secret.txt (modified)")
    return stats


async def test_symlink_swap_race_never_escapes(
    call: Callable[..., Awaitable[ToolOutput]], workspace: Path, outside: Path
) -> None:
    stats = await race(call, workspace, outside, ITERATIONS)
    print(f"\nrace: {stats}")
    assert stats.swaps > 0, "the swapper never ran: the attack did not happen"
    assert stats.leaked_reads == 0, stats
    assert stats.outside_writes == [], stats
    # The legitimate path still works when it meets the real directory.
    assert stats.writes_ok > 0 and stats.reads_ok > 0, stats
    assert stats.refused > 0, stats  # and the link was met, and refused
    real = next(p for p in (workspace / "d", workspace / "d.swap") if not p.is_symlink())
    assert (real / "written.txt").read_text().startswith("legit ")


async def test_refusals_while_swapping_name_no_host_path(
    call: Callable[..., Awaitable[ToolOutput]], workspace: Path, outside: Path
) -> None:
    """The refusals the race produces are readable and carry no absolute path."""
    (workspace / "d").symlink_to(outside)
    for tool, args in [
        ("read", {"path": "d/secret.txt"}),
        ("write", {"path": "d/x.txt", "content": "x"}),
        ("list_dir", {"path": "d"}),
        ("edit", {"path": "d/secret.txt", "old_text": "sb", "new_text": "x"}),
        ("search_files", {"path": "d", "query": "sb"}),
    ]:
        out = await call(tool, args)
        assert out.is_error and "outside the workspace" in out.content, (tool, out.content)
        assert str(outside) not in out.content and str(workspace) not in out.content
    assert sorted(os.listdir(outside)) == sorted(["secret.txt", MARKER])
