"""The configuration file in the Compose smoke run (docs/compose.md, docs/config-file.md "In
containers"): the run writes ``switchboard.toml`` into a directory of its own, which compose
bind-mounts read-only at /etc/switchboard in every service (``SB_CONFIG_DIR``), and proves in
the running containers that

1. the stack started with it: the agent sends the model the file names (the fake model's reply
   names the model of the request it answers: tests/compose/fake_model.py);
2. an edit applies without a restart: written atomically (a temporary file renamed over it, as
   editors save), then rewritten in place; every container that applies it logs
   "configuration file changed: applying ...", and the next message is answered by the new model;
3. a refused edit (``dm_policy = "opne"``) is logged with its line by the containers, changes
   nothing (the model it also names is not taken), and the next message is answered;
4. an edit of a setting read only at start is logged as "needs a restart of <service>".
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from calendar import timegm
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from . import checks
from .stack import Stack

MOUNTED = "/etc/switchboard/switchboard.toml"  # where the services read it (SB_CONFIG_FILE)
FILE_NAME = "switchboard.toml"
WAIT_S = 60.0  # the watcher looks every second; the check takes a fraction of one
# The model's provider: the agent reaches the fake model as an OpenAI-compatible server.
PROVIDER = "openai"


@dataclass(frozen=True)
class Values:
    """What the smoke run's file says (no secret: the file is 0644, read by uid 10001)."""

    model: str = "smoke-model-a"  # reloads: the agent's next run
    dm_policy: str = "pairing"  # reloads: the router's next message
    max_iterations: int = 8  # read at start only: a change needs a restart of the agent


def document(values: Values) -> str:
    return "\n".join(
        [
            "# The Compose smoke run's configuration file (tests/compose/configrun.py).",
            "# Read by every service at /etc/switchboard/switchboard.toml; no secrets in it.",
            "",
            "[agent]",
            f'model = "{PROVIDER}:{values.model}"',
            f"max_iterations = {values.max_iterations}",
            "",
            "[router]",
            f'dm_policy = "{values.dm_policy}"',
            "",
        ]
    )


def line_of(text: str, key: str) -> int:
    """The (1-based) line that sets ``key``."""
    for number, line in enumerate(text.splitlines(), start=1):
        if line.split("=")[0].strip() == key:
            return number
    raise ValueError(f"no line sets {key}")


class ConfigDir:
    """The directory compose mounts (``SB_CONFIG_DIR``), with the file in it, both readable
    by the containers' uid 10001 (0755, 0644)."""

    def __init__(self, parent: Path, values: Values) -> None:
        self.path = parent / "config"
        self.path.mkdir()
        self.path.chmod(0o755)
        self.file = self.path / FILE_NAME
        self.values = values
        self.write(values, in_place=False)

    def write(self, values: Values, *, in_place: bool) -> tuple[str, float]:
        """Write the file for ``values``: atomically (a temporary file in the directory, then
        renamed over the file: a new inode, as editors save) or in place (truncated and
        rewritten: the same inode). The text and the time (epoch seconds) it was in place."""
        text = document(values)
        if in_place:
            with self.file.open("w") as out:
                out.write(text)
        else:
            temporary = self.path / f".{FILE_NAME}.tmp"
            temporary.write_text(text)
            temporary.chmod(0o644)
            os.replace(temporary, self.file)
        self.values = values
        return text, time.time()


def log_time(line: dict[str, object]) -> float:
    """A JSON log line's ``ts`` (UTC, milliseconds: switchboard.logs) in epoch seconds."""
    stamp = str(line["ts"])
    whole, _, fraction = stamp.rstrip("Z").partition(".")
    return timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S")) + float(f"0.{fraction or 0}")


def logged_since(stack: Stack, container: str, needle: str, since: float) -> float | None:
    """When ``container`` first logged a line containing ``needle`` at or after ``since``."""
    floor = int(since * 1000) / 1000  # the log's times have milliseconds, rounded down
    for line in checks.json_lines(stack.container_logs(container)):
        if needle in str(line.get("msg", "")) and log_time(line) >= floor:
            return log_time(line)
    return None


