"""The workspace's bootstrap files: which session kinds get which files, truncation (70% head,
20% tail, a marker), reading beneath the workspace only, the mtime cache, seeding from
templates without overwriting, the prompt's runtime section and Anthropic's cache marks."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from switchboard.toolspec import ToolSpec
from switchboard.trust import Standing
from switchboard_agent.providers.anthropic import AnthropicModel
from switchboard_agent.providers.base import ModelRequest
from switchboard_agent.runs.prompt import PromptBuilder, RunFacts
from switchboard_agent.workspace.files import (
    WorkspaceFiles,
    files_for,
    session_kind,
    truncate,
)
from switchboard_agent.workspace.templates import TEMPLATES

ALL = ("AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md", "USER.md", "MEMORY.md")


def workspace(root: Path, agent: str = "main", files: tuple[str, ...] = ALL) -> Path:
    ws = root / agent
    ws.mkdir(parents=True)
    for name in files:
        (ws / name).write_text(f"text of {name}")
    return ws


@pytest.mark.parametrize(
    ("key", "chat_type", "kind", "names"),
    [
        ("main:telegram:42", "direct", "direct", ALL),
        ("main:telegram:group:-100", "group", "group", ALL[:4]),
        ("main:telegram:42", "group", "group", ALL[:4]),  # a group message, whatever the key
        ("main:telegram:42:sub:abc", "", "sub", ("AGENTS.md", "TOOLS.md")),
        ("cron:hb", "", "cron", ALL),
    ],
)
def test_each_session_kind_gets_its_files(
    tmp_path: Path, key: str, chat_type: str, kind: str, names: tuple[str, ...]
) -> None:
    workspace(tmp_path)
    assert session_kind(key, chat_type) == kind
    loaded = WorkspaceFiles(tmp_path, seed=False).load("main", files_for(kind))
    assert [n for n, _ in loaded] == list(names)
    assert all(text == f"text of {n}" for n, text in loaded)


@pytest.mark.parametrize(
    ("kind", "standing", "names"),
    [
        ("direct", Standing.OWNER, ALL),
        ("direct", Standing.PERSONAL, ALL[:4]),  # a person who is not the owner
        ("cron", Standing.PERSONAL, ALL[:4]),  # a job into that person's session
        ("group", Standing.OWNER, ALL[:4]),
        ("group", Standing.GROUP, ALL[:4]),
        ("sub", Standing.OWNER, ("AGENTS.md", "TOOLS.md")),  # as before, whatever the standing
        ("sub", Standing.PERSONAL, ("AGENTS.md", "TOOLS.md")),
    ],
)
def test_the_owners_private_files_only_from_the_owners_standing(
    tmp_path: Path, kind: str, standing: Standing, names: tuple[str, ...]
) -> None:
    workspace(tmp_path)
    builder = PromptBuilder(WorkspaceFiles(tmp_path, seed=False))
    facts = RunFacts("main", "main:telegram:42", kind, "telegram", "m", standing=standing)
    text = builder.build(facts).text
    assert [n for n in ALL if f"## {n}\n" in text] == list(names)
    assert f"Standing: {standing} (" in text


def test_a_heartbeat_run_adds_heartbeat_md_but_a_subagent_never_does() -> None:
    assert files_for("direct", heartbeat=True)[-1] == "HEARTBEAT.md"
    assert "HEARTBEAT.md" not in files_for("sub", heartbeat=True)


def test_truncation_keeps_70_percent_head_and_20_percent_tail_with_a_marker() -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(50_000))
    out = truncate(text, 20_000)
    head, _, rest = out.partition("\n\n[... ")
    marker, _, tail = rest.partition(" ...]\n\n")
    assert head == text[:14_000] and tail == text[-4_000:]
    assert marker.startswith(f"{50_000 - 18_000} characters omitted")
    assert truncate("short", 20_000) == "short"
    assert truncate("x" * 20_000, 20_000) == "x" * 20_000  # exactly the limit: untouched


def test_a_huge_file_is_read_only_where_head_and_tail_come_from(tmp_path: Path) -> None:
    ws = workspace(tmp_path, files=())
    (ws / "AGENTS.md").write_text("HEAD" + "m" * 3_000_000 + "TAIL")
    [(_, text)] = WorkspaceFiles(tmp_path, max_chars=1000, seed=False).load("main", ("AGENTS.md",))
    assert text.startswith("HEAD") and text.endswith("TAIL") and "omitted" in text
    assert len(text) < 1200


def test_files_leading_outside_the_workspace_and_fifos_are_not_loaded(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the host's secret")
    ws = workspace(tmp_path / "root", files=("AGENTS.md",))
    (ws / "SOUL.md").symlink_to(secret)
    (ws / "USER.md").symlink_to("../../secret.txt")
    os.mkfifo(ws / "TOOLS.md")  # opening it for reading would block the run
    (ws / "sub").mkdir()
    (ws / "sub" / "notes.md").write_text("inside")
    # A symlink that stays inside is not followed either: IDENTITY.md (which groups load) led
    # to MEMORY.md (the owner's alone) would show the owner's memory in every group's prompt.
    (ws / "IDENTITY.md").symlink_to("sub/notes.md")
    loaded = dict(WorkspaceFiles(tmp_path / "root", seed=False).load("main", ALL))
    assert loaded == {"AGENTS.md": "text of AGENTS.md"}


def test_a_file_groups_load_led_to_the_owners_memory_is_not_loaded(tmp_path: Path) -> None:
    """An owner's prompt-injected command made AGENTS.md a symlink to MEMORY.md: a group's run
    (shared files only) must not get the owner's memory through it (docs/trust.md)."""
    ws = workspace(tmp_path, files=("MEMORY.md",))
    (ws / "AGENTS.md").symlink_to("MEMORY.md")
    files = WorkspaceFiles(tmp_path, seed=False)
    assert files.load("main", files_for("group")) == []
    # The owner's own run still reads MEMORY.md itself.
    assert files.load("main", files_for("direct")) == [("MEMORY.md", "text of MEMORY.md")]


