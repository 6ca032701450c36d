"""Where a session's queue mode comes from, against the real services: the agent's default
(SB_QUEUE_MODE, here `collect` with SB_COLLECT_DEBOUNCE_MS), the channel's (the router's
SB_CHANNEL_QUEUE_MODES, here `followup` for `webhook`) and the session's override (PATCH
/api/sessions/{key}); and what `collect` and `followup` do end to end.

Nothing here measures time: each test waits until the pipeline is done with what it sent (see
:mod:`tests.lanes.pipeline`), then reads the transcripts (a run id per message) and OUTBOUND.

One system for the module: each test its own sessions and message ids, the fake model's calls
reset before each, and OUTBOUND read as the parts that appeared during the test."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Iterator

import httpx
import nats
import pytest

from switchboard.v1 import messages_pb2
from tests.fakes.llm import FakeLLM, FakeRequest, Reply
from tests.lanes.pipeline import chat_message, publish_chat, settle
from tests.support.services import ServiceProcesses, fresh_model, with_fake_model
from tests.support.streams import outbound_parts

# Long enough for two or more OUTBOUND parts (300-1000 chars each), so "every part" means more
# than one.
FILLER = " ".join(f"Filler sentence number {i} of this answer." for i in range(40))
SETTINGS = {
    "SB_QUEUE_MODE": "collect",  # the agent's default
    # Not the default (2000), and wide enough that posts one after another on a loaded machine
    # still fall inside it.
    "SB_COLLECT_DEBOUNCE_MS": "1500",
    "SB_CHANNEL_QUEUE_MODES": '{"webhook": "followup"}',  # the router's, for one channel
}


def answer(req: FakeRequest) -> Reply:
    return Reply(text=f"Answer to {req.last_user_text}. {FILLER}")


@pytest.fixture(scope="module")
def system(
    tmp_path_factory: pytest.TempPathFactory, module_nats_url: str, module_database_url: str
) -> Iterator[ServiceProcesses]:
    home = tmp_path_factory.mktemp("mode-settings")
    with with_fake_model(home, module_nats_url, module_database_url, answer, SETTINGS) as procs:
        yield procs


@pytest.fixture
def services(system: ServiceProcesses) -> ServiceProcesses:
    fresh_model(system)
    return system


def client(services: ServiceProcesses) -> httpx.Client:
    headers = {"Authorization": f"Bearer {services.token}"}
    return httpx.Client(base_url=services.url, headers=headers, timeout=10)


def history(c: httpx.Client, key: str) -> list[dict]:
    r = c.get(f"/api/sessions/{key}/history")
    assert r.status_code == 200, r.text
    return list(r.json()["messages"])


def runs(messages: list[dict]) -> list[list[dict]]:
    """The transcript's messages grouped by run, in order."""
    by_run: dict[str, list[dict]] = {}
    for m in messages:
        by_run.setdefault(m["run_id"], []).append(m)
    return list(by_run.values())


def user_texts(run: list[dict]) -> list[str]:
    """The text blocks of a run's user turn (one per lane item it answers)."""
    assert run[0]["role"] == "user", run
    return [b["text"] for b in run[0]["content"] if b["type"] == "text"]


def answered(run: list[dict]) -> bool:
    return run[-1]["role"] == "assistant" and run[-1]["content"][0]["text"].startswith("Answer")


def outbound(nats_url: str) -> list[messages_pb2.OutboundMessage]:
    async def read() -> list[messages_pb2.OutboundMessage]:
        nc = await nats.connect(nats_url)
        try:
            return [part for _, part in await outbound_parts(nc.jetstream())]
        finally:
            await nc.close()

    return asyncio.run(read())


def new_parts(
    nats_url: str, before: list[messages_pb2.OutboundMessage]
) -> list[messages_pb2.OutboundMessage]:
    """The parts on OUTBOUND now that were not there ``before`` (other tests' stay there)."""
    return [part for part in outbound(nats_url) if part not in before]


def publish(nats_url: str, *messages: messages_pb2.InboundMessage) -> None:
    """Publish chat messages back to back (microseconds apart: well inside any window)."""

    async def send() -> None:
        nc = await nats.connect(nats_url)
        try:
            for message in messages:
                await publish_chat(nc.jetstream(), message)
        finally:
            await nc.close()

    asyncio.run(send())


