"""Approval rules: parsing, rendering and matching tool calls with their arguments."""

from __future__ import annotations

from typing import Any

import pytest

from switchboard_agent.approvals.rules import ApprovalRule, ApprovalRules
from switchboard_agent.tools.policy import PolicyError

from .tool_groups import EXPECTED_GROUPS


@pytest.mark.parametrize(
    ("text", "tool", "args"),
    [
        ("exec", "exec", ()),
        ("group:runtime", "group:runtime", ()),
        ("srv__*", "srv__*", ()),
        ("exec:command=rm *", "exec", (("command", "rm *"),)),
        ("write:path=*.sh", "write", (("path", "*.sh"),)),
        ("group:fs:path=/etc/*", "group:fs", (("path", "/etc/*"),)),
        ("web_fetch:url=https://*", "web_fetch", (("url", "https://*"),)),
        ("exec:command=a,b", "exec", (("command", "a,b"),)),
        (
            "exec:command=git push*,cwd=/srv/*",
            "exec",
            (("command", "git push*"), ("cwd", "/srv/*")),
        ),
        ("exec:command=", "exec", (("command", ""),)),
        ("exec:command=x=y", "exec", (("command", "x=y"),)),
        ("  exec  ", "exec", ()),
    ],
)
def test_parse(text: str, tool: str, args: tuple[tuple[str, str], ...]) -> None:
    rule = ApprovalRule.parse(text)
    assert (rule.tool, rule.args) == (tool, args)
    assert ApprovalRule.parse(str(rule)) == rule


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (3, "expected a string, got int"),
        ("", "is not a tool name"),
        (":command=x", "is not a tool name"),
        ("exec:", "has ':' but no ARG=PATTERN"),
        ("exec:command", "'command' in 'exec:command' is not ARG=PATTERN"),
        ("exec:=x", "argument name '' must be"),
        ("exec:com mand=x", "argument name 'com mand' must be"),
        ("exec:a=1,a=2", "argument 'a' is given twice"),
        ("group:nope", "unknown group 'group:nope'"),
        ("group:nope:command=x", "unknown group 'group:nope'"),
        ("ex ec", "is not a tool name"),
    ],
)
def test_parse_errors(raw: Any, message: str) -> None:
    with pytest.raises(PolicyError) as err:
        ApprovalRule.parse(raw)
    assert message in str(err.value)


RULES = ApprovalRules.of(
    [
        "exec:command=rm *",
        "write:path=*.sh",
        "group:web:url=http://*",
        "srv__delete_*",
        "process:pid=1",
        "edit:dry_run=false",
        "exec:command=git push*,cwd=/srv/*",
    ]
)


@pytest.mark.parametrize(
    ("tool", "args", "rule"),
    [
        ("exec", {"command": "rm -rf /"}, "exec:command=rm *"),
        ("exec", {"command": "rm "}, "exec:command=rm *"),
        ("exec", {"command": "sudo rm -rf /"}, "exec:command=rm *"),  # the program run is rm
        ("exec", {"command": "echo rm -rf /"}, None),  # rm is an argument here, not a program
        ("exec", {"command": "RM -rf /"}, None),  # case-sensitive
        ("exec", {"command": "ls"}, None),
        ("exec", {}, None),  # missing argument
        ("exec", None, None),
        ("exec", {"command": ["rm", "-rf"]}, None),  # nested values never match
        ("exec", {"command": {"argv": "rm x"}}, None),
        ("exec", {"command": None}, None),
        ("write", {"path": "run.sh", "content": "x"}, "write:path=*.sh"),
        ("write", {"path": "run.py"}, None),
        ("read", {"path": "run.sh"}, None),  # other tool
        ("web_fetch", {"url": "http://example.com"}, "group:web:url=http://*"),
        ("web_search", {"url": "http://x"}, "group:web:url=http://*"),
        ("web_fetch", {"url": "https://example.com"}, None),
        ("srv__delete_repo", {}, "srv__delete_*"),
        ("srv__list_repos", {}, None),
        ("process", {"pid": 1}, "process:pid=1"),  # numbers as JSON text
        ("process", {"pid": "1"}, "process:pid=1"),
        ("process", {"pid": 12}, None),
        ("edit", {"dry_run": False}, "edit:dry_run=false"),  # booleans as JSON text
        ("edit", {"dry_run": True}, None),
        (
            "exec",
            {"command": "git push origin", "cwd": "/srv/app"},
            "exec:command=git push*,cwd=/srv/*",
        ),
        ("exec", {"command": "git push origin", "cwd": "/home/x"}, None),  # every arg must match
        ("exec", {"command": "git push origin"}, None),
    ],
)
def test_requires_approval(tool: str, args: Any, rule: str | None) -> None:
    found = RULES.requires_approval(tool, args, EXPECTED_GROUPS)
    assert (str(found) if found else None) == rule


def test_first_matching_rule_wins_and_bare_tool_matches_any_args() -> None:
    rules = ApprovalRules.of(["exec:command=rm *", "group:runtime"])
    assert (
        str(rules.requires_approval("exec", {"command": "rm x"}, EXPECTED_GROUPS))
        == "exec:command=rm *"
    )
    assert (
        str(rules.requires_approval("exec", {"command": "ls"}, EXPECTED_GROUPS)) == "group:runtime"
    )
    assert str(rules.requires_approval("process", None, EXPECTED_GROUPS)) == "group:runtime"
    assert rules.requires_approval("read", {}, EXPECTED_GROUPS) is None
    assert ApprovalRules().requires_approval("exec", {}, EXPECTED_GROUPS) is None


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("exec", "approval: expected a list of rule strings, got str"),
        ({"exec": 1}, "approval: expected a list of rule strings, got dict"),
        (["exec", 1], "approval[1]: expected a string, got int"),
        (["exec", "exec:"], "approval[1]: 'exec:' has ':'"),
    ],
)
def test_rules_parse_errors(raw: Any, message: str) -> None:
    with pytest.raises(PolicyError) as err:
        ApprovalRules.parse(raw)
    assert message in str(err.value)


def test_rules_parse_none_and_programmatic_rules() -> None:
    assert ApprovalRules.parse(None) == ApprovalRules()
    rule = ApprovalRule("exec", (("command", "a,b=c"),))  # built directly: no comma ambiguity
    assert rule.matches("exec", {"command": "a,b=c"}, EXPECTED_GROUPS)
    with pytest.raises(PolicyError, match="given twice"):
        ApprovalRule("exec", (("a", "1"), ("a", "2")))
