"""The terminal commands the way a user runs them, as processes against `switchboard up` with a
scripted fake model: `switchboard agent -m` prints the answer (exit 1 when the run failed),
`switchboard chat` with piped stdin streams the answer over the WebChat socket, shows the tool
call's phases and the agent's answer to /status, and leaves at the end of input;
`switchboard sessions list|history|reset` see and reset those sessions; with no system running
every command says so and exits 1."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from switchboard.embedded import free_port
from tests.fakes.llm import FakeLLM, FakeRequest, Reply
from tests.support.stack import Stack, start_stack, stop_stack


def script(req: FakeRequest) -> Reply:
    """ "What time..." calls get_time, then says what it said; anything else is echoed."""
    if req.last_tool_results:
        return Reply(text="The tool said: " + " ".join(req.last_tool_results))
    if "what time" in req.last_user_text:
        return Reply(tool_calls=[("get_time", {"timezone": "UTC"})])
    return Reply(text="You said: " + req.last_user_text.splitlines()[-1])


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    with FakeLLM(script) as fake:
        yield fake


@pytest.fixture(scope="module")
def stack(llm: FakeLLM) -> Iterator[Stack]:
    # Not under pytest's tmp tree (see tests/support/servers.py: pgserver and root).
    home = Path(tempfile.mkdtemp(prefix="sb-term-"))
    env = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": f"{llm.base_url}/v1"}
    s = start_stack(home / "home", env, timeout=120)
    try:
        yield s
    finally:
        stop_stack(s)
        shutil.rmtree(home, ignore_errors=True)


def switchboard(
    env: dict[str, str], *args: str, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "switchboard.cli.main", *args],
        env={**{k: v for k, v in os.environ.items() if not k.startswith("SB_")}, **env},
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def run(stack: Stack, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {
        "SB_HOME": str(stack.home),
        "SB_HTTP_PORT": str(stack.http_port),
        "SB_GATEWAY_TOKEN": stack.token,  # the stack was given one (no token file)
    }
    return switchboard(env, *args, stdin=stdin)


def test_agent_prints_the_answer_and_fails_when_the_run_fails(stack: Stack, llm: FakeLLM) -> None:
    done = run(stack, "agent", "-m", "hello there", "--session", "one")
    assert (done.returncode, done.stdout) == (0, "You said: hello there\n"), done.stderr

    as_json = run(stack, "agent", "-m", "what time is it?", "--session", "one", "--json")
    assert as_json.returncode == 0, as_json.stderr
    outcome = json.loads(as_json.stdout)
    assert outcome["session_key"] == "main:webchat:one"
    assert outcome["status"] == "completed"
    assert outcome["tools"] == [{"tool": "get_time", "is_error": False}]
    assert outcome["text"].startswith("The tool said: ")

    env = {"SB_HTTP_PORT": str(stack.http_port), "SB_GATEWAY_TOKEN": "not-the-token"}
    refused = switchboard({"SB_HOME": str(stack.home), **env}, "agent", "-m", "hi")
    assert refused.returncode == 1
    assert refused.stderr.startswith("switchboard agent: the gateway refused the token")

    llm.fail_next(400, message="the model refused")  # a 400 is not retried
    try:
        failed = run(stack, "agent", "-m", "this one fails", "--session", "broken")
    finally:
        llm.reset()
    assert failed.returncode == 1, failed.stdout
    assert "the model call failed" in failed.stdout  # the reply the agent wrote
    assert "switchboard agent: the run ended error: " in failed.stderr, failed.stderr
    assert "Traceback" not in failed.stderr


def test_chat_streams_answers_tool_phases_and_commands_then_leaves_at_eof(stack: Stack) -> None:
    lines = "hi chat\nwhat time is it?\n/status\n/help\n"
    chat = run(stack, "chat", "--session", "two", stdin=lines)
    assert chat.returncode == 0, chat.stderr
    out = chat.stdout
    assert "· chatting in main:webchat:two" in out
    assert "You said: hi chat\n" in out
    started = out.index("· get_time started")
    assert out.index("· get_time done") > started
    assert out.index("The tool said: ") > started
    # /status went to an agent replica (not to the model) and came back at once.
    assert "Session: main:webchat:two\n" in out and "Transcript: 6 messages" in out, out
    assert "/session KEY" in out  # /help is answered locally
    assert chat.stderr == ""


def test_sessions_list_history_and_reset(stack: Stack) -> None:
    assert run(stack, "agent", "-m", "remember me", "--session", "three").returncode == 0
    listed = run(stack, "sessions", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    found = {s["session_key"]: s for s in json.loads(listed.stdout)}
    assert found["main:webchat:three"]["message_count"] == 2

    shown = run(stack, "sessions", "history", "main:webchat:three")
    assert shown.returncode == 0, shown.stderr
    roles = [line.split()[2:4] for line in shown.stdout.splitlines()]
    assert roles == [["user", "remember"], ["assistant", "You"]], shown.stdout
    assert "You said: remember me" in shown.stdout

    reset = run(stack, "sessions", "reset", "main:webchat:three")
    assert (reset.returncode, reset.stdout) == (
        0,
        "reset main:webchat:three (2 messages removed)\n",
    ), reset.stderr
    empty = run(stack, "sessions", "history", "main:webchat:three", "--json")
    assert json.loads(empty.stdout)["messages"] == []

    too_many = run(stack, "sessions", "list", "--limit", "0")
    assert too_many.stderr == "switchboard sessions: 400: limit must be between 1 and 1000\n"


def test_without_a_running_system_each_command_says_so(tmp_path: Path) -> None:
    no_token = switchboard({"SB_HOME": str(tmp_path)}, "agent", "-m", "hi")
    assert no_token.returncode == 1
    assert "no gateway token: set SB_GATEWAY_TOKEN or start the system" in no_token.stderr

    env = {"SB_HOME": str(tmp_path), "SB_GATEWAY_TOKEN": "t", "SB_HTTP_PORT": str(free_port())}
    for args in (("agent", "-m", "hi"), ("chat",), ("sessions", "list")):
        down = switchboard(env, *args, stdin="hello\n")
        assert down.returncode == 1, args
        assert "cannot reach the gateway at http://127.0.0.1:" in down.stderr, down.stderr
        assert "is the system running? (`switchboard up`)" in down.stderr
        assert "Traceback" not in down.stderr
