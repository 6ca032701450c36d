"""exec's allowlist checks read options the way getopt does, so spelling an option differently
(combined flags, attached values, abbreviations, options after operands, wrappers) cannot get
past them. Each bypass is tried through the exec tool on the plain process sandbox -- where the
checks are the only boundary -- against targets in a temporary directory outside the
workspace, which must stay untouched; legitimate spellings still run."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from switchboard_tools.builtin import builtin_registry
from switchboard_tools.errors import ToolError
from switchboard_tools.registry import ToolContext, ToolOutput
from switchboard_tools.sandbox import ProcessSandbox
from switchboard_tools.tools.argcheck import check_command
from switchboard_tools.tools.exec import DEFAULT_EXEC_ALLOWLIST

from .sandbox_checks import HostTargets, host_targets

WRAPPERS = ["env", "nice", "timeout", "nohup", "stdbuf", "xargs"]
ALLOW = frozenset([*DEFAULT_EXEC_ALLOWLIST, *WRAPPERS, "du", "find"])


@pytest.fixture
def host() -> Iterator[HostTargets]:
    with host_targets() as targets:
        yield targets


async def run(ctx: ToolContext, command: str) -> ToolOutput:
    registry = builtin_registry(ProcessSandbox(), sorted(ALLOW))
    return await registry.execute("exec", json.dumps({"command": command}), ctx)


# Those marked BYPASS passed the checks before (with what they did then, where it matters);
# the others were refused already and must stay so.
BYPASSES = [
    ("sort -uo{dir}/planted in.txt", "outside the workspace"),  # BYPASS: wrote {dir}/planted
    ("sort -o{dir}/planted in.txt", "outside the workspace"),
    ("sort -o {dir}/planted in.txt", "outside the workspace"),
    ("sort in.txt -uo {dir}/planted", "outside the workspace"),
    ("sort --out={dir}/planted in.txt", "outside the workspace"),
    ("sort --output {dir}/planted in.txt", "outside the workspace"),
    ("sort -T{dir} in.txt", "outside the workspace"),
    ("sort --temporary-dir={dir} in.txt", "outside the workspace"),
    ("sort --random-source={readable} in.txt", "outside the workspace"),
    ("sort --compress-prog=sh in.txt", "not allowed for sort"),
    ("sort --comp sh in.txt", "not allowed for sort"),
    ("sort --files0=in.txt", "not allowed for sort"),
    ("grep -if{readable} in.txt", "outside the workspace"),  # BYPASS: read {readable}
    ("grep -f {readable} in.txt", "outside the workspace"),
    ("grep --exclude-from={readable} x in.txt", "outside the workspace"),
    ("grep -rf{readable} x", "outside the workspace"),  # BYPASS: read {readable}
    ("date -us 2020-01-01", "not allowed for date"),
    ("date -s2020-01-01", "not allowed for date"),
    ("date --se=2020-01-01", "not allowed for date"),
    ("date 010100002020", "would set the clock"),  # BYPASS: set the clock (as root)
    ("date -f{readable}", "outside the workspace"),
    ("date -r {readable}", "outside the workspace"),
    ("uniq in.txt {dir}/planted", "outside the workspace"),
    ("wc --files0=in.txt", "not allowed for wc"),
    ("du -X{readable} .", "outside the workspace"),
    ("cat -Z in.txt", "no option '-Z'"),  # BYPASS
    ("sort --nonsense in.txt", "no option '--nonsense'"),  # BYPASS
    ("ls --c", "is ambiguous"),  # BYPASS
    ("sort -o", "needs a value"),  # BYPASS
    # wrappers run only allowlisted programs, checked in turn
    ("env sh -c id", "'sh' is not allowed"),  # BYPASS: ran sh
    ("env -i FOO=1 /bin/sh -c id", "not by path"),
    ("env PATH=. cat in.txt", "may not set PATH"),  # BYPASS: ran ./cat
    ("env LD_PRELOAD=./x.so cat in.txt", "may not set LD_PRELOAD"),  # BYPASS: loaded ./x.so
    ("env -S 'sh -c id'", "not allowed for env"),  # BYPASS: ran sh
    ("nice -n 5 sh -c id", "'sh' is not allowed"),  # BYPASS: ran sh
    ("nice -5 rm -rf .", "'rm' is not allowed"),  # BYPASS: ran rm
    ("timeout 5 sh -c id", "'sh' is not allowed"),  # BYPASS: ran sh
    ("timeout -s KILL 5 sort -o{dir}/planted in.txt", "outside the workspace"),
    ("nohup env sh", "'sh' is not allowed"),  # BYPASS: ran sh
    ("stdbuf -o0 sh", "'sh' is not allowed"),  # BYPASS: ran sh
    ("xargs -n1 sh", "'sh' is not allowed"),  # BYPASS: ran sh
    ("find . -exec sh +", "'-exec' is not allowed for find"),
]


@pytest.mark.parametrize(("template", "refusal"), BYPASSES)
async def test_bypass_is_refused(
    ctx: ToolContext, workspace: Path, host: HostTargets, template: str, refusal: str
) -> None:
    (workspace / "in.txt").write_text("b\na\n")
    command = template.format(dir=host.writable_dir, readable=host.readable)
    out = await run(ctx, command)
    assert out.is_error and out.content.startswith("Command refused"), out.content
    assert refusal in out.content, out.content
    assert host.untouched()
    assert host.READABLE_TEXT not in out.content


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("date -Iseconds -d @0 -u", "1970-01-01T00:00:00+00:00\n"),  # -I's value is 'seconds'
        ("date -ud @86400 +%F", "1970-01-02\n"),  # -u then -d's value: no -s anywhere
        ("sort -o sorted.txt in.txt", "(no output)"),
        ("sort -ruo sorted.txt in.txt", "(no output)"),
        ("sort --rev in.txt", "b\na\n"),  # an unambiguous abbreviation
        ("sort in.txt -r", "b\na\n"),
        ("head -1 in.txt", "b\n"),
        ("tail -n +2 in.txt", "a\n"),
        ("grep -n2 -e a in.txt", "1-b\n2:a\n"),
        ("grep -e -x -e a in.txt", "a\n"),  # -e's value is '-x', a pattern
        ("cat -- in.txt", "b\na\n"),
        ("ls --color=never in.txt", "in.txt\n"),
        ("env LANG=C sort in.txt", "a\nb\n"),
        ("timeout 5 sort in.txt", "a\nb\n"),
        ("nice -n 5 head -1 in.txt", "b\n"),
    ],
)
async def test_legitimate_spellings_run(
    ctx: ToolContext, workspace: Path, command: str, expected: str
) -> None:
    (workspace / "in.txt").write_text("b\na\n")
    out = await run(ctx, command)
    assert not out.is_error and out.content == expected, out.content
    if "sorted.txt" in command:
        assert (workspace / "sorted.txt").read_text() in ("a\nb\n", "b\na\n")


@pytest.mark.parametrize(
    "argv",
    [
        ["mystery", "-o/tmp/x"],  # a program exec has no declaration for: every tail checked
        ["mystery", "-xo../../x"],
        ["mystery", "--out=/tmp/x"],
        ["mystery", "/etc/passwd"],
    ],
)
def test_unknown_programs_are_checked_conservatively(argv: list[str], workspace: Path) -> None:
    with pytest.raises(ToolError, match="outside the workspace"):
        check_command(argv, frozenset({"mystery"}), workspace, workspace)
    check_command(["mystery", "-x", "inside.txt"], frozenset({"mystery"}), workspace, workspace)


def test_wrapping_is_bounded(workspace: Path) -> None:
    argv: list[str] = ["nice"] * 10 + ["cat", "x"]
    with pytest.raises(ToolError, match="wraps too many"):
        check_command(argv, ALLOW, workspace, workspace)
