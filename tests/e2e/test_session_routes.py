"""Sessions.Reset, Delete and Abort through the gateway's routes, every service a real process
against a fake model (OpenAI wire format).

What a reset means for the lane: the cursor stays, so a reset during a run with more messages
queued behind it loses none of them and answers none twice. The run in progress finishes (its
turn is not remembered in the new transcript); the queued ones run against the fresh one.

One system for the module: each test its own session, the fake model reset before each."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.e2e import helpers
from tests.e2e.helpers import EventTap, wait_for
from tests.fakes.llm import FakeLLM, FakeRequest, Reply
from tests.support.services import ServiceProcesses, fresh_model, with_fake_model

KEY = "main:api:routes"
ABORT_KEY = "main:api:routes-abort"  # test_abort_and_delete's
SLOW_ANSWER = " ".join(f"word{i}" for i in range(40))


def script(req: FakeRequest) -> Reply:
    if req.last_user_text.startswith("long"):
        return Reply(text=SLOW_ANSWER)
    return Reply(text=f"You said: {req.last_user_text}")


@pytest.fixture(scope="module")
def system(
    tmp_path_factory: pytest.TempPathFactory, module_nats_url: str, module_database_url: str
) -> Iterator[ServiceProcesses]:
    home = tmp_path_factory.mktemp("session-routes")
    with with_fake_model(home, module_nats_url, module_database_url, script, {}) as procs:
        yield procs


@pytest.fixture
def services(system: ServiceProcesses) -> ServiceProcesses:
    fresh_model(system)
    return system


def post(c: httpx.Client, text: str, key: str = KEY) -> str:
    r = c.post(f"/api/sessions/{key}/messages", json={"text": text})
    assert r.status_code == 202, r.text
    return str(r.json()["message_id"])


def user_texts(llm: FakeLLM, text: str) -> list[str]:
    """The user messages the model saw in the call answering ``text``."""
    call = wait_for(
        lambda: next((c for c in llm.calls if c.request.last_user_text == text), None),
        timeout=60,
        what=f"the model call for {text!r}",
    )
    return [
        str(m["content"] if isinstance(m["content"], str) else m["content"][0]["text"])
        for m in call.request.messages
        if m["role"] == "user"
    ]


def test_reset_during_a_run_loses_and_repeats_nothing(services: ServiceProcesses) -> None:
    llm: FakeLLM = services.llm  # type: ignore[attr-defined]
    with helpers.client(services.url, services.token) as c:
        post(c, "one")
        wait_for(lambda: helpers.final_text(c, KEY) == "You said: one", timeout=60)
        r = c.post(f"/api/sessions/{KEY}/reset")
        assert r.status_code == 200, r.text
        assert r.json() == {"session_key": KEY, "messages_removed": 2}
        assert helpers.history(c, KEY) == []

        # "a" streams slowly; "b" and "c" wait behind it on the lane when the reset comes.
        llm.text_chunks, llm.stream_delay_s = 10, 0.4
        tap = EventTap(services.url, services.token, KEY)
        try:
            first = post(c, "a")
            post(c, "b")
            post(c, "c")
            tap.wait("assistant", "delta", timeout=60, message_id=first)
            assert c.post(f"/api/sessions/{KEY}/reset").status_code == 200
            llm.stream_delay_s = 0.0
            wait_for(lambda: helpers.final_text(c, KEY) == "You said: c", timeout=90)
        finally:
            tap.close()
        asked = [call.request.last_user_text for call in llm.calls]
        assert asked == ["one", "a", "b", "c"]  # each answered once, in order, none lost
        assert user_texts(llm, "b") == ["b"]  # the queued one ran against the fresh transcript
        texts = [m["content"][0]["text"] for m in helpers.history(c, KEY)]
        assert texts == ["b", "You said: b", "c", "You said: c"]  # "a" ran, but is forgotten
        runs = helpers.run_rows(services.env["SB_DATABASE_URL"], KEY)
        assert [r["status"] for r in runs] == ["completed"] * 4

        assert c.post("/api/sessions/main:api:nobody/reset").status_code == 404
        bad = c.post("/api/sessions/bad%20key/reset")
        assert bad.status_code == 400 and "session key" in bad.text


def test_abort_and_delete(services: ServiceProcesses) -> None:
    llm: FakeLLM = services.llm  # type: ignore[attr-defined]
    with helpers.client(services.url, services.token) as c:
        assert c.post(f"/api/sessions/{ABORT_KEY}/abort").json() == {
            "session_key": ABORT_KEY,
            "aborted": False,
        }
        llm.text_chunks, llm.stream_delay_s = 40, 0.5  # about 20 s for the whole answer
        tap = EventTap(services.url, services.token, ABORT_KEY)
        try:
            long = post(c, "long story please", ABORT_KEY)
            tap.wait("assistant", "delta", timeout=60, message_id=long)
            r = c.post(f"/api/sessions/{ABORT_KEY}/abort")
            assert r.status_code == 200 and r.json()["aborted"] is True
            end = tap.wait("lifecycle", "end", timeout=60, message_id=long)
            assert end["stop_reason"] == "interrupted"
        finally:
            tap.close()
        llm.stream_delay_s = 0.0
        post(c, "after the abort", ABORT_KEY)
        wait_for(
            lambda: helpers.final_text(c, ABORT_KEY) == "You said: after the abort", timeout=60
        )

        patched = c.patch(f"/api/sessions/{ABORT_KEY}", json={"model": "openai:gpt-4o"})
        assert patched.status_code == 200 and patched.json()["model"] == "openai:gpt-4o"
        refused = c.patch(f"/api/sessions/{ABORT_KEY}", json={"model": "nowhere:x"})
        assert refused.status_code == 400 and "Unknown model provider" in refused.text

        before = len(helpers.history(c, ABORT_KEY))
        r = c.delete(f"/api/sessions/{ABORT_KEY}")
        assert r.status_code == 200, r.text
        assert r.json()["messages_removed"] == before > 0
        assert helpers.history(c, ABORT_KEY) == []
        assert c.delete("/api/sessions/main:api:nobody").status_code == 404
        calls = len(llm.calls)
        post(c, "a fresh start", ABORT_KEY)
        wait_for(lambda: helpers.final_text(c, ABORT_KEY) == "You said: a fresh start", timeout=60)
        # One more model call: nothing the lane held before the delete was answered again,
        # and the deleted session's model choice went with it.
        assert len(llm.calls) == calls + 1
        assert llm.calls[-1].request.model == "gpt-4o-mini"
        assert user_texts(llm, "a fresh start") == ["a fresh start"]
    # The interrupted call is recorded too (when its stream closed): none lands in another
    # test's records.
    wait_for(
        lambda: any(c.request.last_user_text == "long story please" for c in llm.calls),
        timeout=60,
        what="the interrupted call's record",
    )
