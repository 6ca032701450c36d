"""A2A both ways against the real services (one system for the module, a scripted fake model),
with a2a-sdk's own client and server.

Server: the gateway's agent card is public at the well-known path and names bearer auth; its
JSON-RPC endpoint wants the token; ``message/send`` completes with the answer as an artifact and
one context is one session (the second message sees the first); ``message/stream`` yields the
task's states and the answer; ``tasks/get`` finds the task and not an unknown one; bad params
are JSON-RPC errors; ``tasks/cancel`` aborts the run.

Client: the agent's ``a2a_delegate`` tool reaches an a2a-sdk server (tests/fakes/a2a_peer.py)
configured in SB_A2A_AGENTS; a peer answering garbage is a tool error and the run goes on."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager

import httpx
import psutil
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, create_client
from a2a.client.errors import A2AClientError
from a2a.helpers import get_artifact_text
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError

from tests.fakes.a2a_peer import EchoPeer
from tests.fakes.llm import FakeRequest, Reply
from tests.fakes.web import Reply as WebReply
from tests.fakes.web import WebServer
from tests.support.services import ServiceProcesses, fresh_model, with_fake_model

DELEGATE = "delegate "


def script(req: FakeRequest) -> Reply:
    """``delegate <agent> <text>`` calls a2a_delegate, then reports the tool's result; ``slow``
    sleeps in a tool call; anything else is answered with the number of user messages the
    model saw (the session's history) and the text."""
    text = req.last_user_text.splitlines()[-1]
    if req.last_tool_results:
        return Reply(text="peer said: " + " ".join(req.last_tool_results))
    if text.startswith(DELEGATE):
        agent, _, message = text.removeprefix(DELEGATE).partition(" ")
        return Reply(tool_calls=[("a2a_delegate", {"agent": agent, "message": message})])
    if text == "slow":
        return Reply(tool_calls=[("exec", {"command": "sleep 30"})])
    users = sum(1 for m in req.messages if m.get("role") == "user")
    return Reply(text=f"answer {users}: {text}")


@pytest.fixture(scope="module")
def peers() -> Iterator[tuple[EchoPeer, WebServer]]:
    junk = WebServer().start()
    junk.route(AGENT_CARD_WELL_KNOWN_PATH, WebReply(body="<html>garbage</html>"))
    try:
        with EchoPeer() as echo:
            yield echo, junk
    finally:
        junk._server.shutdown()


@pytest.fixture(scope="module")
def system(
    tmp_path_factory: pytest.TempPathFactory,
    module_nats_url: str,
    module_database_url: str,
    peers: tuple[EchoPeer, WebServer],
) -> Iterator[ServiceProcesses]:
    echo, junk = peers
    agents = {"echo": {"url": echo.url, "token": "peer-token-42"}, "junk": {"url": junk.url("")}}
    env = {"SB_A2A_AGENTS": json.dumps(agents), "SB_EXEC_ALLOWLIST": '["sleep"]'}
    home = tmp_path_factory.mktemp("a2a")
    with with_fake_model(home, module_nats_url, module_database_url, script, env) as procs:
        yield procs


@pytest.fixture
def services(system: ServiceProcesses) -> ServiceProcesses:
    fresh_model(system)
    return system


@asynccontextmanager
async def a2a(services: ServiceProcesses, *, streaming: bool = False) -> AsyncIterator[Client]:
    """a2a-sdk's client for the gateway, resolving its card, with the gateway token."""
    headers = {"Authorization": f"Bearer {services.token}"}
    async with httpx.AsyncClient(headers=headers, timeout=60) as http:
        config = ClientConfig(httpx_client=http, streaming=streaming)
        client = await create_client(services.url, client_config=config)
        yield client


def message(text: str, context_id: str = "") -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(
            role=Role.ROLE_USER,
            message_id=uuid.uuid4().hex,
            context_id=context_id,
            parts=[Part(text=text)],
        )
    )


async def send(client: Client, request: SendMessageRequest) -> Task:
    responses = [r async for r in client.send_message(request)]
    assert len(responses) == 1 and responses[0].HasField("task"), responses
    return responses[0].task


def answer(task: Task) -> str:
    return "".join(get_artifact_text(a) for a in task.artifacts)


def history(services: ServiceProcesses, key: str) -> list[dict]:
    headers = {"Authorization": f"Bearer {services.token}"}
    reply = httpx.get(f"{services.url}/api/sessions/{key}/history", headers=headers, timeout=10)
    return list(reply.json()["messages"])


