"""What an idle one-process stack has imported (issue 25: the footprint).

The SDKs a service needs only for some requests (the model providers' SDKs, MCP, A2A, the chat
platforms', the Qdrant client, the embedding model's runtime) are imported on first use, not at
start: each costs megabytes and tenths of a second that a laptop's idle assistant need not pay.
The launcher runs with CPython's own ``PYTHONPROFILEIMPORTTIME``, which writes every import to
stderr, so the test reads what the running process really imported, then asks for one turn and
sees the model's SDK arrive with it (the laziness is real: the turn still works).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.fakes.llm import FakeLLM, tool_then_text
from tests.support.stack import Stack, start_stack, stop_stack

# Top-level packages a stack without channels, MCP servers, A2A peers or memory searches does
# not need until a request asks for them (and what asks: see each service's lazy import).
LAZY = {
    "openai": "the agent's model client (first model call)",
    "anthropic": "the agent's model client (first model call)",
    "mcp": "the gateway's /mcp and the executor's MCP servers",
    "mcp_types": "the gateway's /mcp and the executor's MCP servers",
    "a2a": "the gateway's A2A routes and the a2a_delegate tool",
    "slack_sdk": "the Slack channel (when configured)",
    "qdrant_client": "the memory service's client engine or Qdrant server",
    "numpy": "the memory service's local embedding model (first embedding)",
    "tokenizers": "the memory service's local embedding model (first embedding)",
    "yaml": "the agent's skills (the first SKILL.md read, in a turn): switchboard.skills",
    "jsonschema": "argument validation: the executor's registry at a tool's first call",
}


def imported(stack: Stack) -> set[str]:
    """The top-level packages in the launcher's ``-X importtime`` lines so far."""
    names = set()
    for line in list(stack.output):
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name and not name.startswith("package"):  # the header line
                names.add(name.split(".")[0])
    return names


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="sb-imports-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_an_idle_stack_imports_no_optional_sdk_and_a_turn_brings_the_model_client(
    short_tmp: Path,
) -> None:
    with FakeLLM(tool_then_text()) as llm:
        env = {
            "OPENAI_API_KEY": "sk-test",
            "OPENAI_BASE_URL": llm.openai_base_url,
            "PYTHONPROFILEIMPORTTIME": "1",
        }
        stack = start_stack(short_tmp / "home", env, timeout=120)
        try:
            at_ready = imported(stack)
            # The check reads real import lines: the services' own packages are there.
            assert {"switchboard_gateway", "switchboard_agent", "nats", "grpc"} <= at_ready
            early = {name: why for name, why in LAZY.items() if name in at_ready}
            assert not early, f"imported before any request asked for them: {early}"

            r = httpx.post(
                f"{stack.url}/v1/chat/completions",
                headers={"Authorization": f"Bearer {stack.token}"},
                json={
                    "model": "switchboard",
                    "user": "imports",
                    "messages": [{"role": "user", "content": "what time is it?"}],
                },
                timeout=120,
            )
            assert r.status_code == 200, r.text
            assert r.json()["choices"][0]["message"]["content"].startswith("Tool said:")
            deadline = time.monotonic() + 30  # the output is read by a thread: let it catch up
            while not {"openai", "jsonschema"} <= imported(stack) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert "openai" in imported(stack)
            # The turn's get_time call was validated, by jsonschema imported then.
            assert "jsonschema" in imported(stack)
        finally:
            left = stop_stack(stack)
        assert left == []
