"""The workspace's bootstrap files in the model's request, every service a real process and the
model the fake Anthropic API (the real Messages wire format, reached through the ``anthropic``
SDK): a DM's request carries AGENTS/SOUL/USER/MEMORY.md (MEMORY.md over 20k characters cut to
its head and tail with the marker) in a system block marked for prompt caching, the clock in
the configured time zone after it; a group's request has the shared files but neither USER.md
nor MEMORY.md. One system for the module: the tests use their own chats and read only their own
model calls, and the files are never written to."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.chat import say
from tests.e2e.helpers import wait_for
from tests.fakes.llm import FakeLLM, RecordedCall, echo
from tests.support.services import ServiceProcesses

MEMORY = "MEMHEAD " + "remembered fact. " * 2500 + " MEMTAIL"  # ~42k characters
FILES = {
    "AGENTS.md": "AGENTS-MARK: keep answers short.",
    "SOUL.md": "SOUL-MARK: warm and dry.",
    "USER.md": "USER-MARK: the owner lives in Berlin.",
    "MEMORY.md": MEMORY,
}


@pytest.fixture(scope="module")
def services(
    tmp_path_factory: pytest.TempPathFactory, module_nats_url: str, module_database_url: str
) -> Iterator[ServiceProcesses]:
    workspaces = Path(tempfile.mkdtemp(prefix="sb-ws-", dir="/tmp"))
    workspaces.chmod(0o755)
    (workspaces / "main").mkdir()
    for name, text in FILES.items():
        (workspaces / "main" / name).write_text(text)
    try:
        with FakeLLM(echo()) as llm:
            env = {
                "SB_MODEL": "anthropic:claude-sonnet-4-5",
                "ANTHROPIC_API_KEY": "sk-ant-test",
                "ANTHROPIC_BASE_URL": llm.base_url,
                "SB_WORKSPACES_DIR": str(workspaces),
                "SB_TIMEZONE": "Europe/Berlin",
                "SB_DM_POLICY": "open",
                "SB_GROUP_ACTIVATION": "always",
                # The DM is the owner's (USER.md and MEMORY.md are theirs); groups are closed
                # unless listed (docs/trust.md).
                "SB_OWNERS": '["telegram:4242"]',
                "SB_TELEGRAM_GROUPS": '["-100200"]',
            }
            home = tmp_path_factory.mktemp("workspace-prompt")
            procs = ServiceProcesses(home, module_nats_url, module_database_url, env)
            procs.llm = llm  # type: ignore[attr-defined]
            procs.start()
            try:
                yield procs
            finally:
                procs.stop()
    finally:
        shutil.rmtree(workspaces, ignore_errors=True)


def call_saying(llm: FakeLLM, text: str) -> RecordedCall:
    found: RecordedCall = wait_for(
        lambda: next((c for c in llm.calls if c.request.last_user_text == text), None),
        timeout=60,
        what=f"the model call for {text!r}",
    )
    return found


def section(system: str, name: str) -> str:
    """The text of one injected file in the system prompt."""
    start = system.index(f"## {name}\n") + len(name) + 4
    end = system.find("\n\n## ", start)
    return system[start : end if end >= 0 else None]


def test_a_dm_gets_every_file_truncated_and_cache_marked(services: ServiceProcesses) -> None:
    llm: FakeLLM = services.llm  # type: ignore[attr-defined]
    say(services.nats_url, "4242", "hello there", "wp-1")
    call = call_saying(llm, "hello there")
    assert call.status == 200
    system: list[dict[str, Any]] = call.request.body["system"]
    stable, runtime = system[0], system[1]
    assert stable["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in runtime
    for mark in ("AGENTS-MARK", "SOUL-MARK", "USER-MARK"):
        assert mark in stable["text"]
    memory = section(stable["text"], "MEMORY.md")
    assert memory.startswith(MEMORY[:14_000]) and memory.endswith(MEMORY[-4_000:])
    assert f"[... {len(MEMORY) - 18_000} characters omitted" in memory
    assert "Current time" not in stable["text"]  # the part that changes comes after the mark
    assert "in Europe/Berlin (UTC+0" in runtime["text"]
    assert "Session: main:telegram:4242 (direct)" in runtime["text"]
    assert "Model: anthropic:claude-sonnet-4-5" in runtime["text"]
    tools = call.request.body["tools"]
    assert tools and tools[-1]["cache_control"] == {"type": "ephemeral"}
    assert all("cache_control" not in t for t in tools[:-1])


def test_a_group_never_gets_user_md_or_memory_md(services: ServiceProcesses) -> None:
    llm: FakeLLM = services.llm  # type: ignore[attr-defined]
    say(services.nats_url, "4242", "hello group", "wp-2", group="-100200")
    call = call_saying(llm, "hello group")
    text = "\n".join(block["text"] for block in call.request.body["system"])
    assert "AGENTS-MARK" in text and "SOUL-MARK" in text
    assert "USER-MARK" not in text and "MEMHEAD" not in text and "## MEMORY.md" not in text
    assert "(group)" in text
