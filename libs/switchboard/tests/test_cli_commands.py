"""The ``switchboard`` command imports only the module of the command being run, and the table
that says which module registers which command is right (a wrong entry would hide a command)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from switchboard.cli.main import COMMANDS, build_parser, chosen

# What the other commands import and `switchboard up` should not wait for.
NOT_FOR_UP = {"websockets", "rich", "click", "pygments", "yaml"}


def _commands(parser: object) -> set[str]:
    actions = getattr(parser, "_subparsers")._group_actions  # noqa: B009 (argparse internals)
    return set(actions[0].choices)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_command_is_registered_by_its_module(name: str) -> None:
    assert _commands(build_parser(only=name)) == {name, "version"}


def test_help_and_unknown_commands_see_every_command() -> None:
    assert _commands(build_parser()) == {*COMMANDS, "version"}
    assert chosen([]) is None and chosen(["--help"]) is None and chosen(["bogus"]) is None
    assert chosen(["up", "--processes"]) == "up"


def test_up_does_not_import_the_other_commands_libraries() -> None:
    code = (
        "import sys\n"
        "from switchboard.cli.main import build_parser, chosen\n"
        "build_parser(chosen(['up']))\n"
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    loaded = set(
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
        ).stdout.split()
    )
    assert "switchboard" in loaded
    assert not loaded & NOT_FOR_UP, loaded & NOT_FOR_UP
    # ...while the full parser (help) does load them: the check above can fail.
    full = code.replace("chosen(['up'])", "")
    loaded = set(
        subprocess.run(
            [sys.executable, "-c", full], capture_output=True, text=True, check=True, timeout=120
        ).stdout.split()
    )
    assert loaded & NOT_FOR_UP
