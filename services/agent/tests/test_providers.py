"""Model providers against the fake LLM server, through the real SDKs."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from switchboard.toolspec import ToolSpec
from switchboard_agent.providers import (
    NO_MODEL_MESSAGE,
    AnthropicModel,
    AnthropicStreamAccumulator,
    Model,
    ModelAuthError,
    ModelConfig,
    ModelError,
    ModelRateLimitError,
    ModelRequest,
    ModelResponse,
    ModelUnavailableError,
    OpenAIChatModel,
    OpenAIStreamAccumulator,
    TextDelta,
    build_model,
    resolve_model_config,
    to_openai_messages,
)
from tests.fakes.llm import FakeLLM, FakeRequest, Reply, text_only, tool_then_text

KEY = "sk-test-key-0123456789abcdef"
PROVIDERS = ["anthropic", "openai"]
GET_TIME = ToolSpec(
    name="get_time",
    description="Current time in a timezone.",
    parameters={
        "type": "object",
        "properties": {"timezone": {"type": "string"}},
        "required": ["timezone"],
    },
)


@pytest.fixture(scope="module")
def server() -> Iterator[FakeLLM]:
    with FakeLLM() as llm:
        yield llm


@pytest.fixture
def llm(server: FakeLLM) -> Iterator[FakeLLM]:
    server.reset()
    server.script = tool_then_text()
    server.require_key = None
    yield server
    server.reset()
    server.require_key = None


def make_model(llm: FakeLLM, provider: str, *, key: str = KEY, retries: int = 0) -> Model:
    if provider == "anthropic":
        return AnthropicModel("claude-test", key, llm.base_url, max_retries=retries)
    return OpenAIChatModel("gpt-test", key, f"{llm.base_url}/v1", max_retries=retries)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


async def run(model: Model, request: ModelRequest) -> tuple[list[str], ModelResponse]:
    deltas: list[str] = []
    final: list[ModelResponse] = []
    async for item in model.stream(request):
        assert not final, "nothing may follow the ModelResponse"
        if isinstance(item, TextDelta):
            deltas.append(item.text)
        else:
            assert isinstance(item, ModelResponse)
            final.append(item)
    assert len(final) == 1
    return deltas, final[0]


# --------------------------------------------------------------------------- streaming


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_text_streaming(llm: FakeLLM, provider: str) -> None:
    text = "The quick brown fox jumps over the lazy dog."
    llm.script = lambda req: Reply(text=text, input_tokens=42, output_tokens=9)
    deltas, resp = await run(make_model(llm, provider), ModelRequest("Be brief.", [user("hi")], []))
    assert len(deltas) > 1
    assert "".join(deltas) == text
    assert resp.content == [{"type": "text", "text": text}]
    assert resp.stop_reason == "end_turn"
    assert (resp.usage.input_tokens, resp.usage.output_tokens) == (42, 9)
    assert resp.model == ("claude-test" if provider == "anthropic" else "gpt-test")
    [call] = llm.calls
    assert call.provider == provider and call.status == 200
    assert call.request.stream and call.request.system == "Be brief."
    assert call.request.last_user_text == "hi"
    assert call.start <= call.end


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_tool_call_with_split_arguments(llm: FakeLLM, provider: str) -> None:
    args = {"timezone": "Europe/Berlin", "nested": {"list": [1, 2, 3], "s": 'x"y'}}
    llm.script = tool_then_text("get_time", args)
    deltas, resp = await run(
        make_model(llm, provider), ModelRequest("", [user("time?")], [GET_TIME])
    )
    assert deltas == []
    assert resp.stop_reason == "tool_use"
    [block] = resp.content
    assert block["type"] == "tool_use" and block["name"] == "get_time"
    assert block["input"] == args
    assert block["id"].startswith("toolu_" if provider == "anthropic" else "call_")
    assert resp.usage.input_tokens > 0 and resp.usage.output_tokens > 0
    assert llm.calls[0].request.tools == ["get_time"]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_text_and_two_tool_calls(llm: FakeLLM, provider: str) -> None:
    llm.script = lambda req: Reply(
        text="Let me check.", tool_calls=[("get_time", {"timezone": "UTC"}), ("noop", {})]
    )
    deltas, resp = await run(make_model(llm, provider), ModelRequest("", [user("x")], [GET_TIME]))
    assert "".join(deltas) == "Let me check."
    assert [b["type"] for b in resp.content] == ["text", "tool_use", "tool_use"]
    assert [b["input"] for b in resp.tool_uses] == [{"timezone": "UTC"}, {}]
    assert resp.text == "Let me check."
    assert resp.stop_reason == "tool_use"


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_max_tokens_stop_reason(llm: FakeLLM, provider: str) -> None:
    llm.script = lambda req: Reply(text="cut o", stop_reason="max_tokens")
    _, resp = await run(make_model(llm, provider), ModelRequest("", [user("x")], [], max_tokens=5))
    assert resp.stop_reason == "max_tokens"
    body = llm.calls[0].request.body
    assert body["max_tokens"] == 5  # compatible servers get max_tokens, not max_completion_tokens


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_tool_loop_round_trip(llm: FakeLLM, provider: str) -> None:
    """Canonical transcript with tool_use/tool_result goes back to the server correctly."""
    model = make_model(llm, provider)
    messages = [user("what time is it?")]
    _, first = await run(model, ModelRequest("sys", messages, [GET_TIME]))
    assert first.stop_reason == "tool_use"
    call = first.tool_uses[0]
    messages += [
        {"role": "assistant", "content": first.content},
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": call["id"],
                    "content": "12:00",
                    "is_error": False,
                    # the transcript's own keys (providers.base.TRANSCRIPT_ONLY): never sent
                    "isolation": {"layers": ["landlock"]},
                    "duration_ms": 3.5,
                }
            ],
        },
    ]
    deltas, second = await run(model, ModelRequest("sys", messages, [GET_TIME]))
    assert "landlock" not in json.dumps(llm.calls[-1].request.body)
    assert "duration_ms" not in json.dumps(llm.calls[-1].request.body)
    assert "".join(deltas) == "Tool said: 12:00" == second.text
    assert second.stop_reason == "end_turn"
    first_req, second_req = (c.request for c in llm.calls)
    assert first_req.last_tool_results == []
    assert second_req.last_tool_results == ["12:00"]
    assert second_req.last_user_text == "what time is it?"
    if provider == "openai":
        sent = second_req.body["messages"]
        assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool"]
        assert sent[2]["tool_calls"][0]["id"] == call["id"]
        assert json.loads(sent[2]["tool_calls"][0]["function"]["arguments"]) == call["input"]
        assert sent[3] == {"role": "tool", "tool_call_id": call["id"], "content": "12:00"}


async def test_request_shapes(llm: FakeLLM) -> None:
    llm.script = text_only("ok")
    req = ModelRequest("You are helpful.", [user("hi")], [GET_TIME], max_tokens=123)
    await run(make_model(llm, "anthropic"), req)
    await run(make_model(llm, "openai"), req)
    a_body, o_body = (c.request.body for c in llm.calls)
    assert a_body["system"] == "You are helpful." and a_body["max_tokens"] == 123
    assert a_body["tools"] == [
        {
            "name": "get_time",
            "description": GET_TIME.description,
            "input_schema": GET_TIME.parameters,
        }
    ]
    assert a_body["stream"] is True
    assert o_body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_time",
                "description": GET_TIME.description,
                "parameters": GET_TIME.parameters,
            },
        }
    ]
    assert o_body["stream"] is True and o_body["stream_options"] == {"include_usage": True}
    assert o_body["messages"][0] == {"role": "system", "content": "You are helpful."}


def test_official_openai_uses_max_completion_tokens() -> None:
    model = OpenAIChatModel("gpt-4o-mini", KEY)  # default base URL: api.openai.com
    params = model.request_params(ModelRequest("", [user("x")], [], max_tokens=77))
    assert params["max_completion_tokens"] == 77 and "max_tokens" not in params
    assert "tools" not in params
    assert KEY not in repr(model)


async def test_concurrent_calls_are_recorded(llm: FakeLLM) -> None:
    llm.script = text_only("hi there")
    models = [make_model(llm, p) for p in PROVIDERS]
    results = await asyncio.gather(
        *(run(models[i % 2], ModelRequest("", [user(str(i))], [])) for i in range(20))
    )
    assert all(resp.text == "hi there" for _, resp in results)
    calls = llm.wait_for_calls(20)
    assert len(calls) == 20
    assert sorted(c.request.last_user_text for c in calls) == sorted(str(i) for i in range(20))


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_auth_error(llm: FakeLLM, provider: str) -> None:
    llm.require_key = "sk-the-right-key-000000"
    wrong = "sk-wrong-key-abcdef987654"
    with pytest.raises(ModelAuthError) as info:
        await run(make_model(llm, provider, key=wrong), ModelRequest("", [user("x")], []))
    err = info.value
    assert err.status_code == 401 and err.provider == provider
    for text in (err.message, str(err), repr(err)):
        assert wrong not in text and wrong[-4:] not in text and "sk-" not in text
    assert ("ANTHROPIC_API_KEY" if provider == "anthropic" else "OPENAI_API_KEY") in err.message
    assert err.__cause__ is None and err.__suppress_context__
    assert llm.calls[0].status == 401
    # and the right key works
    await run(make_model(llm, provider, key="sk-the-right-key-000000"), ModelRequest("", [], []))


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_rate_limit_error(llm: FakeLLM, provider: str) -> None:
    llm.fail_next(429, message="slow down")
    with pytest.raises(ModelRateLimitError) as info:
        await run(make_model(llm, provider), ModelRequest("", [user("x")], []))
    assert info.value.status_code == 429 and info.value.retryable
    assert "slow down" in info.value.message
    assert [c.status for c in llm.calls] == [429]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_server_error_is_unavailable(llm: FakeLLM, provider: str) -> None:
    llm.fail_next(500 if provider == "openai" else 529)
    with pytest.raises(ModelUnavailableError):
        await run(make_model(llm, provider), ModelRequest("", [user("x")], []))


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_bad_request_is_model_error_with_detail(llm: FakeLLM, provider: str) -> None:
    llm.fail_next(400, message=f"bad thing near {KEY}")
    with pytest.raises(ModelError) as info:
        await run(make_model(llm, provider), ModelRequest("", [user("x")], []))
    assert type(info.value) is ModelError
    assert "bad thing" in info.value.message and KEY not in info.value.message


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_sdk_retries_injected_failure(llm: FakeLLM, provider: str) -> None:
    llm.script = text_only("after retry")
    llm.fail_next(429, provider=provider)
    _, resp = await run(make_model(llm, provider, retries=2), ModelRequest("", [user("x")], []))
    assert resp.text == "after retry"
    assert [c.status for c in llm.calls] == [429, 200]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_connection_refused_is_unavailable(provider: str) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    model: Model = (
        AnthropicModel("m", KEY, base, max_retries=0)
        if provider == "anthropic"
        else OpenAIChatModel("m", KEY, f"{base}/v1", max_retries=0)
    )
    with pytest.raises(ModelUnavailableError) as info:
        await run(model, ModelRequest("", [user("x")], []))
    assert KEY not in str(info.value)


def test_anthropic_in_stream_error_event_mapping() -> None:
    model = AnthropicModel("m", KEY, "http://127.0.0.1:1", max_retries=0)
    request = httpx.Request("POST", "http://127.0.0.1:1/v1/messages")
    try:
        import httpx2  # the transport the anthropic SDK uses

        response: Any = httpx2.Response(200, request=httpx2.Request("POST", str(request.url)))
    except ImportError:  # pragma: no cover
        response = httpx.Response(200, request=request)
    for etype, expected in [
        ("overloaded_error", ModelUnavailableError),
        ("rate_limit_error", ModelRateLimitError),
        ("authentication_error", ModelAuthError),
    ]:
        body = {"type": "error", "error": {"type": etype, "message": "boom"}}
        exc = anthropic.APIStatusError("boom", response=response, body=body)
        assert type(model._map_error(exc)) is expected


def test_openai_in_stream_error_mapping() -> None:
    model = OpenAIChatModel("m", KEY, "http://127.0.0.1:1/v1", max_retries=0)
    req: Any = None
    try:
        import httpx2

        req = httpx2.Request("POST", "http://127.0.0.1:1/v1/chat/completions")
    except ImportError:  # pragma: no cover
        req = httpx.Request("POST", "http://127.0.0.1:1/v1/chat/completions")
    exc = openai.APIError("Provider returned error", req, body={"message": "upstream", "code": 502})
    assert type(model._map_error(exc)) is ModelUnavailableError
    exc = openai.APIError("x", req, body={"message": "context_length_exceeded", "code": 400})
    assert isinstance(model._map_error(exc), ModelError)


# --------------------------------------------------------------------------- the fake itself


async def test_fake_wire_format_splits_deltas(llm: FakeLLM) -> None:
    llm.script = lambda req: Reply(
        text="Hello world!", tool_calls=[("get_time", {"timezone": "UTC"})]
    )
    async with httpx.AsyncClient(base_url=llm.base_url) as http:
        r = await http.post(
            "/v1/messages",
            json={"model": "m", "max_tokens": 10, "stream": True, "messages": [user("x")]},
        )
        events = [ln[7:] for ln in r.text.splitlines() if ln.startswith("event: ")]
        assert events[0] == "message_start" and events[-2:] == ["message_delta", "message_stop"]
        assert "ping" in events
        json_parts = [
            json.loads(ln[6:])["delta"]["partial_json"]
            for ln in r.text.splitlines()
            if ln.startswith("data: ") and "input_json_delta" in ln
        ]
        assert len([p for p in json_parts if p]) >= 2
        assert json.loads("".join(json_parts)) == {"timezone": "UTC"}

        r = await http.post(
            "/v1/chat/completions",
            json={
                "model": "m",
                "stream": True,
                "stream_options": {"include_usage": True},
                "messages": [{"role": "user", "content": "x"}],
            },
        )
        lines = [ln[6:] for ln in r.text.splitlines() if ln.startswith("data: ")]
        assert lines[-1] == "[DONE]"
        chunks = [json.loads(ln) for ln in lines[:-1]]
        assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0
        arg_pieces = [
            tc["function"]["arguments"]
            for c in chunks
            for ch in c["choices"]
            for tc in ch["delta"].get("tool_calls", [])
            if tc["function"].get("arguments")
        ]
        assert len(arg_pieces) >= 2
        text_pieces = [
            ch["delta"]["content"]
            for c in chunks
            for ch in c["choices"]
            if ch["delta"].get("content")
        ]
        assert len(text_pieces) >= 2 and "".join(text_pieces) == "Hello world!"


async def test_fake_non_streaming_and_models_via_sdks(llm: FakeLLM) -> None:
    llm.script = lambda req: Reply(text="hi", tool_calls=[("get_time", {"timezone": "UTC"})])
    a = anthropic.AsyncAnthropic(api_key=KEY, base_url=llm.base_url, max_retries=0)
    msg = await a.messages.create(
        model="claude-test", max_tokens=10, messages=[{"role": "user", "content": "x"}]
    )
    assert msg.stop_reason == "tool_use"
    assert msg.content[0].type == "text" and msg.content[1].type == "tool_use"
    o = openai.AsyncOpenAI(api_key=KEY, base_url=f"{llm.base_url}/v1", max_retries=0)
    comp = await o.chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "x"}]
    )
    choice = comp.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content == "hi"
    assert choice.message.tool_calls is not None
    assert comp.usage is not None and comp.usage.prompt_tokens > 0
    models = await o.models.list()
    assert "gpt-4o-mini" in [m.id for m in models.data]
    a_models = await a.models.list()
    assert "claude-sonnet-4-5" in [m.id for m in a_models.data]
    assert [c.provider for c in llm.calls] == ["anthropic", "openai"]
    assert not llm.calls[0].request.stream


async def test_fake_script_error_surfaces(llm: FakeLLM) -> None:
    def broken(req: FakeRequest) -> Reply:
        raise RuntimeError("script bug")

    llm.script = broken
    with pytest.raises(ModelUnavailableError):
        await run(make_model(llm, "openai"), ModelRequest("", [user("x")], []))
    assert isinstance(llm.errors[0], RuntimeError)


# --------------------------------------------------------------------------- accumulators


def test_anthropic_accumulator_hand_written_events() -> None:
    acc = AnthropicStreamAccumulator("fallback")
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "model": "claude-real",
                "content": [],
                "usage": {
                    "input_tokens": 10,
                    "cache_read_input_tokens": 5,
                    "cache_creation_input_tokens": 2,
                    "output_tokens": 1,
                },
            },
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "ping"},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hel"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "lo"}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "thinking", "thinking": ""},
        },
        {"type": "content_block_stop", "index": 1},
        {
            "type": "content_block_start",
            "index": 2,
            "content_block": {"type": "tool_use", "id": "toolu_a", "name": "f", "input": {}},
        },
    ]
    pieces = ["", '{"ci', 'ty": "Par', 'is", "n": [1,', " 2]}"]
    events += [
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": p},
        }
        for p in pieces
    ]
    events += [
        {"type": "content_block_stop", "index": 2},
        {
            "type": "content_block_start",
            "index": 3,
            "content_block": {"type": "tool_use", "id": "toolu_b", "name": "g", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 3,
            "delta": {"type": "input_json_delta", "partial_json": ""},
        },
        {"type": "content_block_stop", "index": 3},
        {
            "type": "content_block_start",
            "index": 4,
            "content_block": {"type": "tool_use", "id": "toolu_c", "name": "h", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 4,
            "delta": {"type": "input_json_delta", "partial_json": '{"a": '},
        },
        {"type": "content_block_stop", "index": 4},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 30},
        },
        {"type": "message_stop"},
    ]
    deltas = [d.text for e in events if (d := acc.feed(e)) is not None]
    assert deltas == ["Hel", "lo"]
    resp = acc.response()
    assert resp.content == [
        {"type": "text", "text": "Hello"},
        {"type": "tool_use", "id": "toolu_a", "name": "f", "input": {"city": "Paris", "n": [1, 2]}},
        {"type": "tool_use", "id": "toolu_b", "name": "g", "input": {}},
        {"type": "tool_use", "id": "toolu_c", "name": "h", "input": {"_raw": '{"a": '}},
    ]
    assert resp.stop_reason == "tool_use"
    assert (resp.usage.input_tokens, resp.usage.output_tokens) == (17, 30)
    assert resp.model == "claude-real"
    assert acc.finished


def test_anthropic_accumulator_accepts_sdk_objects() -> None:
    from anthropic.types import RawMessageStreamEvent

    raw = [
        {
            "type": "message_start",
            "message": {
                "id": "m",
                "type": "message",
                "role": "assistant",
                "model": "claude-x",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 3, "output_tokens": 1},
            },
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 2},
        },
    ]
    acc = AnthropicStreamAccumulator()
    from pydantic import TypeAdapter

    adapter: TypeAdapter[Any] = TypeAdapter(RawMessageStreamEvent)
    for e in raw:
        acc.feed(adapter.validate_python(e))
    resp = acc.response()
    assert resp.text == "ok" and resp.stop_reason == "end_turn" and resp.usage.output_tokens == 2


def _chunk(
    delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any
) -> dict[str, Any]:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "model": "gpt-real",
        "choices": choices,
        **extra,
    }


def test_openai_accumulator_hand_written_chunks() -> None:
    acc = OpenAIStreamAccumulator("fallback")
    chunks = [
        _chunk({"role": "assistant", "content": ""}),
        _chunk({"content": "Checking"}),
        _chunk({"content": " now."}),
        _chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "f", "arguments": ""},
                    }
                ]
            }
        ),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"ci'}}]}),
        _chunk(
            {
                "tool_calls": [
                    {
                        "index": 1,
                        "id": "call_b",
                        "type": "function",
                        "function": {"name": "g", "arguments": "{not"},
                    }
                ]
            }
        ),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'ty": "Paris"}'}}]}),
        _chunk({"tool_calls": [{"index": 1, "function": {"arguments": " json"}}]}),
        _chunk({"tool_calls": [{"index": 2, "id": "call_c", "function": {"name": "h"}}]}),
        _chunk({}, "tool_calls"),
        _chunk(None, usage={"prompt_tokens": 12, "completion_tokens": 34, "total_tokens": 46}),
    ]
    deltas = [d.text for c in chunks if (d := acc.feed(c)) is not None]
    assert deltas == ["Checking", " now."]
    resp = acc.response()
    assert resp.content == [
        {"type": "text", "text": "Checking now."},
        {"type": "tool_use", "id": "call_a", "name": "f", "input": {"city": "Paris"}},
        {"type": "tool_use", "id": "call_b", "name": "g", "input": {"_raw": "{not json"}},
        {"type": "tool_use", "id": "call_c", "name": "h", "input": {}},
    ]
    assert resp.stop_reason == "tool_use"
    assert (resp.usage.input_tokens, resp.usage.output_tokens) == (12, 34)
    assert resp.model == "gpt-real"


@pytest.mark.parametrize(
    ("finish", "tools", "expected"),
    [
        ("stop", False, "end_turn"),
        ("stop", True, "tool_use"),  # some compatible servers say "stop" with tool calls
        ("tool_calls", True, "tool_use"),
        ("length", False, "max_tokens"),
        ("length", True, "max_tokens"),
        ("content_filter", False, "refusal"),
        (None, False, "end_turn"),
        ("something_new", False, "something_new"),
    ],
)
def test_openai_finish_reason_normalization(finish: str | None, tools: bool, expected: str) -> None:
    acc = OpenAIStreamAccumulator()
    if tools:
        acc.feed(
            _chunk(
                {
                    "tool_calls": [
                        {"index": 0, "id": "c1", "function": {"name": "f", "arguments": "{}"}}
                    ]
                }
            )
        )
    acc.feed(_chunk({}, finish))
    assert acc.response().stop_reason == expected


def test_openai_accumulator_without_indexes() -> None:
    acc = OpenAIStreamAccumulator()
    acc.feed(
        _chunk({"tool_calls": [{"id": "x1", "function": {"name": "a", "arguments": '{"q":'}}]})
    )
    acc.feed(_chunk({"tool_calls": [{"function": {"arguments": " 1}"}}]}))
    acc.feed(
        _chunk({"tool_calls": [{"id": "x2", "function": {"name": "b", "arguments": {"z": 2}}}]})
    )
    resp = acc.response()
    assert [(b["id"], b["input"]) for b in resp.tool_uses] == [("x1", {"q": 1}), ("x2", {"z": 2})]


# --------------------------------------------------------------------------- conversion


def test_canonical_to_openai_messages_multi_turn() -> None:
    transcript: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What time is it"},
                {"type": "text", "text": "in Paris?"},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {
                    "type": "tool_use",
                    "id": "t1",
                    "name": "get_time",
                    "input": {"timezone": "Europe/Paris"},
                },
                {"type": "tool_use", "id": "t2", "name": "broken", "input": {"_raw": "{oops"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "12:00", "is_error": False},
                {
                    "type": "tool_result",
                    "tool_use_id": "t2",
                    "content": "bad args",
                    "is_error": True,
                },
                {"type": "text", "text": "Also, thanks!"},
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "It is noon."}]},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Look:"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "QUJD"},
                },
            ],
        },
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t3", "name": "noop", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t3",
                    "content": [{"type": "text", "text": "done"}],
                }
            ],
        },
    ]
    assert to_openai_messages("SYS", transcript) == [
        {"role": "system", "content": "SYS"},
        {"role": "user", "content": "What time is it\n\nin Paris?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "t1",
                    "type": "function",
                    "function": {"name": "get_time", "arguments": '{"timezone": "Europe/Paris"}'},
                },
                {
                    "id": "t2",
                    "type": "function",
                    "function": {"name": "broken", "arguments": "{oops"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "t1", "content": "12:00"},
        {"role": "tool", "tool_call_id": "t2", "content": "Error: bad args"},
        {"role": "user", "content": "Also, thanks!"},
        {"role": "assistant", "content": "It is noon."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Look:"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "t3", "type": "function", "function": {"name": "noop", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "t3", "content": "done"},
    ]
    assert to_openai_messages("", [{"role": "user", "content": "plain"}]) == [
        {"role": "user", "content": "plain"}
    ]


def test_anthropic_request_params_drop_empty_text() -> None:
    model = AnthropicModel("claude-x", KEY, "http://127.0.0.1:1")
    msgs = [
        user("hi"),
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": ""},
                {"type": "tool_use", "id": "t", "name": "f", "input": {}},
            ],
        },
    ]
    params = model.request_params(ModelRequest("", msgs, []))
    assert "system" not in params and "tools" not in params
    assert params["messages"][1]["content"] == [
        {"type": "tool_use", "id": "t", "name": "f", "input": {}}
    ]
    assert msgs[1]["content"][0] == {"type": "text", "text": ""}  # input not mutated
    assert KEY not in repr(model)


# --------------------------------------------------------------------------- selection


def test_resolve_model_config_defaults() -> None:
    assert resolve_model_config(None, None, None, None, None) is None
    assert resolve_model_config("", "", "", "", "") is None
    assert resolve_model_config(None, None, None, None, "http://localhost:11434/v1") is None
    assert resolve_model_config(None, "ak", None, None, None) == ModelConfig(
        "anthropic", "claude-sonnet-4-5", "ak", None
    )
    assert resolve_model_config(None, "ak", "http://a", "ok", "http://o") == ModelConfig(
        "anthropic", "claude-sonnet-4-5", "ak", "http://a"
    )
    assert resolve_model_config("  ", None, None, "ok", "http://o") == ModelConfig(
        "openai", "gpt-4o-mini", "ok", "http://o"
    )


def test_resolve_model_config_model_ref() -> None:
    assert resolve_model_config("openai:gpt-4.1", "ak", None, "ok", None) == ModelConfig(
        "openai", "gpt-4.1", "ok", None
    )
    assert resolve_model_config("anthropic:claude-opus-4-1", "ak", None, "ok", None) == ModelConfig(
        "anthropic", "claude-opus-4-1", "ak", None
    )
    # Ollama: base URL without a key, model names with colons
    assert resolve_model_config(
        "openai:llama3.2:3b", None, None, None, "http://localhost:11434/v1"
    ) == ModelConfig("openai", "llama3.2:3b", "not-needed", "http://localhost:11434/v1")
    assert resolve_model_config(" OpenAI : gpt-4o ", None, None, "ok", None) == ModelConfig(
        "openai", "gpt-4o", "ok", None
    )


@pytest.mark.parametrize(
    ("ref", "anthropic_key", "openai_key", "openai_url", "match"),
    [
        ("gpt-4o", "ak", "ok", None, "provider:model"),
        ("openai:", None, "ok", None, "provider:model"),
        (":gpt-4o", None, "ok", None, "provider:model"),
        ("gemini:pro", "ak", "ok", None, "Unknown model provider"),
        ("anthropic:claude-sonnet-4-5", None, "ok", None, "ANTHROPIC_API_KEY"),
        ("openai:gpt-4o-mini", "ak", None, None, "OPENAI_API_KEY"),
    ],
)
def test_resolve_model_config_bad_ref(
    ref: str, anthropic_key: str | None, openai_key: str | None, openai_url: str | None, match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        resolve_model_config(ref, anthropic_key, None, openai_key, openai_url)


def test_model_config_repr_and_build_model() -> None:
    cfg = ModelConfig("anthropic", "claude-sonnet-4-5", "sk-ant-secret-value", None)
    assert "sk-ant-secret-value" not in repr(cfg)
    model = build_model(cfg)
    assert isinstance(model, AnthropicModel) and isinstance(model, Model)
    assert (model.provider, model.model) == ("anthropic", "claude-sonnet-4-5")
    model = build_model(
        ModelConfig("openai", "llama3.2", "not-needed", "http://localhost:11434/v1")
    )
    assert isinstance(model, OpenAIChatModel)
    assert (model.provider, model.model) == ("openai", "llama3.2")
    with pytest.raises(ValueError):
        build_model(ModelConfig("nope", "m", "k", None))


def test_no_model_message() -> None:
    for needle in (
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "SB_MODEL=",
        "switchboard up",
    ):
        assert needle in NO_MODEL_MESSAGE
    for server in ("Ollama", "vLLM", "OpenRouter"):
        assert server in NO_MODEL_MESSAGE


async def test_fake_stream_delay_streams_incrementally() -> None:
    with FakeLLM(text_only("one two three four"), stream_delay_s=0.02) as slow:
        model = make_model(slow, "anthropic")
        stamps: list[float] = []
        async for item in model.stream(ModelRequest("", [user("x")], [])):
            if isinstance(item, TextDelta):
                stamps.append(time.monotonic())
        assert len(stamps) == 4
        assert stamps[-1] - stamps[0] >= 0.04  # deltas arrived over time, not in one write
        [call] = slow.calls
        assert call.end - call.start >= 0.1


def test_openai_stream_body_is_the_params_with_each_schema_encoded_once() -> None:
    model = OpenAIChatModel("m", KEY, base_url="http://127.0.0.1:9/v1")
    note = ToolSpec(
        "note", 'Keep a "note" — ünïcode', {"type": "object", "properties": {"x": {"enum": [1.5]}}}
    )
    request = ModelRequest("sys", [user("héllo")], [GET_TIME, note], max_tokens=9)
    body = json.loads(model.stream_body(request))
    params = model.request_params(request)
    assert body == {**params, "stream": True, "stream_options": {"include_usage": True}}
    # The schema text is the spec's own, kept from the first encoding on.
    assert note.parameters_json is note.parameters_json
    assert json.loads(note.parameters_json) == note.parameters
    plain = json.loads(model.stream_body(ModelRequest("", [user("x")], [])))
    assert "tools" not in plain and plain["stream"] is True


def test_openai_tool_entries_are_encoded_once_and_again_when_a_spec_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The next call sends the same specs without encoding them again (openai_body.py); a
    spec whose description or schema changed under the same name is encoded anew."""
    from switchboard_agent.providers import openai_body as module

    model = OpenAIChatModel("m", KEY, base_url="http://127.0.0.1:9/v1")
    spec = ToolSpec("probe_tool", "first words", {"type": "object"})
    first = json.loads(model.stream_body(ModelRequest("s", [user("a")], [GET_TIME, spec])))
    encoded: list[object] = []
    dumps = module.dumps

    def counting(value: object) -> str:
        encoded.append(value)
        return dumps(value)

    monkeypatch.setattr(module, "dumps", counting)
    again = json.loads(model.stream_body(ModelRequest("s", [user("a")], [GET_TIME, spec])))
    assert again == first and encoded == []  # nothing of the tools encoded again
    changed = ToolSpec("probe_tool", "other words", {"type": "object", "required": ["x"]})
    body = json.loads(model.stream_body(ModelRequest("s", [user("a")], [changed])))
    assert body["tools"][0]["function"] == {
        "name": "probe_tool",
        "description": "other words",
        "parameters": {"type": "object", "required": ["x"]},
    }