def test_the_workspace_itself_as_a_symlink_is_refused(tmp_path: Path) -> None:
    elsewhere = workspace(tmp_path / "elsewhere")
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "main").symlink_to(elsewhere)
    assert WorkspaceFiles(tmp_path / "root", seed=False).load("main", ALL) == []


def test_a_file_is_read_again_only_when_it_changed(tmp_path: Path) -> None:
    ws = workspace(tmp_path, files=("AGENTS.md",))
    files = WorkspaceFiles(tmp_path, seed=False)
    assert files.load("main", ("AGENTS.md",)) == [("AGENTS.md", "text of AGENTS.md")]
    cached = files._cache[ws / "AGENTS.md"]
    assert files.load("main", ("AGENTS.md",)) == [("AGENTS.md", "text of AGENTS.md")]
    assert files._cache[ws / "AGENTS.md"] is cached  # the same entry: not read again
    (ws / "AGENTS.md").write_text("edited, and longer")
    assert files.load("main", ("AGENTS.md",)) == [("AGENTS.md", "edited, and longer")]
    (ws / "AGENTS.md").unlink()
    assert files.load("main", ("AGENTS.md",)) == []


def test_a_new_workspace_is_seeded_once_and_a_users_file_is_never_overwritten(
    tmp_path: Path,
) -> None:
    WorkspaceFiles(tmp_path).load("fresh", ("AGENTS.md",))
    assert sorted(p.name for p in (tmp_path / "fresh").iterdir()) == sorted(TEMPLATES)
    assert (tmp_path / "fresh" / "SOUL.md").read_text() == TEMPLATES["SOUL.md"]

    ws = workspace(tmp_path, "mine", files=("SOUL.md",))
    WorkspaceFiles(tmp_path).load("mine", ALL)
    assert [p.name for p in ws.iterdir()] == ["SOUL.md"]  # theirs: nothing added or replaced
    assert (ws / "SOUL.md").read_text() == "text of SOUL.md"


def test_the_prompt_puts_the_files_first_and_the_clock_in_the_agents_zone(tmp_path: Path) -> None:
    workspace(tmp_path)
    builder = PromptBuilder(WorkspaceFiles(tmp_path, seed=False), "UTC", {"main": "Asia/Tokyo"})
    facts = RunFacts(
        "main",
        "main:telegram:42",
        "direct",
        "telegram",
        "openai:gpt-4o-mini",
        standing=Standing.OWNER,
    )
    prompt = builder.build(facts, now=datetime(2026, 3, 2, 23, 30, tzinfo=UTC))
    stable, runtime = prompt.text[: prompt.stable_chars], prompt.text[prompt.stable_chars :]
    assert "## MEMORY.md\ntext of MEMORY.md" in stable and "Current time" not in stable
    assert "Tuesday 2026-03-03 08:30 in Asia/Tokyo (UTC+09:00)" in runtime
    assert "Model: openai:gpt-4o-mini. Channel: telegram." in runtime
    assert "Session: main:telegram:42 (direct)" in runtime
    assert "Standing: owner (a conversation of your owner)." in runtime
    later = builder.build(facts, now=datetime(2026, 3, 3, 9, 0, tzinfo=UTC))
    assert later.text[: later.stable_chars] == stable  # what a provider may cache


def test_anthropic_marks_the_stable_system_block_and_the_tools_for_caching() -> None:
    model = AnthropicModel("claude-sonnet-4-5", "k", "http://127.0.0.1:9")
    tool = ToolSpec("get_time", "time", {"type": "object", "properties": {}})
    system = "identity and files\n\n# Runtime\nnow"
    params = model.request_params(
        ModelRequest(system, [], [tool, tool], cache_prefix_chars=len("identity and files\n\n"))
    )
    assert params["system"] == [
        {"type": "text", "text": "identity and files", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "# Runtime\nnow"},
    ]
    assert [t.get("cache_control") for t in params["tools"]] == [None, {"type": "ephemeral"}]
    plain = model.request_params(ModelRequest(system, [], [tool]))
    assert plain["system"] == system and "cache_control" not in plain["tools"][0]
