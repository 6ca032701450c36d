from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from switchboard_tools.errors import ToolError
from switchboard_tools.registry import ToolContext, ToolOutput
from switchboard_tools.sandbox import ProcessResult, ProcessSandbox
from switchboard_tools.tools.exec import (
    DEFAULT_EXEC_ALLOWLIST,
    DEFAULT_EXEC_OUTPUT_CAP,
    ExecTool,
    parse_command,
)

from .sandbox_checks import KILL_GRACE_MS, assert_all_gone

Call = Callable[..., Awaitable[ToolOutput]]

ALLOW = frozenset(DEFAULT_EXEC_ALLOWLIST)


def test_default_allowlist_is_conservative() -> None:
    for name in ["env", "sh", "bash", "python3", "rm", "find", "xargs", "awk", "sed", "sleep"]:
        assert name not in ALLOW


@pytest.mark.parametrize(
    "command",
    [
        "ls; cat /etc/passwd",
        "ls | sh",
        "ls || id",
        "ls && id",
        "ls & id",
        "echo $(id)",
        "echo `id`",
        "echo $HOME",
        "echo ${PATH}",
        "cat < /etc/passwd",
        "echo x > out.txt",
        "echo x >> out.txt",
        "ls\nid",
        "ls\rid",
        "ls \\\nid",
        "echo \\x",
        "(id)",
        "{ id; }",
        "echo 'quoted ; still refused'",
        'echo "a|b"',
        "ls\x00id",
    ],
)
def test_shell_syntax_refused(command: str) -> None:
    with pytest.raises(ToolError, match="metacharacters are not allowed"):
        parse_command(command, ALLOW)


@pytest.mark.parametrize(
    ("command", "fragment"),
    [
        ("/bin/sh -c x", "not by path"),
        ("./ls", "not by path"),
        ("/usr/bin/cat x", "not by path"),
        ("rm -rf /", "'rm' is not allowed"),
        ("sh -c id", "'sh' is not allowed"),
        ("env", "'env' is not allowed"),
        ("python3 -c 1", "'python3' is not allowed"),
        ("'l's", "'ls' is"),  # quoting cannot hide anything: this is just ls
        ("echo 'unbalanced", "cannot parse"),
        ("   ", "empty command"),
    ],
)
def test_program_must_be_allowlisted(command: str, fragment: str) -> None:
    if command == "'l's":
        assert parse_command(command, ALLOW) == ["ls"]
        return
    with pytest.raises(ToolError, match="Command refused") as info:
        parse_command(command, ALLOW)
    assert fragment in str(info.value)


def test_quoted_arguments() -> None:
    assert parse_command("grep -n 'two words' \"f g.txt\" #x", ALLOW) == [
        "grep",
        "-n",
        "two words",
        "f g.txt",
        "#x",
    ]


def test_invalid_allowlist_entries() -> None:
    for bad in ["/bin/ls", "", "ls;", "a b"]:
        with pytest.raises(ValueError):
            ExecTool(ProcessSandbox(), allowlist=[bad])


