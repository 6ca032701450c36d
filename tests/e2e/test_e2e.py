"""End to end: `switchboard up` as a process, the official openai client, a fake model that
asks for one tool call, and a trace collected over OTLP."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.e2e.helpers import json_lines, wait_for
from tests.fakes.llm import FakeLLM, tool_then_text
from tests.support.otlp import OtlpReceiver
from tests.support.stack import Stack, start_stack, stop_stack


@pytest.fixture(scope="module")
def otlp() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as receiver:
        yield receiver


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    with FakeLLM(tool_then_text("get_time", {"timezone": "UTC"})) as fake:
        yield fake


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, llm: FakeLLM, otlp: OtlpReceiver
) -> Iterator[Stack]:
    env = {
        "OPENAI_API_KEY": "sk-test-fake",
        "OPENAI_BASE_URL": f"{llm.base_url}/v1",
        "OTEL_EXPORTER_OTLP_ENDPOINT": otlp.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }
    stack = start_stack(tmp_path_factory.mktemp("sbhome"), env)
    yield stack
    left = stop_stack(stack)
    assert not left, f"processes left behind: {left}\n{stack.log()}"


@pytest.fixture
def client(stack: Stack) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{stack.url}/v1", api_key=stack.token, max_retries=0)


def auth(stack: Stack) -> dict[str, str]:
    return {"Authorization": f"Bearer {stack.token}"}


def test_chat_through_one_tool_call(stack: Stack, client: openai.OpenAI, llm: FakeLLM) -> None:
    before = len(llm.calls)
    reply = client.chat.completions.create(
        model="switchboard",
        messages=[{"role": "user", "content": "What time is it in UTC?"}],
        user="alice",
    )
    text = reply.choices[0].message.content or ""
    assert text.startswith("Tool said: ")
    assert time.strftime("%Y", time.gmtime()) in text  # the real get_time output came back
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage is not None and reply.usage.total_tokens > 0
    calls = llm.calls[before:]
    assert len(calls) == 2
    assert calls[0].request.last_tool_results == []
    assert "get_time" in calls[0].request.tools
    assert calls[1].request.last_tool_results and "UTC" in calls[1].request.last_tool_results[0]


def test_a_turns_model_calls_are_counted_in_usage(
    stack: Stack, client: openai.OpenAI, llm: FakeLLM
) -> None:
    """The run's usage rows are held and written by its commit (runs/commit.py): both model
    calls of a turn reach ``GET /api/usage`` for its session, with the tokens the reply
    reported."""
    peer = f"usage-{os.urandom(4).hex()}"
    reply = client.chat.completions.create(
        model="switchboard", messages=[{"role": "user", "content": "Time?"}], user=peer
    )
    assert reply.usage is not None and reply.usage.total_tokens > 0
    query = {"session": f"main:openai:{peer}"}

    def counted() -> dict[str, Any] | None:
        r = httpx.get(f"{stack.url}/api/usage", params=query, headers=auth(stack), timeout=10)
        r.raise_for_status()
        total: dict[str, Any] = r.json()["total"]
        return total if total["calls"] >= 2 else None

    total = wait_for(counted, timeout=30, what="the turn's two usage rows")
    assert total["calls"] == 2
    assert total["tokens"] == reply.usage.total_tokens
    assert total["input_tokens"] == reply.usage.prompt_tokens


def test_streaming_chat_with_usage(stack: Stack, client: openai.OpenAI, llm: FakeLLM) -> None:
    # The model streams slowly enough (150 ms between events) that the agent's delta
    # coalescing (30 ms) passes the pieces on as they come, even on a loaded machine (at 50 ms
    # a CI run at load average 6 saw the pieces merged into one).
    llm.stream_delay_s = 0.15
    try:
        chunks = list(_stream_chat(client))
    finally:
        llm.stream_delay_s = 0.0
    deltas: list[str] = []
    finish = None
    usage = None
    for chunk in chunks:
        if chunk.choices:
            deltas.append(chunk.choices[0].delta.content or "")
            finish = chunk.choices[0].finish_reason or finish
        if chunk.usage:
            usage = chunk.usage
    text = "".join(deltas)
    assert text.startswith("Tool said: ")
    assert len([d for d in deltas if d]) > 1  # really streamed in pieces
    assert finish == "stop"
    assert usage is not None and usage.prompt_tokens > 0 and usage.completion_tokens > 0


def test_history_holds_the_tool_loop(stack: Stack, client: openai.OpenAI) -> None:
    client.chat.completions.create(
        model="switchboard", messages=[{"role": "user", "content": "time please"}], user="carol"
    )
    r = httpx.get(f"{stack.url}/api/sessions/main:openai:carol/history", headers=auth(stack))
    assert r.status_code == 200
    messages = r.json()["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    assert messages[0]["content"] == [{"type": "text", "text": "time please"}]
    tool_use = messages[1]["content"][-1]
    assert tool_use["type"] == "tool_use" and tool_use["name"] == "get_time"
    result = messages[2]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == tool_use["id"]
    assert not result["is_error"]
    assert messages[3]["content"][0]["text"].startswith("Tool said: ")


def test_one_off_request_uses_given_context(
    stack: Stack, client: openai.OpenAI, llm: FakeLLM
) -> None:
    before = len(llm.calls)
    client.chat.completions.create(
        model="switchboard:main",
        messages=[
            {"role": "system", "content": "Be terse."},
            {"role": "user", "content": "Remember the word zebra."},
            {"role": "assistant", "content": "Noted."},
            {"role": "user", "content": "What time is it?"},
        ],
    )
    body = llm.calls[before].request.raw
    texts = json.dumps(body["messages"])
    assert "zebra" in texts and "Be terse." in texts


def test_posted_message_is_answered(stack: Stack) -> None:
    key = "main:api:dave"
    r = httpx.post(
        f"{stack.url}/api/sessions/{key}/messages", json={"text": "hello"}, headers=auth(stack)
    )
    assert r.status_code == 202
    assert r.json()["session_key"] == key
    deadline = time.monotonic() + 20
    roles: list[str] = []
    while time.monotonic() < deadline:
        h = httpx.get(f"{stack.url}/api/sessions/{key}/history", headers=auth(stack)).json()
        roles = [m["role"] for m in h["messages"]]
        if len(roles) >= 4:
            break
        time.sleep(0.1)
    assert roles == ["user", "assistant", "user", "assistant"]


# Every route of the gateway but the open ones needs the token (docs/settings.md: "bearer token
# for every endpoint but /healthz, /readyz"; the status page at / holds no data; /metrics is on
# the ops port, and behind the token on the public one).
AUTHENTICATED = [
    ("POST", "/v1/chat/completions"),
    ("GET", "/v1/models"),
    ("POST", "/api/sessions/{key}/messages"),
    ("PATCH", "/api/sessions/{key}"),
    ("GET", "/api/sessions/{key}/history"),
    ("GET", "/api/sessions/{key}/events"),
    ("GET", "/api/approvals"),
    ("POST", "/api/approvals/{approval_id}"),
    ("POST", "/tools/invoke"),
    ("GET", "/api/pairing"),
    ("POST", "/api/pairing/{channel}/{code}/approve"),
    ("POST", "/api/pairing/{channel}/{code}/deny"),
    ("GET", "/api/pairing/paired"),
    ("DELETE", "/api/pairing/paired/{channel}/{sender}"),
    ("POST", "/api/memory/documents"),
    ("GET", "/api/memory/search"),
    ("GET", "/api/memory/documents/lines"),
    ("DELETE", "/api/memory/documents"),
    ("GET", "/api/cron"),
    ("POST", "/api/cron"),
    ("GET", "/api/cron/{name}"),
    ("PATCH", "/api/cron/{name}"),
    ("DELETE", "/api/cron/{name}"),
    ("POST", "/api/cron/{name}/run"),
    ("GET", "/api/media/{sha256}"),
    ("GET", "/api/usage"),
    ("GET", "/api/health"),  # the Control UI's Health page
    ("GET", "/api/config"),  # the Control UI's Configuration page (redacted)
    ("POST", "/api/sessions/{key}/reset"),
    ("DELETE", "/api/sessions/{key}"),
    ("POST", "/api/sessions/{key}/abort"),
    ("POST", "/api/sessions/{key}/compact"),
    ("GET", "/api/sessions"),
    ("POST", "/a2a"),
]
OPEN = ["/", "/healthz", "/readyz", "/.well-known/agent-card.json"]
# Open routes that the OpenAPI schema lists anyway (the A2A SDK's card route).
OPEN_IN_SCHEMA = {("GET", "/.well-known/agent-card.json")}
PATH_PARAMS = {
    "key": "main:api:auth-probe",
    "approval_id": "ap_nope",
    "channel": "telegram",
    "code": "ABCDEFGH",
    "sender": "42",
    "name": "auth-probe",
    "sha256": "0" * 64,
}


def test_route_list_covers_every_route_of_the_gateway(stack: Stack) -> None:
    """The running gateway's own route table (its OpenAPI schema: every API route; the open
    ones are left out of it but for OPEN_IN_SCHEMA) is exactly AUTHENTICATED, so a new route
    cannot skip the 401 test below."""
    r = httpx.get(f"{stack.url}/openapi.json", headers=auth(stack))
    assert r.status_code == 200, r.text
    served = {(m.upper(), path) for path, ops in r.json()["paths"].items() for m in ops}
    assert served == set(AUTHENTICATED) | OPEN_IN_SCHEMA


@pytest.mark.parametrize(
    ("method", "path"), [*AUTHENTICATED, ("GET", "/openapi.json"), ("GET", "/metrics")]
)
def test_authenticated_route_without_token_gets_401(stack: Stack, method: str, path: str) -> None:
    url = stack.url + path.format(**PATH_PARAMS)
    r = httpx.request(method, url, json={}, timeout=10)
    assert r.status_code == 401, (path, r.status_code, r.text)
    assert "token" in r.json()["error"]["message"].lower()
    r = httpx.request(method, url, json={}, headers={"Authorization": "Bearer wrong"}, timeout=10)
    assert r.status_code == 401, (path, r.status_code, r.text)
    r = httpx.request(method, url, json={}, headers={"Authorization": stack.token}, timeout=10)
    assert r.status_code == 401, (path, "the token without 'Bearer'", r.status_code)


@pytest.mark.parametrize("path", OPEN)
def test_open_routes_answer_without_token(stack: Stack, path: str) -> None:
    assert httpx.get(f"{stack.url}{path}", timeout=10).status_code == 200


def test_session_header_names_the_session(stack: Stack) -> None:
    """``X-Switchboard-Session`` (no ``user``) puts the message in ``main:openai:<header>``;
    it wins over ``user``; a malformed one is refused naming the session id."""
    peer = f"hdr-{os.urandom(4).hex()}"
    headers = {**auth(stack), "X-Switchboard-Session": peer}
    body = {"model": "switchboard", "messages": [{"role": "user", "content": "header please"}]}
    r = httpx.post(f"{stack.url}/v1/chat/completions", json=body, headers=headers, timeout=60)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"].startswith("Tool said: ")

    def session(key: str) -> list[dict[str, Any]]:
        r = httpx.get(f"{stack.url}/api/sessions/{key}/history", headers=auth(stack))
        assert r.status_code == 200, r.text
        return list(r.json()["messages"])

    messages = session(f"main:openai:{peer}")
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    assert messages[0]["content"] == [{"type": "text", "text": "header please"}]

    other = f"user-{os.urandom(4).hex()}"
    body = {
        "model": "switchboard",
        "user": other,
        "messages": [
            {"role": "user", "content": "header please"},
            {"role": "user", "content": "and again"},
        ],
    }
    r = httpx.post(f"{stack.url}/v1/chat/completions", json=body, headers=headers, timeout=60)
    assert r.status_code == 200, r.text
    messages = session(f"main:openai:{peer}")
    assert len(messages) == 8  # the same session, with only the last message as new input
    assert messages[4]["content"] == [{"type": "text", "text": "and again"}]
    assert session(f"main:openai:{other}") == []

    for bad in ("no spaces", "x" * 129, "a/b"):
        r = httpx.post(
            f"{stack.url}/v1/chat/completions",
            json={"model": "switchboard", "messages": [{"role": "user", "content": "hi"}]},
            headers={**auth(stack), "X-Switchboard-Session": bad},
            timeout=10,
        )
        assert r.status_code == 400, (bad, r.text)
        assert "session id" in r.json()["error"]["message"], r.text


@pytest.mark.parametrize(
    ("body", "status", "fragment"),
    [
        (b"{not json", 400, "json"),
        (b'{"model": "switchboard"}', 400, "messages"),
        (b'{"model": "switchboard", "messages": []}', 400, "messages"),
        (
            b'{"model": "switchboard", "messages": [{"role": "wizard", "content": "x"}]}',
            400,
            "role",
        ),
        (b'{"model": "gpt-9", "messages": [{"role": "user", "content": "x"}]}', 404, "model"),
        (
            b'{"model": "switchboard", "messages": [{"role": "assistant", "content": "x"}]}',
            400,
            "user message",
        ),
        (
            b'{"model": "switchboard", "messages": [{"role": "user", "content": "x"}], '
            b'"user": "no spaces allowed"}',
            400,
            "session id",
        ),
    ],
)
def test_malformed_bodies_get_readable_4xx(
    stack: Stack, body: bytes, status: int, fragment: str
) -> None:
    r = httpx.post(
        f"{stack.url}/v1/chat/completions",
        content=body,
        headers={**auth(stack), "Content-Type": "application/json"},
    )
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert fragment.lower() in error["message"].lower()
    assert error["type"]


def test_bad_session_input_gets_400(stack: Stack) -> None:
    r = httpx.post(
        f"{stack.url}/api/sessions/{'k' * 300}/messages", json={"text": "x"}, headers=auth(stack)
    )
    assert r.status_code == 400
    r = httpx.post(f"{stack.url}/api/sessions/ok/messages", json={"text": ""}, headers=auth(stack))
    assert r.status_code == 400 and "text" in r.json()["error"]["message"]
    # the system still answers afterwards
    assert httpx.get(f"{stack.url}/readyz").status_code == 200


def test_one_request_is_one_trace(stack: Stack, client: openai.OpenAI, otlp: OtlpReceiver) -> None:
    trace_id = os.urandom(16).hex()
    client.chat.completions.create(
        model="switchboard",
        messages=[{"role": "user", "content": "trace me"}],
        user="tracer",
        extra_headers={"traceparent": f"00-{trace_id}-{os.urandom(8).hex()}-01"},
    )
    wanted = {
        "gateway.receive",
        "router.route",
        "lane.enqueue",
        "agent.run",
        "llm.call",
        "tool.call",
        "tools.execute",
    }

    def complete(spans: list) -> bool:
        names = [s.name for s in spans if s.trace_id == trace_id]
        return wanted <= set(names) and names.count("llm.call") >= 2

    spans = [s for s in otlp.wait_for(complete) if s.trace_id == trace_id]
    by_name: dict[str, list] = {}
    for s in spans:
        by_name.setdefault(s.name, []).append(s)
    assert wanted <= set(by_name), sorted(by_name)
    ids = {s.span_id: s for s in spans}

    def parent(name: str) -> str:
        return ids[by_name[name][0].parent_id].name

    def ancestors(name: str) -> list[str]:
        chain, span = [], by_name[name][0]
        while span.parent_id in ids:
            span = ids[span.parent_id]
            chain.append(span.name)
        return chain

    assert parent("router.route") == "gateway.receive"  # the gateway span publishes
    assert ancestors("tools.execute")[-1] == "gateway.receive"  # one tree, rooted at the gateway
    assert parent("lane.enqueue") == "router.route"
    assert parent("agent.run") == "lane.enqueue"
    assert len(by_name["llm.call"]) == 2
    assert all(ids[s.parent_id].name == "agent.run" for s in by_name["llm.call"])
    assert parent("tool.call") == "agent.run"
    assert parent("tools.execute") == "tool.call"
    services = {s.name: s.service for s in spans}
    # One server span per request: FastAPI's own instrumentation (a second server span, its
    # dependency and endpoint spans) is off.
    assert [s.name for s in spans if s.service == "switchboard-gateway"] == ["gateway.receive"]
    assert services["gateway.receive"] == "switchboard-gateway"
    assert services["router.route"] == "switchboard-router"
    assert services["agent.run"] == "switchboard-agent"
    assert services["tools.execute"] == "switchboard-tools"
    llm_span = by_name["llm.call"][0]
    assert llm_span.attributes["gen_ai.system"] == "openai"
    assert llm_span.attributes["gen_ai.usage.input_tokens"] > 0
    # The GenAI semantic conventions (genai.py): the first call ends in the tool call.
    genai = {k: v for k, v in llm_span.attributes.items() if k.startswith("gen_ai.")}
    assert genai["gen_ai.provider.name"] == "openai"
    assert genai["gen_ai.operation.name"] == "chat"
    assert genai["gen_ai.request.model"] == genai["gen_ai.response.model"]
    assert genai["gen_ai.usage.output_tokens"] > 0
    assert {tuple(s.attributes["gen_ai.response.finish_reasons"]) for s in by_name["llm.call"]} == {
        ("tool_use",),
        ("end_turn",),
    }


SERVICES = ("gateway", "router", "agent", "tools")


class MissingTraceLines(AssertionError):
    """A service logged no line inside the request's trace."""