def wait_for(predicate: Callable[[], object], timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


async def test_the_card_is_public_and_the_endpoint_wants_the_token(
    services: ServiceProcesses,
) -> None:
    async with httpx.AsyncClient(timeout=30) as http:  # no token
        card = await A2ACardResolver(http, services.url).get_agent_card()
        rpc = card.supported_interfaces[0].url
        assert rpc == f"{services.url}/a2a"
        bearer = card.security_schemes["bearer"].http_auth_security_scheme
        assert bearer.scheme == "Bearer"
        assert list(card.security_requirements[0].schemes) == ["bearer"]
        assert card.capabilities.streaming
        body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
        refused = await http.post(rpc, json=body)
        assert refused.status_code == 401, refused.text
        client = await create_client(card, client_config=ClientConfig(httpx_client=http))
        with pytest.raises(A2AClientError, match="401"):
            await client.get_task(GetTaskRequest(id="x"))


async def test_a_context_is_one_session(services: ServiceProcesses) -> None:
    context = f"ctx-{uuid.uuid4().hex[:8]}"
    async with a2a(services) as client:
        first = await send(client, message("hello", context))
        assert first.status.state == TaskState.TASK_STATE_COMPLETED, first
        assert first.context_id == context
        assert answer(first) == "answer 1: hello"
        second = await send(client, message("again", context))
        assert answer(second) == "answer 2: again"  # the model saw the first exchange
        got = await client.get_task(GetTaskRequest(id=first.id))
        assert got.status.state == TaskState.TASK_STATE_COMPLETED
        assert answer(got) == "answer 1: hello"
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id="no-such-task"))
    texts = [b.get("text") for m in history(services, f"main:a2a:{context}") for b in m["content"]]
    assert texts == ["hello", "answer 1: hello", "again", "answer 2: again"]


async def test_a_v0_3_client_uses_message_send(services: ServiceProcesses) -> None:
    """The SDK's v0.3 transport (``message/send``, ``tasks/get``) on the same endpoint."""
    headers = {"Authorization": f"Bearer {services.token}"}
    async with httpx.AsyncClient(headers=headers, timeout=60) as http:
        card = await A2ACardResolver(http, services.url).get_agent_card()
        card.supported_interfaces[0].protocol_version = "0.3"
        config = ClientConfig(httpx_client=http, streaming=False)
        client = await create_client(card, client_config=config)
        assert type(client._transport).__name__ == "CompatJsonRpcTransport"  # type: ignore[attr-defined]
        task = await send(client, message("old style"))
        assert answer(task) == "answer 1: old style"
        got = await client.get_task(GetTaskRequest(id=task.id))
        assert got.status.state == TaskState.TASK_STATE_COMPLETED


async def test_streaming_yields_states_and_the_answer(services: ServiceProcesses) -> None:
    async with a2a(services, streaming=True) as client:
        events: list[StreamResponse] = [e async for e in client.send_message(message("stream"))]
    states = [e.status_update.status.state for e in events if e.HasField("status_update")]
    assert states[0] == TaskState.TASK_STATE_WORKING and states[-1] == (
        TaskState.TASK_STATE_COMPLETED
    ), events
    chunks = [e.artifact_update for e in events if e.HasField("artifact_update")]
    assert len(chunks) >= 2, chunks  # the deltas, then the full answer
    assert get_artifact_text(chunks[-1].artifact) == "answer 1: stream"
    assert chunks[-1].last_chunk and not chunks[-1].append


async def test_a_failed_run_fails_the_task_with_a_reason(services: ServiceProcesses) -> None:
    services.llm.fail_next(400, message="bad request")  # type: ignore[attr-defined]
    async with a2a(services) as client:
        task = await send(client, message("doomed"))
        after = await send(client, message("still here"))  # nothing rests: the next one runs
    assert answer(after) == "answer 1: still here"
    assert task.status.state == TaskState.TASK_STATE_FAILED, task
    reason = "".join(p.text for p in task.status.message.parts)
    assert "model call failed" in reason, reason


async def test_invalid_params_are_errors(services: ServiceProcesses) -> None:
    async with a2a(services) as client:
        with pytest.raises(InvalidParamsError, match="contextId"):
            await send(client, message("hi", "has spaces in it"))
        with pytest.raises(InvalidParamsError, match="text"):
            await send(client, message("   "))
        with pytest.raises(InvalidParamsError, match="SB_MAX_BODY_CHARS"):
            await send(client, message("x" * 200_001))  # the gateway's default limit


def sleeps(services: ServiceProcesses) -> list[psutil.Process]:
    found = []
    for p in psutil.Process(services.procs["tools"].pid).children(recursive=True):
        try:
            if p.cmdline()[-2:] == ["sleep", "30"]:
                found.append(p)
        except psutil.NoSuchProcess:
            continue
    return found


async def test_cancel_aborts_the_run(services: ServiceProcesses) -> None:
    request = message("slow")
    request.configuration.return_immediately = True
    async with a2a(services) as client:
        task = await send(client, request)
        assert task.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
        assert wait_for(lambda: bool(sleeps(services))), "the slow tool call never started"
        canceled = await client.cancel_task(CancelTaskRequest(id=task.id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        # Below the sleep's 30 s: only the abort ends it this soon.
        assert wait_for(lambda: not sleeps(services), timeout=25), "the run was not aborted"
        got = await client.get_task(GetTaskRequest(id=task.id))
        assert got.status.state == TaskState.TASK_STATE_CANCELED


async def test_the_agent_delegates_to_a_remote_agent(
    services: ServiceProcesses, peers: tuple[EchoPeer, WebServer]
) -> None:
    echo, _ = peers
    async with a2a(services) as client:
        done = await send(client, message(f"{DELEGATE}echo what is up"))
        assert done.status.state == TaskState.TASK_STATE_COMPLETED, done
        assert "echo: what is up" in answer(done)
        assert echo.received[-1].authorization == "Bearer peer-token-42"
        junk = await send(client, message(f"{DELEGATE}junk hello"))
    # The garbage peer is a tool error the model reads; the run still completes.
    assert junk.status.state == TaskState.TASK_STATE_COMPLETED, junk
    assert "agent 'junk': its agent card could not be read" in answer(junk), answer(junk)
