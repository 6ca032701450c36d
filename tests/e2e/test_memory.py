"""Memory end to end: `switchboard up --processes` with no memory setting (embedded mode's
keyword-only memory, Qdrant Edge under $SB_HOME), a fake model that calls the memory tools as a
real one would, and the tools invoked directly through `POST /tools/invoke`."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from tests.e2e.helpers import wait_for
from tests.fakes.embeddings import FakeEmbeddings
from tests.fakes.llm import FakeLLM, FakeRequest, Reply
from tests.support.stack import Stack, start_stack, stop_stack


def memory_model(req: FakeRequest) -> Reply:
    """``remember: X`` -> memory_store X; ``recall: Q`` -> memory_search Q; then it repeats
    what the tool said. Anything else: "ok"."""
    if req.last_tool_results:
        return Reply(text="Tool said: " + " ".join(req.last_tool_results))
    text = req.last_user_text
    if text.startswith("remember: "):
        return Reply(tool_calls=[("memory_store", {"text": text.removeprefix("remember: ")})])
    if text.startswith("recall: "):
        query = text.removeprefix("recall: ")
        return Reply(tool_calls=[("memory_search", {"query": query, "k": 3})])
    return Reply(text="ok")


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM(memory_model) as fake:
        yield fake


def model_env(llm: FakeLLM) -> dict[str, str]:
    return {"OPENAI_API_KEY": "sk-test-fake", "OPENAI_BASE_URL": f"{llm.base_url}/v1"}


def chat(stack: Stack, session: str, text: str) -> str:
    response = httpx.post(
        f"{stack.url}/v1/chat/completions",
        headers={"Authorization": f"Bearer {stack.token}", "X-Switchboard-Session": session},
        json={"model": "switchboard", "messages": [{"role": "user", "content": text}]},
        timeout=120,
    )
    assert response.status_code == 200, response.text
    content: str = response.json()["choices"][0]["message"]["content"]
    return content


def invoke(stack: Stack, tool: str, args: dict[str, Any], session_key: str) -> dict[str, Any]:
    response = httpx.post(
        f"{stack.url}/tools/invoke",
        headers={"Authorization": f"Bearer {stack.token}"},
        json={"tool": tool, "args": args, "sessionKey": session_key},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    body["text"] = body["content"][0]["text"]
    return body


def service_pid(stack: Stack, service: str) -> int:
    """The pid of ``service``'s process under `up --processes` (its command line names it)."""
    for child in psutil.Process(stack.proc.pid).children(recursive=True):
        try:
            if f"switchboard_{service}" in " ".join(child.cmdline()):
                return child.pid
        except psutil.Error:
            continue
    raise AssertionError(f"no {service} process")


def test_remember_and_recall_across_sessions_scopes_and_a_restart(
    tmp_path: Path, llm: FakeLLM
) -> None:
    stack = start_stack(tmp_path / "home", model_env(llm), timeout=120, args=["--processes"])
    try:
        # The model stores a fact in one session...
        said = chat(stack, "alice", "remember: My sister Inez lives in Lisbon and keeps bees.")
        assert said == "Tool said: Stored.", said
        # ...and finds it in a new session of the same agent.
        said = chat(stack, "alice-later", "recall: where does my sister live")
        assert "Lisbon" in said and "note" in said, said

        # The tools through /tools/invoke (the API's contract).
        stored = invoke(stack, "memory_store", {"text": "Gate code 7319"}, "main:api:carol")
        assert stored["ok"] and stored["text"] == "Stored.", stored
        found = invoke(stack, "memory_search", {"query": "gate code", "k": 5}, "main:api:dave")
        assert found["ok"] and "7319" in found["text"], found
        # Embedded mode's default: keywords by choice, not a degraded search.
        assert found["details"] == {"hits": 1, "mode": "keyword"}, found

        # Not visible to another agent, nor to a group chat of the same agent.
        other = invoke(stack, "memory_search", {"query": "gate code Lisbon"}, "other:api:x")
        assert other["ok"] and other["text"] == "No memories yet.", other
        group = invoke(
            stack, "memory_search", {"query": "gate code Lisbon"}, "main:telegram:group:G1"
        )
        assert "7319" not in group["text"] and "Lisbon" not in group["text"], group

        # Every finished turn is indexed, in the background, with what the user said.
        chat(stack, "erin", "The secret word for the party is pomegranate.")

        def turn_indexed() -> bool:
            hits = invoke(stack, "memory_search", {"query": "secret word party"}, "main:api:f")
            return "pomegranate" in hits["text"] and "session" in hits["text"]

        wait_for(turn_indexed, timeout=60, what="the turn in memory")

        # A SIGKILLed memory service is restarted and has lost nothing.
        os.kill(service_pid(stack, "memory"), signal.SIGKILL)

        def recalled_after_restart() -> bool:
            hits = invoke(stack, "memory_search", {"query": "gate code"}, "main:api:g")
            return "7319" in hits["text"]

        wait_for(recalled_after_restart, timeout=90, what="memory back after a SIGKILL")
    finally:
        stop_stack(stack)


def test_embedding_provider_down_degrades_but_the_turn_completes(
    tmp_path: Path, llm: FakeLLM
) -> None:
    with FakeEmbeddings(dimension=32, require_key="emb-key") as embeddings:
        embeddings.down = True
        env = {
            **model_env(llm),
            "SB_EMBEDDING_PROVIDER": "openai",
            "SB_EMBEDDING_BASE_URL": embeddings.base_url,
            "SB_EMBEDDING_API_KEY": "emb-key",
            "SB_EMBEDDING_DIMENSION": "32",
        }
        stack = start_stack(tmp_path / "home", env, timeout=120)
        try:
            said = chat(stack, "bob", "remember: The boat is called Marigold.")
            assert said.startswith("Tool said: Stored (searchable by keywords"), said
            said = chat(stack, "bob-2", "recall: boat called")
            assert "Marigold" in said and "keyword search only" in said, said
            assert "503" in said  # why: the provider's answer
            embeddings.down = False

            def all_three() -> dict[str, Any] | None:
                """The note and both turns (indexed once the chat has been quiet for a moment)."""
                found = invoke(stack, "memory_search", {"query": "boat called"}, "main:api:x")
                return found if found["details"]["hits"] == 3 else None

            found = wait_for(all_three, timeout=60, what="the note and both turns in memory")
            # The whole search again (earlier turns quote the degraded answers: look at details).
            assert "Marigold" in found["text"], found
            assert found["details"] == {"hits": 3, "mode": "hybrid"}, found
        finally:
            stop_stack(stack)
