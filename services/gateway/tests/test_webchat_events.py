"""WebChat events and history: the agent's events of the socket's session (published on
sb.events.<session token>, as the agent does) arrive as typed events numbered by ``seq``; a
socket that reconnects with its epoch and last seq gets what it missed, or a gap event when it
is not kept; ``history`` reads the transcript through the agent's Sessions gRPC."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from switchboard.sessions import session_token
from switchboard.v1 import messages_pb2, sessions_pb2, sessions_pb2_grpc
from switchboard_gateway.webchat.connection import hub_of
from switchboard_gateway.webchat.feed import QUEUE_LIMIT, Event, Listener

from .webchat_client import ChatClient, WebChatGateway, eventually, webchat_gateway


@pytest.fixture
async def wg(nats_url: str, tmp_path: Path) -> AsyncIterator[WebChatGateway]:
    async with webchat_gateway(nats_url, tmp_path, webchat_replay_events=10) as gateway:
        yield gateway


async def publish(wg: WebChatGateway, key: str, stream: str, phase: str, **fields: Any) -> None:
    event = messages_pb2.AgentEvent(
        run_id="run-1", session_key=key, message_id="m-1", stream=stream, phase=phase, **fields
    )
    subject = wg.gw.rt.subjects.events(session_token(key))
    await wg.gw.rt.nc.publish(subject, event.SerializeToString())


async def deltas(wg: WebChatGateway, key: str, *texts: str) -> None:
    for text in texts:
        await publish(wg, key, "assistant", "delta", text=text)
    await wg.gw.rt.nc.flush()


async def events(client: ChatClient, n: int) -> list[dict[str, Any]]:
    return [await client.event() for _ in range(n)]


async def test_a_run_arrives_as_typed_events_in_order(wg: WebChatGateway) -> None:
    async with wg.connected() as (client, hello):
        key = hello["session_key"]
        await publish(wg, "main:webchat:someone-else", "assistant", "delta", text="not yours")
        await publish(wg, key, "lifecycle", "start")
        await publish(wg, key, "assistant", "delta", text="Let me check. ")
        args = json.dumps({"args": {"timezone": "UTC", "note": "x" * 500}})
        await publish(wg, key, "tool", "start", tool="get_time", call_id="c1", data_json=args)
        await publish(wg, key, "tool", "update", tool="get_time", call_id="c1", text="partial")
        result = json.dumps({"is_error": False})
        await publish(
            wg, key, "tool", "result", tool="get_time", call_id="c1", text="12:00", data_json=result
        )
        await publish(wg, key, "assistant", "delta", text="It is noon.")
        usage = messages_pb2.Usage(input_tokens=10, output_tokens=4)
        await publish(
            wg, key, "lifecycle", "end", text="It is noon.", stop_reason="end_turn", usage=usage
        )
        got = await events(client, 6)
    assert [e["seq"] for e in got] == [1, 2, 3, 4, 5, 6]
    assert [(e["event"], e["payload"].get("phase")) for e in got] == [
        ("lifecycle", "start"),
        ("assistant", None),
        ("tool", "start"),
        ("tool", "result"),  # partial output updates are not forwarded
        ("assistant", None),
        ("lifecycle", "end"),
    ]
    start, delta, tool_start, tool_result, _, end = (e["payload"] for e in got)
    assert start == {"run_id": "run-1", "phase": "start", "message_ids": ["m-1"]}
    assert delta == {"run_id": "run-1", "text": "Let me check. "}
    assert tool_start["tool"] == "get_time" and tool_start["call_id"] == "c1"
    assert tool_start["summary"].startswith('{"timezone":"UTC","note":"xxx')
    assert len(tool_start["summary"]) <= 200
    assert tool_result["summary"] == "12:00" and tool_result["is_error"] is False
    assert end["status"] == "completed" and end["stop_reason"] == "end_turn"
    assert (end["input_tokens"], end["output_tokens"], end["text"]) == (10, 4, "It is noon.")


async def test_a_reconnect_gets_the_missed_events(wg: WebChatGateway) -> None:
    async with wg.connected() as (client, hello):
        key, epoch = hello["session_key"], hello["epoch"]
        await deltas(wg, key, "one", "two")
        seen = await events(client, 2)
    assert [e["seq"] for e in seen] == [1, 2]
    await deltas(wg, key, "three", "four")  # nobody is connected: the feed keeps them
    feed = hub_of(wg.gw.app).feeds[key]
    await eventually(lambda: feed.seq == 4, "the feed got the events")
    async with wg.connected(session=hello["session"], epoch=epoch, last_seq=2) as (client, again):
        assert (again["resumed"], again["replayed"], again["seq"]) == (True, 2, 4)
        missed = await events(client, 2)
        assert [(e["seq"], e["payload"]["text"]) for e in missed] == [(3, "three"), (4, "four")]
        await deltas(wg, key, "five")
        assert (await client.event())["seq"] == 5


async def test_a_reconnect_to_an_unknown_feed_is_told_of_a_gap(wg: WebChatGateway) -> None:
    params = {"session": "gappy", "epoch": "from-another-replica", "last_seq": 41}
    async with wg.connected(**params) as (client, hello):
        assert (hello["resumed"], hello["replayed"]) == (False, 0)
        gap = await client.event()
    assert gap["event"] == "gap" and gap["seq"] == hello["seq"]
    assert gap["payload"]["reason"] == "new_feed"
    ahead = {"session": "gappy", "epoch": hello["epoch"], "last_seq": hello["seq"] + 5}
    async with wg.connected(**ahead) as (client, again):
        assert again["resumed"] is False
        assert (await client.event())["payload"]["reason"] == "unknown_position"


def test_a_socket_that_does_not_read_is_cut_off_once() -> None:
    """Past QUEUE_LIMIT unsent events the listener takes no more and ends its queue with
    None (the socket is then closed with 1013 and the client resumes from its last seq)."""
    listener = Listener()
    for seq in range(1, QUEUE_LIMIT + 10):
        listener.offer(Event(seq, "{}"))
    assert listener.overflowed
    assert listener.queue.qsize() == QUEUE_LIMIT + 1
    queued = [listener.queue.get_nowait() for _ in range(QUEUE_LIMIT + 1)]
    assert queued[-1] is None
    assert [e.seq for e in queued[:-1] if e is not None] == list(range(1, QUEUE_LIMIT + 1))


async def test_a_reconnect_too_far_behind_is_told_of_a_gap(wg: WebChatGateway) -> None:
    async with wg.connected() as (client, hello):
        key = hello["session_key"]
        await deltas(wg, key, *(f"d{i}" for i in range(15)))  # the feed keeps 10
        assert (await events(client, 15))[-1]["seq"] == 15
    params = {"session": hello["session"], "epoch": hello["epoch"]}
    async with wg.connected(**params, last_seq=3) as (client, behind):
        assert behind["resumed"] is False
        gap = await client.event()
        assert (gap["event"], gap["payload"]["reason"]) == ("gap", "too_far_behind")
    async with wg.connected(**params, last_seq=6) as (client, close_enough):
        assert (close_enough["resumed"], close_enough["replayed"]) == (True, 9)
        assert [e["seq"] for e in await events(client, 9)] == list(range(7, 16))


class FakeSessions(sessions_pb2_grpc.SessionsServicer):
    def __init__(self) -> None:
        self.requests: list[sessions_pb2.HistoryRequest] = []

    async def History(
        self, request: sessions_pb2.HistoryRequest, context: grpc.aio.ServicerContext
    ) -> sessions_pb2.HistoryResponse:
        self.requests.append(request)
        said = [{"type": "text", "text": "hi"}]
        answered = [{"type": "text", "text": "hello"}]
        return sessions_pb2.HistoryResponse(
            session_key=request.session_key,
            messages=[
                sessions_pb2.TranscriptMessage(
                    role="user", content_json=json.dumps(said), run_id="r1", created_at_ms=1
                ),
                sessions_pb2.TranscriptMessage(
                    role="assistant", content_json=json.dumps(answered), run_id="r1"
                ),
            ],
        )


async def test_history_comes_from_the_agents_sessions_api(nats_url: str, tmp_path: Path) -> None:
    fake = FakeSessions()
    server = grpc.aio.server()
    sessions_pb2_grpc.add_SessionsServicer_to_server(fake, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        agent = {"agent_addr": f"127.0.0.1:{port}"}
        async with (
            webchat_gateway(nats_url, tmp_path, **agent) as wg,
            wg.connected(session="s1") as (client, _),
        ):
            res = await client.request("history", limit=20)
    finally:
        await server.stop(None)
    assert res["ok"], res
    assert [(r.session_key, r.limit) for r in fake.requests] == [("main:webchat:s1", 20)]
    assert res["payload"]["session_key"] == "main:webchat:s1"
    messages = res["payload"]["messages"]
    assert [(m["role"], m["content"][0]["text"]) for m in messages] == [
        ("user", "hi"),
        ("assistant", "hello"),
    ]
    assert messages[0]["run_id"] == "r1" and messages[0]["created_at_ms"] == 1


async def test_history_without_the_agent_is_a_clear_error(wg: WebChatGateway) -> None:
    async with wg.connected() as (client, _):
        res = await client.request("history")
        assert res["error"]["code"] == "unavailable"
        assert "agent" in res["error"]["message"]
        assert (await client.request("send", text="the socket is still fine"))["ok"]
