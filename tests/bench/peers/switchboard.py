"""Switchboard as a peer: `switchboard up` (one process, the default) on a fresh home, its
OpenAI-compatible API at ``/v1/chat/completions``, the fake model calling ``get_time``.

It gets the same proxy trap as nanobot (tests/bench/peers/trap.py): both peers run under the
same rule, and an attempt of ours to reach the internet would show in the report too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.bench import procs
from tests.bench.peers.drive import Endpoint
from tests.bench.peers.measure import Running
from tests.bench.peers.trap import ProxyTrap

# get_time's result reads "2026-11-28T06:30:00+00:00 (Saturday, UTC)": the tool ran.
EXPECT = ", UTC)"


def _body(session: str, text: str) -> dict[str, Any]:
    """The gateway keys the session on ``user`` (agent main, channel openai)."""
    return {
        "model": "switchboard",
        "user": session,
        "messages": [{"role": "user", "content": text}],
    }


class Switchboard:
    name = "switchboard"

    def __init__(self, fake: procs.FakeModel) -> None:
        self.fake = fake
        self.trap = ProxyTrap()

    @classmethod
    def start_model(cls) -> procs.FakeModel:
        """tool_then_text with its default tool, get_time {"timezone": "UTC"}."""
        return procs.start_fake_model("tool_then_text")

    def launch(self, home: Path) -> Running:
        """Returns once the launcher prints "Switchboard ready" (procs.launch_stack)."""
        stack = procs.launch_stack(home, self.fake, extra_env=self.trap.env())
        headers = {"Authorization": f"Bearer {stack.token}"}
        return Running(stack, Endpoint(stack.url, headers, _body, EXPECT), stack.ready_s)

    def stop(self, running: Running) -> list[int]:
        return procs.shutdown_stack(running.stack)

    def outbound(self) -> list[str]:
        return self.trap.seen()

    def close(self) -> None:
        self.trap.close()
