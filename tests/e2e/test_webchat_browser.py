"""WebChat in a real browser against the real services (fake model calling a tool, then
answering as a slow stream): Debian's Chromium, driven by Playwright, opens /webchat, takes the
gateway token once, sends a message, shows the streamed answer and a tool card for the call,
after a reload shows the conversation again from the history (the token kept in the tab's
sessionStorage, never in a URL), and after a restart of the gateway reconnects by itself and
goes on. A screenshot goes to test-artifacts/webchat.png."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.browser import ARGS, CHROMIUM, WAIT_MS, require_browser
from tests.fakes.llm import FakeLLM, tool_then_text
from tests.support.services import ServiceProcesses, with_fake_model

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
QUESTION = "What time is it in UTC?"
FOLLOW_UP = "And now?"


@pytest.fixture
def services(tmp_path: Path, nats_url: str, database_url: str) -> Iterator[ServiceProcesses]:
    require_browser()  # before the services start: skipped here, or failed under CI=true
    with with_fake_model(tmp_path, nats_url, database_url, tool_then_text(), {}) as procs:
        llm: FakeLLM = procs.llm  # type: ignore[attr-defined]
        # Slow stream: the answer's pieces come 0.2 s apart, each its own delta event (the
        # agent coalesces only what comes within 30 ms).
        llm.stream_delay_s = 0.2
        yield procs


async def test_webchat_in_a_browser(services: ServiceProcesses) -> None:
    from playwright.async_api import WebSocket, async_playwright, expect

    received: list[dict[str, Any]] = []
    sockets: list[str] = []

    def watch(ws: WebSocket) -> None:
        sockets.append(ws.url)

        def on_frame(payload: str | bytes) -> None:
            received.append(json.loads(payload))

        ws.on("framereceived", on_frame)

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = await browser.new_page(viewport={"width": 900, "height": 760})
            page.on("websocket", watch)
            await page.goto(f"{services.url}/webchat")

            # A wrong token is refused (the socket closed with 4401) and asked for again.
            await page.get_by_label("Gateway token").fill("not-the-token")
            await page.get_by_role("button", name="Connect").click()
            await expect(page.get_by_role("alert")).to_have_text(
                "The gateway refused this token.", timeout=WAIT_MS
            )
            # The token, once.
            await page.get_by_label("Gateway token").fill(services.token)
            await page.get_by_role("button", name="Connect").click()
            await expect(page.get_by_role("status")).to_have_text("Connected", timeout=WAIT_MS)

            # A message: its tool card, then the streamed answer.
            await page.get_by_role("textbox", name="Message").fill(QUESTION)
            await page.get_by_role("textbox", name="Message").press("Enter")
            log = page.get_by_role("log")
            await expect(log.locator(".msg.user").first).to_contain_text(QUESTION)
            card = log.locator(".tool-card")
            await expect(card).to_have_count(1, timeout=WAIT_MS)
            await expect(card.locator(".tool-name")).to_have_text("get_time")
            await expect(card.locator(".tool-args")).to_contain_text("UTC")
            await expect(card).to_have_attribute("data-status", "done", timeout=WAIT_MS)
            answer = log.locator(".msg.assistant .text")
            await expect(answer.last).to_contain_text("Tool said:", timeout=WAIT_MS)
            await expect(log.locator(".msg.assistant")).to_have_attribute(
                "aria-busy", "false", timeout=WAIT_MS
            )
            streamed = [f for f in received if f.get("event") == "assistant"]
            assert len(streamed) > 1, f"the answer did not stream: {streamed}"
            seqs = [f["seq"] for f in received if f.get("type") == "event"]
            assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), seqs
            shown = await answer.last.text_content()
            assert shown == "".join(f["payload"]["text"] for f in streamed)

            # Reload: no token asked again; the history shows the same conversation.
            await page.reload()
            await expect(page.get_by_role("status")).to_have_text("Connected", timeout=WAIT_MS)
            await expect(page.get_by_label("Gateway token")).to_be_hidden()
            await expect(log.locator(".msg.user")).to_have_text([f"You{QUESTION}"])
            await expect(card).to_have_count(1, timeout=WAIT_MS)
            await expect(card.locator(".tool-name")).to_have_text("get_time")
            await expect(card).to_have_attribute("data-status", "done")
            await expect(card.locator(".tool-result")).not_to_be_empty()
            await expect(answer.last).to_have_text(shown or "")

            assert services.token not in page.url
            assert sockets and all(services.token not in url for url in sockets)
            kept = await page.evaluate("sessionStorage.getItem('switchboard.webchat.token')")
            assert kept == services.token

            # The gateway restarts: the page reconnects (backoff), is told of a gap (the new
            # process keeps no events of the old one), reloads the history and goes on.
            reconnects = len(sockets)
            await asyncio.to_thread(services.restart, "gateway")
            await expect(page.get_by_role("status")).to_have_text("Connected", timeout=WAIT_MS)
            assert len(sockets) > reconnects
            await expect(log.locator(".msg.user")).to_have_count(1)
            await page.get_by_role("textbox", name="Message").fill(FOLLOW_UP)
            await page.get_by_role("button", name="Send").click()
            await expect(log.locator(".msg.user").last).to_contain_text(FOLLOW_UP)
            await expect(card).to_have_count(2, timeout=WAIT_MS)
            await expect(card.last).to_have_attribute("data-status", "done", timeout=WAIT_MS)
            await expect(answer).to_have_count(2, timeout=WAIT_MS)
            await expect(answer.last).to_contain_text("Tool said:", timeout=WAIT_MS)
            await expect(log.locator(".msg.assistant").last).to_have_attribute(
                "aria-busy", "false", timeout=WAIT_MS
            )
            gaps = [f for f in received if f.get("event") == "gap"]
            assert [g["payload"]["reason"] for g in gaps] == ["new_feed"], gaps

            ARTIFACTS.mkdir(exist_ok=True)
            await page.screenshot(path=str(ARTIFACTS / "webchat.png"), full_page=True)
        finally:
            await browser.close()


async def test_a_message_sent_while_the_history_loads_stays_on_the_page(
    services: ServiceProcesses,
) -> None:
    """The page loads the history after it connects and redraws the conversation from it. A
    message sent before the history arrived (a slow gateway under load) vanished from the page
    while its answer came (seen once in CI). Here the page's history request is held back until
    the message is on the page, then let through before its run commits."""
    from playwright.async_api import WebSocketRoute, async_playwright, expect

    held: list[str | bytes] = []
    servers: list[WebSocketRoute] = []

    def route(ws: WebSocketRoute) -> None:
        server = ws.connect_to_server()
        servers.append(server)

        def from_page(message: str | bytes) -> None:
            if json.loads(message).get("method") == "history":
                held.append(message)  # sent on by the test
            else:
                server.send(message)

        ws.on_message(from_page)

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = await browser.new_page()
            await page.route_web_socket("**/webchat/ws", route)
            await page.goto(f"{services.url}/webchat")
            await page.get_by_label("Gateway token").fill(services.token)
            await page.get_by_role("button", name="Connect").click()
            await expect(page.get_by_role("status")).to_have_text("Connected", timeout=WAIT_MS)
            for _ in range(600):  # the page asks for the history right after connecting
                if held:
                    break
                await asyncio.sleep(0.1)
            assert held, "the page never asked for the history"

            await page.get_by_role("textbox", name="Message").fill(QUESTION)
            await page.get_by_role("textbox", name="Message").press("Enter")
            log = page.get_by_role("log")
            await expect(log.locator(".msg.user")).to_have_count(1, timeout=WAIT_MS)
            # The history now, while the run is still going (its answer streams slowly): it
            # does not hold the question yet, and the page redraws from it.
            servers[-1].send(held.pop())
            await expect(log).to_contain_text("Tool said:", timeout=WAIT_MS)
            await expect(log.locator(".msg.user")).to_have_count(1)
            await expect(log.locator(".msg.user")).to_contain_text(QUESTION)
        finally:
            await browser.close()
