"""The agent's skills (:mod:`switchboard.skills`): their names and descriptions in the system
prompt, their bodies through the agent-local tool ``skill_read``.

A skill whose requirements are not met on this host (a program not on ``PATH``, an environment
variable not set) is still listed, marked unavailable with what it lacks, so the model can say
why it cannot do that task instead of guessing; ``skill_read`` refuses it with the same reason.

Nothing here runs a skill: ``skill_read`` returns text. A command a skill describes runs only
when the model calls the ``exec`` tool, in the tool executor's sandbox, under the tool policy
and approval rules like any other call."""

from __future__ import annotations

from pathlib import Path

from switchboard.skills import Found, SkillCatalog
from switchboard.toolspec import ToolSpec

from ..tools.client import CallRequest, CallResult
from ..tools.local import LocalContext, tool_error
from .files import truncate

NAME = "skill_read"
HEADING = (
    "# Skills\n"
    "Skills are instructions for particular tasks. When a task matches a skill's description,"
    f' read the skill first with the {NAME} tool ({{"name": "<skill>"}}) and follow it. Commands'
    " a skill names run only through the exec tool."
)


class AgentSkills:
    def __init__(self, catalog: SkillCatalog, workspace_root: Path, max_chars: int) -> None:
        self.catalog = catalog
        self.workspace_root = workspace_root
        self.max_chars = max_chars

    def find(self, agent: str) -> list[Found]:
        found, _ = self.catalog.find(self.workspace_root / agent)
        return found

    def section(self, agent: str) -> str:
        """The prompt's skills section ("" : the agent has no skills)."""
        found = self.find(agent)
        if not found:
            return ""
        lines = [HEADING]
        for f in found:
            state = "" if f.available else f" (unavailable here: missing {', '.join(f.missing)})"
            lines.append(f"- {f.skill.name}{state}: {f.skill.description}")
        return "\n".join(lines)


class SkillReadTool:
    def __init__(self, skills: AgentSkills) -> None:
        self.skills = skills

    def offered_to(self, agent: str) -> bool:
        """Only an agent with skills is offered the tool (its schema in every request of an
        agent without any would be bytes for nothing)."""
        return bool(self.skills.find(agent))

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(
            NAME,
            "Read a skill's instructions (the skills are listed in the system prompt).",
            {
                "type": "object",
                "properties": {
                    "name": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 64,
                        "description": "The skill's name, as listed.",
                    }
                },
                "required": ["name"],
                "additionalProperties": False,
            },
        )

    async def run(self, ctx: LocalContext, call: CallRequest) -> CallResult:
        wanted = str(call.args.get("name", ""))
        found = {f.skill.name: f for f in self.skills.find(ctx.agent)}
        f = found.get(wanted)
        if f is None:
            known = ", ".join(sorted(found)) or "none"
            return tool_error(
                call, f"{NAME}: no skill named {wanted[:64]!r} (skills: {known}).", "unknown_skill"
            )
        if not f.available:
            return tool_error(
                call,
                f"{NAME}: the skill {wanted!r} is unavailable here: missing"
                f" {', '.join(f.missing)}.",
                "skill_unavailable",
            )
        skill = f.skill
        where = (
            f"shared skill folder {skill.source / skill.folder}"
            if skill.shared
            else f"workspace folder skills/{skill.folder}/"
        )
        text = f"Skill {skill.name} ({where}):\n\n{truncate(skill.body, self.skills.max_chars)}"
        return CallResult(call.call_id, text, False, {"skill": skill.name})
