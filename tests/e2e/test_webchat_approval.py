"""Approving a tool call from WebChat's tool card, in a real browser against the real services:
with an approval rule on ``get_time``, the card shows the waiting call with Approve and Deny;
Approve (the socket's ``decide``, the agent's Approvals.Decide) lets the call run and the answer
come; the buttons go once decided."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.browser import ARGS, CHROMIUM, WAIT_MS, require_browser
from tests.fakes.llm import tool_then_text
from tests.support.services import ServiceProcesses, with_fake_model


@pytest.fixture
def services(tmp_path: Path, nats_url: str, database_url: str) -> Iterator[ServiceProcesses]:
    require_browser()  # before the services start: skipped here, or failed under CI=true
    env = {"SB_TOOL_APPROVALS": '["get_time"]'}
    with with_fake_model(tmp_path, nats_url, database_url, tool_then_text(), env) as procs:
        yield procs


async def test_a_waiting_call_is_approved_from_its_tool_card(services: ServiceProcesses) -> None:
    from playwright.async_api import async_playwright, expect

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = await browser.new_page(viewport={"width": 900, "height": 760})
            await page.goto(f"{services.url}/webchat")
            await page.get_by_label("Gateway token").fill(services.token)
            await page.get_by_role("button", name="Connect").click()
            await expect(page.get_by_role("status")).to_have_text("Connected", timeout=WAIT_MS)
            await page.get_by_role("textbox", name="Message").fill("What time is it?")
            await page.get_by_role("textbox", name="Message").press("Enter")

            card = page.get_by_role("log").locator(".tool-card")
            await expect(card).to_have_attribute("data-status", "waiting", timeout=WAIT_MS)
            approve = card.get_by_role("button", name="Approve")
            await expect(approve).to_be_visible()
            await expect(card.get_by_role("button", name="Deny")).to_be_visible()
            await approve.click()

            await expect(card).to_have_attribute("data-status", "done", timeout=WAIT_MS)
            await expect(card.get_by_role("button", name="Approve")).to_have_count(0)
            answer = page.get_by_role("log").locator(".msg.assistant .text")
            await expect(answer.last).to_contain_text("Tool said:", timeout=WAIT_MS)
        finally:
            await browser.close()
