"""WebChat's Attach button in a real browser (Debian's chromium driven by Playwright): a PNG
attached and sent is shown in the user's message, reaches the model, and the image the model
sends back with the ``message`` tool is shown in the assistant's message, fetched from
``GET /api/media/<sha256>`` with the token (never in a URL)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.browser import ARGS, CHROMIUM, WAIT_MS, require_browser
from tests.e2e.media_scripts import send_back
from tests.support import media_files
from tests.support.services import ServiceProcesses, with_fake_model


@pytest.fixture
def services(tmp_path: Path, nats_url: str, database_url: str) -> Iterator[ServiceProcesses]:
    require_browser()  # before the services start: skipped here, or failed under CI=true
    with with_fake_model(tmp_path, nats_url, database_url, send_back, {}) as procs:
        yield procs


async def test_an_attached_image_comes_back_in_the_page(services: ServiceProcesses) -> None:
    from playwright.async_api import FilePayload, Request, async_playwright, expect

    requested: list[Request] = []
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = await browser.new_page()
            page.on("request", lambda r: requested.append(r))
            await page.goto(f"{services.url}/webchat")
            await page.get_by_label("Gateway token").fill(services.token)
            await page.get_by_role("button", name="Connect").click()
            await expect(page.get_by_role("status")).to_have_text("Connected", timeout=WAIT_MS)

            png = FilePayload(name="dot.png", mimeType="image/png", buffer=media_files.png(40, 20))
            await page.locator("#attach").set_input_files(png)
            await expect(page.locator("#attached")).to_have_text("dot.png")
            await page.get_by_role("textbox", name="Message").fill("what is this?")
            await page.get_by_role("button", name="Send").click()

            log = page.get_by_role("log")
            await expect(log.locator(".msg.user img.media")).to_have_count(1)
            back = log.locator(".msg.assistant img.media")
            await expect(back).to_have_count(1, timeout=WAIT_MS)
            shown = re.compile(r"^data:image/png;base64,[A-Za-z0-9+/=]{40,}$")
            await expect(back).to_have_attribute("src", shown, timeout=WAIT_MS)
        finally:
            await browser.close()
    fetched = [r for r in requested if "/api/media/" in r.url]
    assert len(fetched) == 1 and services.token not in fetched[0].url