def test_collect_window_merges_a_burst_and_a_later_message_starts_a_new_run(
    services: ServiceProcesses,
) -> None:
    """The agent's default (collect, 1.5 s window) applies to an API session with no override
    and no channel mode: three messages posted one after another become one run whose user turn
    holds each text in order; a message posted after that run answered starts a second run.
    Fails if SB_QUEUE_MODE were not applied (queue: three runs), if collect ran on the first
    message without waiting for the window (the burst split), or if the webhook channel's
    followup leaked to this channel (three runs)."""
    llm: FakeLLM = services.llm  # type: ignore[attr-defined]
    nats_url = services.env["SB_NATS_URL"]
    key = "main:api:burst"
    with client(services) as c:
        posting = time.monotonic()
        for text in ("first", "second", "third"):
            r = c.post(f"/api/sessions/{key}/messages", json={"text": text})
            assert r.status_code == 202, r.text
        posting = time.monotonic() - posting  # only to explain a failure (no time is asserted)
        settle(nats_url)  # routed, and every lane item answered
        burst = runs(history(c, key))
        calls_after_burst = len(llm.calls)
        r = c.post(f"/api/sessions/{key}/messages", json={"text": "later"})
        assert r.status_code == 202, r.text
        settle(nats_url)
        after = runs(history(c, key))

    assert len(burst) == 1, (
        f"{[user_texts(run) for run in burst]} (posting all three took {posting:.2f} s; the "
        f"window is {SETTINGS['SB_COLLECT_DEBOUNCE_MS']} ms)"
    )
    assert user_texts(burst[0]) == ["first", "second", "third"]
    assert answered(burst[0]) and calls_after_burst == 1  # one model call answered all three
    assert len(after) == 2, [user_texts(run) for run in after]
    assert after[0] == burst[0]
    assert user_texts(after[1]) == ["later"] and answered(after[1])
    assert len(llm.calls) == 2


def test_channel_mode_applies_to_its_channel_only(services: ServiceProcesses) -> None:
    """In one run of the services, the router's `webhook: followup` beats the agent's collect on
    webhook (two messages published microseconds apart still get a run and a threaded reply
    each) and leaves the API channel on the agent's collect (two messages, one run). Fails if
    the router did not put the channel's mode on the lane item, or put it on every channel."""
    nats_url = services.env["SB_NATS_URL"]
    chat, api = "main:webhook:user-1", "main:api:mixed"
    before = outbound(nats_url)
    publish(
        nats_url,
        chat_message(chat, "chat-1", "chat one"),
        chat_message(chat, "chat-2", "chat two"),
    )

    async def post_both() -> None:  # concurrently: well inside the window
        headers = {"Authorization": f"Bearer {services.token}"}
        async with httpx.AsyncClient(base_url=services.url, headers=headers) as ac:
            replies = await asyncio.gather(
                *(
                    ac.post(f"/api/sessions/{api}/messages", json={"text": t})
                    for t in ("api one", "api two")
                )
            )
        assert all(r.status_code == 202 for r in replies), [r.text for r in replies]

    asyncio.run(post_both())
    settle(nats_url)
    with client(services) as c:
        chat_runs = runs(history(c, chat))
        api_runs = runs(history(c, api))
    parts = new_parts(nats_url, before)

    # webhook: followup, one run per message
    assert [user_texts(run) for run in chat_runs] == [["chat one"], ["chat two"]]
    assert all(answered(run) for run in chat_runs)
    for message_id in ("chat-1", "chat-2"):
        mine = [p for p in parts if list(p.message_ids) == [message_id]]
        assert mine and all(p.reply_to == message_id for p in mine), mine
    # api: the agent's collect, one run for both
    assert len(api_runs) == 1, [user_texts(run) for run in api_runs]
    assert sorted(user_texts(api_runs[0])) == ["api one", "api two"]
    assert answered(api_runs[0])
    assert {p.session_key for p in parts} == {chat}  # API replies go out as events only


def test_followup_threads_each_reply_and_queue_does_not(services: ServiceProcesses) -> None:
    """On a chat channel, every OUTBOUND part of a `followup` reply names the message it
    answers (reply_to) and its thread (the message's own thread, else one started on the
    message); a session switched to `queue` (its override beating the channel's followup)
    gets one run per message too but unthreaded parts, staying in the thread a message came in.
    Fails if the runner dropped the mode's threading, or threaded every reply."""
    nats_url = services.env["SB_NATS_URL"]
    follow, plain = "main:webhook:user-2", "main:webhook:user-3"
    before = outbound(nats_url)
    with client(services) as c:
        r = c.patch(f"/api/sessions/{plain}", json={"queue_mode": "queue"})
        assert r.status_code == 200 and r.json()["queue_mode"] == "queue", r.text
    publish(
        nats_url,
        chat_message(follow, "f-1", "follow one"),
        chat_message(follow, "f-2", "follow two", thread_id="t-follow"),
        chat_message(plain, "q-1", "plain one"),
        chat_message(plain, "q-2", "plain two", thread_id="t-plain"),
    )
    settle(nats_url)
    by_message: dict[tuple[str, ...], list[messages_pb2.OutboundMessage]] = defaultdict(list)
    for part in new_parts(nats_url, before):
        by_message[tuple(part.message_ids)].append(part)

    expected = {  # message id: (reply_to, thread_id) of each of its reply's parts
        "f-1": ("f-1", "f-1"),
        "f-2": ("f-2", "t-follow"),
        "q-1": ("", ""),
        "q-2": ("", "t-plain"),
    }
    assert sorted(by_message) == [(mid,) for mid in sorted(expected)]  # a run per message
    for message_id, (reply_to, thread_id) in expected.items():
        parts = by_message[(message_id,)]
        assert len(parts) >= 2 and len({p.run_id for p in parts}) == 1, parts
        assert sorted(p.part for p in parts) == list(range(parts[0].parts)), parts
        got = [(p.reply_to, p.thread_id) for p in parts]
        assert got == [(reply_to, thread_id)] * len(parts), (message_id, got)