async def test_refusals_through_the_registry(call: Call, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    for command in [
        f"ls; touch {marker}",
        f"ls | touch {marker}",
        f"echo $(touch {marker})",
        f"echo `touch {marker}`",
        f"/bin/sh -c 'touch {marker}'",
        f"ls\ntouch {marker}",
        "rm -rf /",
    ]:
        out = await call("exec", {"command": command})
        assert out.is_error, command
        assert out.content.startswith("Command refused"), command
    assert not marker.exists()


async def test_runs_in_workspace(call: Call, workspace: Path) -> None:
    out = await call("exec", {"command": "pwd"})
    assert not out.is_error
    assert out.content == f"{workspace}\n"
    (workspace / "sub").mkdir()
    (workspace / "sub" / "f.txt").write_text("b\na\nb\n")
    out = await call("exec", {"command": "sort f.txt", "cwd": "sub"})
    assert out.content == "a\nb\nb\n"
    assert out.details["exit_code"] == 0
    assert out.details["cwd"] == "sub"
    assert out.details["argv"] == ["sort", "f.txt"]
    assert out.details["timed_out"] is False and out.details["truncated"] is False
    assert out.details["duration_ms"] >= 0


async def test_cwd_confined(call: Call, workspace: Path) -> None:
    (workspace / "etc").symlink_to("/etc")
    for cwd in ["..", "/", "/etc", "etc"]:
        out = await call("exec", {"command": "ls", "cwd": cwd})
        assert out.is_error and "outside the workspace" in out.content, cwd
    out = await call("exec", {"command": "ls", "cwd": "missing"})
    assert out.is_error and "not a directory" in out.content


@pytest.mark.parametrize(
    "command",
    [
        "cat /etc/passwd",
        "cat ../../../../etc/passwd",
        "cat etc/passwd",
        "cat pw",
        "ls /",
        "grep -r root /etc",
        "grep -f/etc/passwd x",
        "grep --file=/etc/passwd x",
        "sort -o /tmp/x f",
        "sort --output=../x f",
        "tail -n 5 ..",
    ],
)
async def test_path_arguments_confined(call: Call, workspace: Path, command: str) -> None:
    (workspace / "etc").symlink_to("/etc")
    (workspace / "pw").symlink_to("/etc/passwd")
    out = await call("exec", {"command": command})
    assert out.is_error
    assert "points outside the workspace" in out.content
    assert "root:" not in out.content


@pytest.mark.parametrize(
    "command",
    [
        "sort --compress-program=sh f",
        "sort --compress-prog=sh f",
        "sort --files0-from=list",
        "wc --files0-from=list",
        "date -s 2000-01-01",
        "date --set=2000-01-01",
        "date -us 2000-01-01",
    ],
)
async def test_dangerous_options_refused(call: Call, command: str) -> None:
    out = await call("exec", {"command": command})
    assert out.is_error
    assert "is not allowed for" in out.content


async def test_nonzero_exit(call: Call, workspace: Path) -> None:
    out = await call("exec", {"command": "ls missing-file"})
    assert out.is_error
    assert "missing-file" in out.content
    assert out.content.endswith("[exit code 2]")
    assert out.details["exit_code"] == 2
    out = await call("exec", {"command": "false"})
    assert out.content == "[exit code 1]"
    out = await call("exec", {"command": "true"})
    assert out.content == "(no output)" and not out.is_error


async def test_allowlisted_but_missing_program(ctx: ToolContext) -> None:
    tool = ExecTool(ProcessSandbox(), allowlist=["definitely-not-installed-xyz"])
    out = await tool.run({"command": "definitely-not-installed-xyz"}, ctx)
    assert out.details["exit_code"] == 127
    assert "command not found" in out.content


async def test_timeout_kills_and_returns_quickly(call: Call, workspace: Path) -> None:
    out = await call("exec", {"command": "sleep 30", "timeout_s": 0.5})
    assert out.is_error
    assert out.content == "[timed out after 0.5s]"
    assert out.details["timed_out"] is True
    assert out.details["exit_code"] is None
    # Killed at its timeout (not after the 30 s sleep), and really gone.
    assert out.details["duration_ms"] <= 500 + KILL_GRACE_MS, out.details["duration_ms"]
    await assert_all_gone(workspace)


async def test_exec_timeout_fits_in_the_call_budget(call: Call) -> None:
    """A command asking for more time than the call has gets a timeout inside the call's
    budget (1.5 s here: 1 s), so its own timeout fires and the model gets the command's result.
    Were the 60 s asked for kept, the registry's deadline would answer instead, with
    "Tool exec timed out" and none of the command's details. How long it took is not the
    point (the registry bounds the call anyway); the caller only waits, generously."""
    out = await asyncio.wait_for(
        call("exec", {"command": "sleep 30", "timeout_s": 60}, timeout_s=1.5), 60
    )
    assert out.is_error
    assert out.details.get("error") != "timeout", out.content  # not the registry's deadline
    assert out.content == "[timed out after 1s]"
    assert out.details["timed_out"] is True
    assert out.details["timeout_s"] == 1.0


async def test_timeout_schema_maximum(call: Call) -> None:
    out = await call("exec", {"command": "true", "timeout_s": 100000})
    assert out.is_error and "at 'timeout_s'" in out.content
    out = await call("exec", {"command": "true", "timeout_s": 0})
    assert out.is_error and "at 'timeout_s'" in out.content


async def test_output_cap_truncates(call: Call, workspace: Path) -> None:
    (workspace / "big.txt").write_text("0123456789abcdef" * 64 * 1024)  # 1 MiB
    out = await call("exec", {"command": "cat big.txt"})
    assert out.details["truncated"] is True
    assert out.details["exit_code"] == 0  # drained, not killed
    assert out.content.endswith("\n[output truncated]")
    body = out.content.removesuffix("\n[output truncated]")
    assert len(body) == DEFAULT_EXEC_OUTPUT_CAP
    assert out.is_error is False


async def test_env_is_minimal(call: Call, monkeypatch: pytest.MonkeyPatch, workspace: Path):
    monkeypatch.setenv("SWITCHBOARD_TEST_SECRET", "s3cr3t-token")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    out = await call("exec", {"command": "env"})
    assert not out.is_error
    env = dict(line.split("=", 1) for line in out.content.splitlines())
    assert env == {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(workspace),
        "LANG": "C.UTF-8",
    }
    assert "s3cr3t" not in out.content and "sk-should" not in out.content


class FakeSandbox:
    """Any Sandbox implementation can be plugged in: the tool only uses the protocol."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], Path, float, int]] = []

    async def run(
        self, argv, *, cwd, timeout_s, output_cap, env=None, on_output=None
    ) -> ProcessResult:
        self.calls.append((argv, cwd, timeout_s, output_cap))
        return ProcessResult(3, "partial", True, False, 1.5)

    def attestation(self) -> dict[str, object]:
        return {"sandbox": "fake"}


async def test_sandbox_is_pluggable(ctx: ToolContext, workspace: Path) -> None:
    fake = FakeSandbox()
    tool = ExecTool(fake, allowlist=["ls"], output_cap=10, default_timeout_s=7)
    out = await tool.run({"command": "ls -la"}, ctx)
    assert fake.calls == [(["ls", "-la"], workspace, 7, 10)]
    assert out.content == "partial\n[output truncated]\n[exit code 3]"
    assert out.is_error
    assert out.details["exit_code"] == 3
