"""WhatsApp end to end: every service as a real process, the gateway configured by
SB_WHATSAPP_* against the fake Graph API, the agent against the fake model (a tool call, then
text). Meta's verification GET is answered with the challenge; a signed message event POSTed to
the webhook is marked read and answered with one text message to its sender however often Meta
delivers it; an unknown sender (DM policy ``pairing``) gets a pairing code and nothing runs."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import nats
import pytest

from tests.e2e.helpers import wait_for
from tests.fakes.llm import FakeLLM, tool_then_text
from tests.fakes.whatsapp import FakeWhatsApp, event, text_message
from tests.lanes.pipeline import wait_settled
from tests.support.services import ServiceProcesses, with_fake_model

HOOK = "/channels/whatsapp/default"
KNOWN = "15551234567"
STRANGER = "15559876543"


@pytest.fixture
def wa() -> Iterator[FakeWhatsApp]:
    with FakeWhatsApp() as fake:
        yield fake


@pytest.fixture
def services(
    tmp_path: Path, nats_url: str, database_url: str, wa: FakeWhatsApp
) -> Iterator[ServiceProcesses]:
    env = {
        "SB_WHATSAPP_ACCESS_TOKEN": wa.token,
        "SB_WHATSAPP_APP_SECRET": wa.app_secret,
        "SB_WHATSAPP_VERIFY_TOKEN": wa.verify_token,
        "SB_WHATSAPP_PHONE_NUMBER_ID": wa.phone_number_id,
        "SB_WHATSAPP_API_BASE": wa.base_url,
        "SB_WHATSAPP_DM_POLICY": "pairing",
        "SB_WHATSAPP_ALLOW_FROM": f'["{KNOWN}"]',
        "SB_LOG_LEVEL": "INFO",
    }
    with with_fake_model(tmp_path, nats_url, database_url, tool_then_text(), env) as procs:
        yield procs


def post(services: ServiceProcesses, wa: FakeWhatsApp, message: dict[str, Any]) -> None:
    """POST a message event signed as Meta signs it; it must get its 200."""
    body = event(wa.phone_number_id, [message])
    headers = {"content-type": "application/json", "x-hub-signature-256": wa.sign(body)}
    response = httpx.post(services.url + HOOK, content=body, headers=headers, timeout=10)
    assert response.status_code == 200, response.text


def all_delivered(nats_url: str, timeout: float = 60.0) -> None:
    """Until every message so far is routed and answered and OUTBOUND is empty."""

    async def run() -> None:
        nc = await nats.connect(nats_url)
        try:
            js = nc.jetstream()
            await wait_settled(js, timeout)
            deadline = time.monotonic() + timeout
            while (await js.stream_info("OUTBOUND")).state.messages:
                assert time.monotonic() < deadline, "OUTBOUND never emptied"
                await asyncio.sleep(0.1)
        finally:
            await nc.close()

    asyncio.run(run())


def test_a_message_is_answered_once_and_a_stranger_gets_a_pairing_code(
    services: ServiceProcesses, wa: FakeWhatsApp
) -> None:
    llm: FakeLLM = services.llm  # type: ignore[attr-defined]
    nats_url = services.env["SB_NATS_URL"]

    # Meta's check of the webhook URL.
    params = {"hub.mode": "subscribe", "hub.verify_token": wa.verify_token, "hub.challenge": "77"}
    answer = httpx.get(services.url + HOOK, params=params, timeout=10)
    assert (answer.status_code, answer.text) == (200, "77")
    params["hub.verify_token"] = "guess"
    assert httpx.get(services.url + HOOK, params=params, timeout=10).status_code == 403

    # A message, and Meta's redelivery of it (before and after the reply went out).
    message = text_message(KNOWN, "what time is it?")
    post(services, wa, message)
    post(services, wa, message)
    [reply] = wa.wait_for_messages(1, timeout=60)
    post(services, wa, message)
    all_delivered(nats_url)
    assert wa.sent == [reply]  # exactly once
    assert (reply.body["to"], reply.body["type"]) == (KNOWN, "text")
    assert reply.body["text"]["body"].startswith("Tool said: ")
    assert len(llm.calls) == 2  # one run: the tool call, then the text
    assert llm.calls[0].request.last_user_text.endswith("what time is it?")
    wait_for(lambda: message["id"] in [r.message_id for r in wa.reads], timeout=30, what="read")

    # A sender not allowed: a pairing code comes back, and nothing runs.
    post(services, wa, text_message(STRANGER, "hello?"))
    wait_for(lambda: any(s.body["to"] == STRANGER for s in wa.sent), timeout=60, what="the code")
    all_delivered(nats_url)
    [code] = [s for s in wa.sent if s.body["to"] == STRANGER]
    assert "pair" in code.body["text"]["body"].lower()
    assert len(llm.calls) == 2

    # The access token and the app secret never reached the gateway's log.
    log = (services.home / "logs" / "gateway.log").read_text(errors="replace")
    assert wa.token not in log and wa.app_secret not in log
