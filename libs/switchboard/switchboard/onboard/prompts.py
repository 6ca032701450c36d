"""Questions on the terminal: a choice among options, a line with a default, yes/no, and a
secret read without echo (getpass: the terminal never shows it, so no transcript holds it)."""

from __future__ import annotations

import getpass
import sys
from collections.abc import Callable, Sequence
from typing import TextIO


class Prompter:
    """Reads answers from ``stdin`` (a secret from the terminal, as getpass does), writes the
    questions to ``stdout``. End of input (Ctrl-D) raises EOFError: the wizard stops."""

    def __init__(
        self,
        stdin: TextIO | None = None,
        stdout: TextIO | None = None,
        secret_reader: Callable[[str], str] = getpass.getpass,
    ) -> None:
        self.stdin = stdin or sys.stdin
        self.stdout = stdout or sys.stdout
        self.secret_reader = secret_reader

    def say(self, text: str = "") -> None:
        print(text, file=self.stdout, flush=True)

    def line(self, question: str, default: str = "") -> str:
        shown = f" [{default}]" if default else ""
        self.stdout.write(f"{question}{shown}: ")
        self.stdout.flush()
        answer = self.stdin.readline()
        if not answer:
            raise EOFError
        return answer.strip() or default

    def choose(self, question: str, options: Sequence[tuple[str, str]], default: str) -> str:
        """One of ``options`` (value, label), by number or by value."""
        self.say(question)
        for number, (_, label) in enumerate(options, start=1):
            self.say(f"  {number}. {label}")
        values = [value for value, _ in options]
        while True:
            answer = self.line("Choose", str(values.index(default) + 1))
            if answer.isdigit() and 1 <= int(answer) <= len(options):
                return values[int(answer) - 1]
            if answer in values:
                return answer
            self.say(f"  Answer 1 to {len(options)}.")

    def confirm(self, question: str, default: bool) -> bool:
        while True:
            answer = self.line(f"{question} (y/n)", "y" if default else "n").lower()
            if answer in ("y", "yes", "n", "no"):
                return answer.startswith("y")
            self.say("  Answer y or n.")

    def secret(self, question: str, allow_empty: bool = False) -> str:
        """A value typed without echo; asked again while empty (unless ``allow_empty``)."""
        while True:
            value = self.secret_reader(f"{question} (not shown): ").strip()
            if value or allow_empty:
                return value
            self.say("  Nothing was typed.")
