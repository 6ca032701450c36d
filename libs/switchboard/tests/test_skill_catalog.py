"""The skill catalog: front matter rules, the workspace before the shared folders, a symlink
out of the workspace refused, YAML tags that would build objects refused, the stat cache."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from switchboard.skills import SkillCatalog, SkillFormatError, parse_skill


def skill(root: Path, folder: str, text: str) -> Path:
    (root / folder).mkdir(parents=True, exist_ok=True)
    path = root / folder / "SKILL.md"
    path.write_text(text)
    return path


def test_front_matter_gives_name_description_requirements_and_body() -> None:
    text = "---\ndescription: Does  things.\nrequires: {bins: [jq], env: [TOKEN]}\n---\nBODY\n"
    name, description, requires, body = parse_skill(text, "jq-helper")
    assert (name, description, body) == ("jq-helper", "Does things.", "BODY")
    assert (requires.bins, requires.env) == (("jq",), ("TOKEN",))
    assert requires.missing({}, lambda _: None) == ["binary jq", "env TOKEN"]


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("no front matter", "does not start with YAML front matter"),
        ("---\ndescription: x\n", "no closing '---'"),
        ("---\nname: Bad Name\ndescription: x\n---\n", "name: 1-64"),
        ("---\nname: ok\n---\n", "description: missing"),
        ("---\ndescription: x\nrequires: {bins: ['rm -rf /']}\n---\n", "requires.bins"),
        ("---\ndescription: !!python/object/apply:os.system [id]\n---\n", "not valid YAML"),
    ],
)
def test_unusable_front_matter_is_refused_with_the_reason(text: str, why: str) -> None:
    with pytest.raises(SkillFormatError, match=why):
        parse_skill(text, "x")


def test_the_workspace_wins_a_name_and_a_symlink_out_is_refused(tmp_path: Path) -> None:
    workspace, shared, outside = tmp_path / "ws", tmp_path / "shared", tmp_path / "outside"
    skill(workspace / "skills", "a", "---\nname: same\ndescription: mine\n---\nMINE")
    skill(shared, "b", "---\nname: same\ndescription: theirs\n---\nTHEIRS")
    skill(shared, "c", "---\nname: other\ndescription: other\n---\nOTHER")
    secret = skill(outside, "s", "---\nname: secret\ndescription: SECRET\n---\nSECRET")
    os.symlink(secret.parent, workspace / "skills" / "escape")
    found, problems = SkillCatalog([shared]).find(workspace)
    assert [(f.skill.name, f.skill.description) for f in found] == [
        ("other", "other"),
        ("same", "mine"),
    ]
    # A workspace's skills follow no symlink at all (docs/trust.md): refused before it could
    # even be seen to lead outside.
    assert [p.reason for p in problems] == ["it is or passes through a symbolic link"]


def test_a_workspace_skill_symlinked_to_a_file_inside_is_refused(tmp_path: Path) -> None:
    """SKILL.md led to the owner's MEMORY.md in the same workspace: skill_read would hand the
    owner's memory to whoever may read skills."""
    workspace = tmp_path / "ws"
    (workspace / "skills" / "leak").mkdir(parents=True)
    (workspace / "MEMORY.md").write_text("---\nname: leak\ndescription: MEMO\n---\nSECRET")
    os.symlink("../../MEMORY.md", workspace / "skills" / "leak" / "SKILL.md")
    found, problems = SkillCatalog().find(workspace)
    assert found == []
    assert [p.reason for p in problems] == ["it is or passes through a symbolic link"]


def test_a_skills_folder_symlinked_out_of_the_workspace_is_skipped(tmp_path: Path) -> None:
    skill(tmp_path / "outside", "s", "---\nname: secret\ndescription: SECRET\n---\n")
    (tmp_path / "ws").mkdir()
    os.symlink(tmp_path / "outside", tmp_path / "ws" / "skills")
    assert SkillCatalog().find(tmp_path / "ws") == ([], [])


def test_an_edit_is_seen_and_an_unchanged_file_is_not_read_again(tmp_path: Path) -> None:
    path = skill(tmp_path / "ws" / "skills", "a", "---\ndescription: one\n---\n")
    catalog = SkillCatalog()
    assert catalog.find(tmp_path / "ws")[0][0].skill.description == "one"
    path.write_text("---\ndescription: two, longer\n---\n")
    assert catalog.find(tmp_path / "ws")[0][0].skill.description == "two, longer"
    path.chmod(0)  # a read would now fail (unless root): the cache answers
    if os.geteuid() != 0:
        assert catalog.find(tmp_path / "ws")[0][0].skill.description == "two, longer"