def service_logs(stack: Stack, processes: bool) -> dict[str, list[dict[str, Any]]]:
    """Every line each service logged, parsed as JSON (a line that is not fails): one file
    per process with --processes, else the launcher's shared services.log, where each line's
    ``service`` says who wrote it."""
    logs = stack.home / "logs"
    out: dict[str, list[dict[str, Any]]] = {}
    if processes:
        for name in SERVICES:
            lines = json_lines(logs / f"{name}-0.log")
            assert all(line["service"] == name for line in lines), f"{name}-0.log"
            out[name] = lines
    else:
        for line in json_lines(logs / "services.log"):
            out.setdefault(str(line.get("service")), []).append(line)
    return out


@pytest.mark.parametrize("processes", [False, True], ids=["one-process", "processes"])
def test_json_logs_carry_the_trace_id(
    stack: Stack, llm: FakeLLM, tmp_path: Path, processes: bool
) -> None:
    """A request with a traceparent: every service's log is JSON lines, and gateway, router,
    agent and tools each logged at least one line carrying that trace id."""
    target = stack
    if processes:
        env = {"OPENAI_API_KEY": "sk-test-fake", "OPENAI_BASE_URL": f"{llm.base_url}/v1"}
        target = start_stack(tmp_path / "home", env, args=["--processes"])
    try:
        trace_id = os.urandom(16).hex()
        client = openai.OpenAI(base_url=f"{target.url}/v1", api_key=target.token, max_retries=0)
        reply = client.chat.completions.create(
            model="switchboard",
            messages=[{"role": "user", "content": "log me"}],
            user=f"logs-{'processes' if processes else 'one-process'}",
            extra_headers={"traceparent": f"00-{trace_id}-{os.urandom(8).hex()}-01"},
        )
        assert (reply.choices[0].message.content or "").startswith("Tool said: ")

        def traced() -> dict[str, list[dict[str, Any]]]:
            return {
                name: [line for line in lines if line.get("trace_id") == trace_id]
                for name, lines in service_logs(target, processes).items()
            }

        with contextlib.suppress(AssertionError):  # what is missing is reported below
            wait_for(lambda: all(traced().get(name) for name in SERVICES), timeout=10)
        by_service = traced()
    finally:
        if processes:
            left = stop_stack(target)
            assert not left, f"processes left behind: {left}"
    assert set(SERVICES) <= set(service_logs(target, processes)), "a service logged nothing"
    missing = [name for name in SERVICES if not by_service.get(name)]
    if missing:
        raise MissingTraceLines(
            f"no log line with trace_id {trace_id} from {', '.join(missing)}; "
            f"lines in the trace: { {n: [x['msg'] for x in v] for n, v in by_service.items()} }"
        )


