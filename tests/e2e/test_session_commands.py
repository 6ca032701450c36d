"""Chat commands end to end, every service a real process against a fake model (OpenAI wire
format): ``/status`` answers without a model call, ``/reset`` makes the next run see no
earlier turn, ``/model`` switches the session's model (checked against what is configured),
``/stop`` interrupts a slow streaming answer, and in a group only an owner (``SB_OWNERS``) may
use them. None of them ever reaches the model or a lane.

One system for the module: each test its own chat (sender or group) and message ids, the fake
model's calls and streaming reset before each."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e import helpers
from tests.e2e.chat import answer_to, say
from tests.e2e.helpers import EventTap, wait_for
from tests.fakes.llm import FakeLLM, FakeRequest, Reply
from tests.support.services import ServiceProcesses, with_fake_model

OWNER = "4242"  # the person of the DM: a user (not in SB_OWNERS), who owns their DM
KEY = f"main:telegram:{OWNER}"
OPERATOR = "777"  # in SB_OWNERS: an owner of the assistant
GROUP_KEY = "main:telegram:group:-100"
STOPPER = "4343"  # the DM of test_stop_interrupts_a_slow_answer
STOP_KEY = f"main:telegram:{STOPPER}"
SLOW_ANSWER = " ".join(f"word{i}" for i in range(40))


def script(req: FakeRequest) -> Reply:
    if req.last_user_text.startswith("long"):
        return Reply(text=SLOW_ANSWER)
    return Reply(text=f"You said: {req.last_user_text}")


@pytest.fixture(scope="module")
def system(
    tmp_path_factory: pytest.TempPathFactory, module_nats_url: str, module_database_url: str
) -> Iterator[ServiceProcesses]:
    env = {
        "SB_OWNERS": f'["telegram:{OPERATOR}"]',
        "SB_TELEGRAM_GROUPS": '["-100"]',  # groups are closed by default (docs/trust.md)
        "SB_GROUP_ACTIVATION": "always",
    }
    home = tmp_path_factory.mktemp("session-commands")
    with with_fake_model(home, module_nats_url, module_database_url, script, env) as procs:
        yield procs


@pytest.fixture
def services(system: ServiceProcesses) -> ServiceProcesses:
    """The module's system, its fake model's calls cleared and its streaming the default."""
    llm: FakeLLM = system.llm  # type: ignore[attr-defined]
    llm.reset()
    llm.text_chunks, llm.stream_delay_s = 4, 0.0  # FakeLLM's defaults
    return system


def user_texts(llm: FakeLLM, n: int) -> list[str]:
    """The user messages of the ``n``-th model call (1-based)."""
    call = llm.wait_for_calls(n, timeout=60)[n - 1]
    return [
        str(m["content"] if isinstance(m["content"], str) else m["content"][0]["text"])
        for m in call.request.messages
        if m["role"] == "user"
    ]


def test_reset_status_and_model_in_a_dm(services: ServiceProcesses) -> None:
    llm: FakeLLM = services.llm  # type: ignore[attr-defined]
    url = services.nats_url
    say(url, OWNER, "my name is Ada", "sc-1")
    llm.wait_for_calls(1, timeout=60)
    with helpers.client(services.url, services.token) as c:
        wait_for(lambda: helpers.final_text(c, KEY), timeout=60, what="the first reply")

        say(url, OWNER, "/status", "sc-2")
        status = answer_to(url, "sc-2")
        assert f"Session: {KEY}" in status
        assert "Model: openai:gpt-4o-mini (the default)" in status
        assert "Queue mode: queue (the default)" in status
        assert "Transcript: 2 messages" in status and "Since the start: runs 1," in status

        say(url, OWNER, "what is my name?", "sc-3")
        assert user_texts(llm, 2) == ["my name is Ada", "what is my name?"]  # remembered

        say(url, OWNER, "/reset", "sc-4")
        assert answer_to(url, "sc-4").startswith("Started a fresh conversation")
        assert helpers.history(c, KEY) == []
        say(url, OWNER, "what is my name now?", "sc-5")
        assert user_texts(llm, 3) == ["what is my name now?"]  # no earlier turn

        say(url, OWNER, "/model anthropic:claude-sonnet-4-5", "sc-6")
        assert "ANTHROPIC_API_KEY" in answer_to(url, "sc-6")  # not configured: refused
        say(url, OWNER, "/model openai:gpt-4o", "sc-7")
        assert answer_to(url, "sc-7") == "This chat now uses openai:gpt-4o."
        say(url, OWNER, "which model?", "sc-8")
        assert llm.wait_for_calls(4, timeout=60)[3].request.model == "gpt-4o"
        wait_for(lambda: helpers.final_text(c, KEY) == "You said: which model?", timeout=60)
        say(url, OWNER, "/new", "sc-9")
        answer_to(url, "sc-9")
        say(url, OWNER, "/status", "sc-10")
        status = answer_to(url, "sc-10")
        assert "Model: openai:gpt-4o (chosen for this chat)" in status
        assert "Transcript: 0 messages" in status and "Since the last reset: runs 0," in status

    # Ten commands, four model calls: none of the commands reached the model.
    assert len(llm.calls) == 4
    assert not any(t.startswith("/") for c in llm.calls for t in [c.request.last_user_text])


def test_stop_interrupts_a_slow_answer(services: ServiceProcesses) -> None:
    llm: FakeLLM = services.llm  # type: ignore[attr-defined]
    url = services.nats_url
    llm.text_chunks = 40
    llm.stream_delay_s = 0.5  # about 20 s for the whole answer
    tap = EventTap(services.url, services.token, STOP_KEY)
    try:
        say(url, STOPPER, "long story please", "st-1")
        tap.wait("assistant", "delta", timeout=60, message_id="st-1")  # it is streaming
        say(url, STOPPER, "/stop", "st-2")
        assert answer_to(url, "st-2") == "Stopped."
        end = tap.wait("lifecycle", "end", timeout=60, message_id="st-1")
        assert end.get("stop_reason") == "interrupted"
        assert SLOW_ANSWER not in end.get("text", "")
        llm.stream_delay_s = 0.0
        say(url, STOPPER, "/stop", "st-3")
        assert answer_to(url, "st-3") == "Nothing is running."
        say(url, STOPPER, "and now?", "st-4")  # the session goes on
        assert tap.wait("lifecycle", "end", timeout=60, message_id="st-4")["text"].endswith(
            "You said: and now?"
        )
    finally:
        tap.close()
    # Both calls recorded (the interrupted one when its stream closed): none lands in the
    # next test's records.
    llm.wait_for_calls(2, timeout=60)


def test_in_a_group_only_an_owner_may_use_them(services: ServiceProcesses) -> None:
    llm: FakeLLM = services.llm  # type: ignore[attr-defined]
    url = services.nats_url
    say(url, OWNER, "hello group", "gr-1", group="-100")
    with helpers.client(services.url, services.token) as c:
        wait_for(lambda: helpers.final_text(c, GROUP_KEY), timeout=60, what="the group's reply")
    say(url, OWNER, "/reset", "gr-2", group="-100")
    assert answer_to(url, "gr-2").startswith("Only the owners")  # a member may not
    say(url, OPERATOR, "/status", "gr-3", group="-100")
    status = answer_to(url, "gr-3")
    assert f"Session: {GROUP_KEY}" in status
    assert "Transcript: 2 messages" in status  # the refused /reset changed nothing
    assert len(llm.calls) == 1
