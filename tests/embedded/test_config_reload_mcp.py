"""An MCP server written into ``$SB_HOME/switchboard.toml`` of a running ``switchboard up`` is
started and offered without a restart (issue 27, part 5), seen from outside: the tools the fake
model is offered and the tool results it reads, over the gateway's OpenAI-compatible API.

The server is the stdio test server of ``tests/support/mcp_server.py`` (a real MCP server),
started by the executor in its sandbox. Added: the next run is offered ``srv__echo`` and calling
it answers; removed: the next run is offered it no more, and its process is gone."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from switchboard import configfile
from tests.fakes.llm import FakeLLM, FakeRequest, Reply
from tests.support.mcp_server import stdio_server
from tests.support.stack import Stack, start_stack, stop_stack

WAIT_S = 60.0  # generous: the file is looked at every second, the server starts in about one
MARKER = "sb-reload-mcp-up"  # on the server's command line


def script(req: FakeRequest) -> Reply:
    """``call <tool> <json args>`` calls that tool; after tool results the answer quotes them."""
    if req.last_tool_results:
        return Reply(text="done: " + " | ".join(req.last_tool_results))
    if req.last_user_text.startswith("call "):
        _, tool, args = req.last_user_text.split(" ", 2)
        return Reply(tool_calls=[(tool, json.loads(args))])
    return Reply(text="hello")


def config(servers: list[dict[str, Any]]) -> str:
    """The file: the model, and the MCP servers as the JSON a variable would hold."""
    text = '[agent]\nmodel = "openai:model-one"\n'
    if servers:
        text += f"\n[tools]\nmcp_servers = '''{json.dumps(servers)}'''\n"
    return text


def write(path: Path, text: str) -> None:
    """As an editor saves: a new file renamed over the old one."""
    temporary = path.with_name(".switchboard.toml.new")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def until(what: str, check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {WAIT_S:g}s: {what}")
        time.sleep(0.2)


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="sb-reload-mcp-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


class Chat:
    """Runs through the gateway's OpenAI-compatible API; what the fake model was offered."""

    def __init__(self, stack: Stack, llm: FakeLLM) -> None:
        self.stack, self.llm = stack, llm

    def ask(self, text: str) -> tuple[str, list[str]]:
        """The answer to ``text`` (one run) and the tools its first model call offered."""
        calls = len(self.llm.calls)
        body = {"model": "switchboard", "messages": [{"role": "user", "content": text}]}
        headers = {"Authorization": f"Bearer {self.stack.token}"}
        response = httpx.post(
            self.stack.url + "/v1/chat/completions", json=body, headers=headers, timeout=90
        )
        assert response.status_code == 200, response.text
        answer = response.json()["choices"][0]["message"]["content"]
        return answer, list(self.llm.calls[calls].request.tools)


def server_processes() -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if MARKER in cmdline and proc.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(proc)
    return found


def test_an_mcp_server_added_to_the_file_of_a_running_system(short_tmp: Path) -> None:
    server = stdio_server()
    if server["command"] is None:
        pytest.fail("no python the sandbox uid can run (/usr/bin/python3.N) for the MCP server")
    server["args"] = [*server["args"], MARKER]
    home = short_tmp / "home"
    home.mkdir(mode=0o700)
    path = configfile.path_for(home)
    write(path, config([]))
    with FakeLLM(script) as llm:
        env = {"OPENAI_API_KEY": "sk-test-fake", "OPENAI_BASE_URL": llm.openai_base_url}
        stack = start_stack(home, env, timeout=120)
        chat = Chat(stack, llm)
        call = 'call srv__echo {"text": "from the file"}'
        try:
            answer, offered = chat.ask(call)
            assert "srv__echo" not in offered and "exec" in offered
            assert "echo: from the file" not in answer

            # Added: the executor starts it; a run after that is offered it and calls it.
            write(path, config([server]))
            until("srv__echo is offered", lambda: "srv__echo" in chat.ask("hi")[1])
            answer, offered = chat.ask(call)
            assert answer == "done: echo: from the file", answer
            assert {"srv__echo", "srv__add"} <= set(offered)
            assert server_processes(), "the server is not running"

            # Removed: stopped, and no longer offered.
            write(path, config([]))
            until("srv__echo is no longer offered", lambda: "srv__echo" not in chat.ask("hi")[1])
            until("the server's processes are gone", lambda: not server_processes())
            answer, _ = chat.ask(call)
            assert answer.startswith("done: ") and "echo: from the file" not in answer, answer
            assert "Unknown tool" in answer, answer
        finally:
            assert stop_stack(stack) == []