@pytest.mark.parametrize("processes", [True, False], ids=["processes", "one-process"])
def test_no_model_reply_explains_configuration(tmp_path: Path, processes: bool) -> None:
    stack = start_stack(tmp_path / "home", {}, args=["--processes"] if processes else [])
    try:
        client = openai.OpenAI(base_url=f"{stack.url}/v1", api_key=stack.token, max_retries=0)
        reply = client.chat.completions.create(
            model="switchboard", messages=[{"role": "user", "content": "hi"}]
        )
        text = reply.choices[0].message.content or ""
        assert "OPENAI_API_KEY" in text and "ANTHROPIC_API_KEY" in text
        pids = stack.pids()
        if processes:
            assert {"gateway-0", "router-0", "agent-0", "tools-0", "nats", "postgres"} <= set(pids)
        else:  # every service runs inside the launcher's process
            assert set(pids) == {"launcher", "nats", "postgres"}
        assert (tmp_path / "home" / "gateway-token").exists() is False  # token came from env
    finally:
        left = stop_stack(stack)
    assert not left, f"processes left behind after Ctrl-C: {left}\n{stack.log()}"


def _stream_chat(client: openai.OpenAI) -> Any:
    return client.chat.completions.create(
        model="switchboard",
        messages=[{"role": "user", "content": "And now, streamed?"}],
        user="bob",
        stream=True,
        stream_options={"include_usage": True},
    )