def wait_logged(
    stack: Stack, services: Iterable[str], needle: str, since: float
) -> dict[str, float]:
    """Every container of ``services`` logs ``needle`` after ``since``: the seconds after it
    each did."""
    containers = [c.name for s in services for c in stack.of(s)]
    if not containers:
        raise checks.CheckFailed(f"no container of {list(services)}")
    seen: dict[str, float] = {}
    deadline = time.monotonic() + WAIT_S
    while True:
        for name in containers:
            if name not in seen:
                at = logged_since(stack, name, needle, since)
                if at is not None:
                    seen[name] = round(at - since, 2)
        if len(seen) == len(containers):
            return seen
        if time.monotonic() > deadline:
            missing = sorted(set(containers) - set(seen))
            tails = {name: stack.container_logs(name)[-5:] for name in missing}
            raise checks.CheckFailed(
                f"{needle!r} not logged within {WAIT_S:.0f} s by {missing}: "
                + json.dumps(tails)[-3000:]
            )
        time.sleep(0.5)


Send = Callable[[str], str]  # one message (the user's name): the model its reply names


class ConfigRun:
    """The edits of steps 2-4, each a step of its own; ``send`` sends one message."""

    def __init__(self, stack: Stack, config: ConfigDir, send: Send) -> None:
        self.stack = stack
        self.config = config
        self.send = send
        self.messages = 0

    def answered_by(self, model: str) -> None:
        self.messages += 1
        named = self.send(f"compose-smoke-config-{self.messages}")
        if named != model:
            raise checks.CheckFailed(f"the reply names model {named!r}, not {model!r}")

    def edit(self, model: str, dm_policy: str | None = None, *, in_place: bool) -> str:
        """Change reloadable settings (the model, dm_policy): every agent container (and
        every router container, for dm_policy) logs that it applies them, and the next message
        is answered by the new model."""
        values = dataclasses.replace(
            self.config.values, model=model, dm_policy=dm_policy or self.config.values.dm_policy
        )
        _, written = self.config.write(values, in_place=in_place)
        seen = wait_logged(self.stack, ["agent"], "configuration file changed: applying", written)
        if dm_policy is not None:
            seen |= wait_logged(
                self.stack, ["router"], "configuration file changed: applying SB_DM_POLICY", written
            )
        self.answered_by(values.model)
        return f"applied {seconds(seen)}; the next reply named {values.model}"

    def refused(self) -> str:
        """A file with a wrong value (and a new model): refused with its line in router and
        agent, nothing changed (the reply names the running model), still answering."""
        running = self.config.values
        broken = dataclasses.replace(running, dm_policy="opne", model="smoke-model-refused")
        text, written = self.config.write(broken, in_place=False)
        self.config.values = running  # what runs: nothing changed
        problem = f"{MOUNTED}:{line_of(text, 'dm_policy')}: router.dm_policy: 'opne'"
        seen = wait_logged(
            self.stack,
            ["router", "agent"],
            f"configuration file refused, nothing changed: {problem}",
            written,
        )
        self.answered_by(running.model)
        return f"refused ({problem}...) {seconds(seen)}; the next reply named {running.model}"

    def needs_restart(self) -> str:
        """The file fixed, with max_iterations changed (read at start only): every agent
        container logs that it needs a restart."""
        values = dataclasses.replace(
            self.config.values, max_iterations=self.config.values.max_iterations + 4
        )
        _, written = self.config.write(values, in_place=False)
        needle = f"SB_MAX_ITERATIONS changed in {MOUNTED}: needs a restart of agent (not applied)"
        seen = wait_logged(self.stack, ["agent"], needle, written)
        return f"{needle!r} {seconds(seen)}"


def seconds(seen: dict[str, float]) -> str:
    return "(" + ", ".join(f"{name} after {s} s" for name, s in sorted(seen.items())) + ")"
