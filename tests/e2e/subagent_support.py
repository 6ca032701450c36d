"""What the sub-agent e2e modules share (tests/e2e/test_subagent*.py): a `switchboard up` stack
against a fake OpenAI-compatible model, a question and its answer, and the model calls one text
caused. Each module runs its own fake model (module scope) with its own script."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

from tests.e2e.helpers import client, history, next_reply
from tests.fakes.llm import FakeLLM, FakeRequest
from tests.support.stack import Stack, start_stack, stop_stack


def run_stack(home: Path, llm: FakeLLM, env: Mapping[str, str]) -> Iterator[Stack]:
    """A stack in ``home`` whose model is ``llm``, with ``env`` added; no process left after."""
    full = {
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_BASE_URL": llm.openai_base_url,
        "SB_MEMORY_SYNC": "false",  # no turn indexing: not what these tests are about
        **env,
    }
    stack = start_stack(home, full, timeout=120)
    yield stack
    left = stop_stack(stack)
    assert not left, f"processes left behind: {left}\n{stack.log()}"


def ask(stack: Stack, key: str, text: str, timeout: float = 90) -> str:
    """Post ``text`` to session ``key``; the answer it got."""
    with client(stack.url, stack.token) as c:
        before = len(history(c, key))
        r = c.post(f"/api/sessions/{key}/messages", json={"text": text})
        assert r.status_code == 202, r.text
        return next_reply(c, key, before, timeout=timeout)


def calls_for(llm: FakeLLM, text: str) -> list[FakeRequest]:
    """The model calls whose newest user message is ``text``."""
    return [c.request for c in llm.calls if c.request.last_user_text == text]


def tool_results(req: FakeRequest) -> list[str]:
    """Every tool result of the request so far (OpenAI "tool" messages), in order."""
    return [str(m.get("content")) for m in req.messages if m.get("role") == "tool"]
