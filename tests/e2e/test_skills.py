"""Skills end to end, every service a real process and the model the fake OpenAI-compatible
API: the workspace's and the shared folder's skills are listed by name and description in the
model's request (the workspace's ``weather`` shadowing the shared one, a skill lacking a
program marked unavailable, a SKILL.md without front matter left out), ``skill_read`` returns
a skill's body and refuses the unavailable one; ``switchboard doctor`` names the program a
skill lacks."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from switchboard.cli.main import main
from tests.e2e import helpers
from tests.e2e.helpers import final_text, wait_for
from tests.fakes.llm import FakeLLM, FakeRequest, Reply
from tests.support.services import ServiceProcesses, with_fake_model

MISSING = "sb-no-such-program-7f3a"
SKILLS = {
    "weather": (
        "---\nname: weather\ndescription: >-\n  Current weather for a city\n  (WEATHER-DESC).\n"
        "requires:\n  bins: [sh]\n  env: [SKILLTEST_TOKEN]\n---\n"
        "WEATHER-BODY: run `curl -s wttr.in/<city>?format=3` with the exec tool.\n"
    ),
    "fancy": (
        f"---\nname: fancy\ndescription: Fancy charts (FANCY-DESC).\nrequires:\n"
        f"  bins: [{MISSING}]\n---\nFANCY-BODY\n"
    ),
    "loose": "no front matter here (LOOSE-BODY)\n",
}
SHARED = {
    "weather": "---\nname: weather\ndescription: SHARED-WEATHER-DESC\n---\nSHARED-BODY\n",
    "notes": "---\nname: notes\ndescription: Take notes (NOTES-DESC).\n---\nNOTES-BODY\n",
}


def script(req: FakeRequest) -> Reply:
    """``read <skill>`` calls skill_read; after the result, the answer quotes it."""
    if req.last_tool_results:
        return Reply(text="read: " + " | ".join(req.last_tool_results))
    text = req.last_user_text
    if text.startswith("read "):
        return Reply(tool_calls=[("skill_read", {"name": text[5:]})])
    return Reply(text="hello")


def write_skills(root: Path, skills: dict[str, str]) -> None:
    for folder, text in skills.items():
        (root / folder).mkdir(parents=True)
        (root / folder / "SKILL.md").write_text(text)


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="sb-skills-", dir="/tmp"))
    write_skills(path, SHARED)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def services(
    tmp_path: Path, nats_url: str, database_url: str, shared_dir: Path
) -> Iterator[ServiceProcesses]:
    env = {"SB_SKILLS_DIRS": json.dumps([str(shared_dir)]), "SKILLTEST_TOKEN": "set"}
    with with_fake_model(tmp_path, nats_url, database_url, script, env) as procs:
        write_skills(Path(procs.env["SB_WORKSPACES_DIR"]) / "main" / "skills", SKILLS)
        yield procs


def ask(procs: ServiceProcesses, key: str, text: str) -> str:
    with helpers.client(procs.url, procs.token) as c:
        r = c.post(f"/api/sessions/{key}/messages", json={"text": text})
        assert r.status_code in (200, 202), r.text
        return str(wait_for(lambda: final_text(c, key), timeout=60, what=f"the reply to {text}"))


def test_skills_are_listed_in_the_prompt_and_read_on_demand(services: ServiceProcesses) -> None:
    llm: FakeLLM = services.llm  # type: ignore[attr-defined]
    reply = ask(services, "main:api:skills", "read weather")
    assert reply.startswith("read: Skill weather (workspace folder skills/weather/):")
    assert "WEATHER-BODY: run `curl" in reply and "SHARED-BODY" not in reply
    first = llm.calls[0].request
    assert "skill_read" in first.tools
    system = first.system
    assert "- weather: Current weather for a city (WEATHER-DESC)." in system
    assert "- notes: Take notes (NOTES-DESC)." in system  # from the shared folder
    assert "SHARED-WEATHER-DESC" not in system  # the workspace's weather wins the name
    assert f"- fancy (unavailable here: missing binary {MISSING}): Fancy charts" in system
    assert "LOOSE-BODY" not in system and "- loose" not in system
    assert "WEATHER-BODY" not in system  # bodies only on demand

    refused = ask(services, "main:api:skills2", "read fancy")
    assert f"the skill 'fancy' is unavailable here: missing binary {MISSING}" in refused
    assert "FANCY-BODY" not in refused
    unknown = ask(services, "main:api:skills3", "read ../../etc")
    assert "no skill named '../../etc' (skills: fancy, notes, weather)" in unknown


def test_doctor_names_the_program_a_skill_lacks(
    tmp_path: Path,
    shared_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    workspaces = tmp_path / "workspaces"
    write_skills(workspaces / "main" / "skills", SKILLS)
    monkeypatch.setenv("SB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("SB_WORKSPACES_DIR", str(workspaces))
    monkeypatch.setenv("SB_SKILLS_DIRS", json.dumps([str(shared_dir)]))
    monkeypatch.setenv("SB_MODEL", "anthropic:claude-sonnet-4-5")
    monkeypatch.delenv("SKILLTEST_TOKEN", raising=False)
    monkeypatch.delenv("SB_DATABASE_URL", raising=False)
    main(["doctor"])
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "skills:" in x)
    assert line.startswith("WARN  skills: ")
    assert f"fancy (agent main): missing binary {MISSING}" in line
    assert "weather (agent main): missing env SKILLTEST_TOKEN" in line
    assert f"{workspaces}/main/skills/loose/SKILL.md: it does not start with YAML" in line
    assert "notes" not in line  # its requirements are met
    monkeypatch.setenv("SKILLTEST_TOKEN", "set")
    (workspaces / "main" / "skills" / "fancy" / "SKILL.md").unlink()
    (workspaces / "main" / "skills" / "loose" / "SKILL.md").unlink()
    assert main(["doctor"]) == 0
    assert "OK    skills: 2 skill(s), every requirement met" in capsys.readouterr().out
