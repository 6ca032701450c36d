"""``skill_read`` is offered to an agent that has skills and to no other: its schema in every
request of an agent without skills would be bytes for nothing."""

from __future__ import annotations

from pathlib import Path

from switchboard.skills import SkillCatalog
from switchboard.toolspec import ToolSpec
from switchboard_agent.tools.local import LocalTools
from switchboard_agent.workspace.skills import NAME, AgentSkills, SkillReadTool

EXEC = ToolSpec("exec", "Run a command.", {"type": "object", "properties": {}})


def test_only_an_agent_with_skills_is_offered_skill_read(tmp_path: Path) -> None:
    folder = tmp_path / "workspaces" / "main" / "skills" / "weather"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\ndescription: Current weather.\n---\nBODY\n")
    (tmp_path / "workspaces" / "other").mkdir()
    skills = AgentSkills(SkillCatalog(), tmp_path / "workspaces", 20_000)
    local = LocalTools([SkillReadTool(skills)])
    assert [s.name for s in local.offered([EXEC], "main")] == ["exec", NAME]
    assert [s.name for s in local.offered([EXEC], "other")] == ["exec"]
    assert [s.name for s in local.offered([EXEC], "nobody")] == ["exec"]  # no workspace yet
