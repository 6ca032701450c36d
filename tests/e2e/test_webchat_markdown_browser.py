"""WebChat's Markdown, conversations, themes and accessibility in a real browser (Debian's
Chromium driven by Playwright) against the real services and a fake model: a reply with a
table, a highlighted code block whose Copy button puts the code on the clipboard and a link that
opens in a new tab without an opener; a reply full of XSS payloads rendered inert; the sidebar's
two conversations, switched between and one renamed (kept after a reload); the dark mode toggle
(remembered); a phone's width (360 px) without horizontal scrolling; axe-core without serious
or critical violations; screenshots in light and dark mode (the directory is printed); a voice
note recorded from Chromium's fake microphone, sent like an attachment and transcribed (the
transcription API is the only fake besides the model).

One system for the module; each test its own browser context."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from websockets.asyncio.client import connect

from tests.e2e.browser import ARGS, CHROMIUM, WAIT_MS, require_browser
from tests.fakes.llm import FakeRequest, Reply
from tests.fakes.transcription import FakeTranscription
from tests.support.services import ServiceProcesses, fresh_model, with_fake_model

if TYPE_CHECKING:
    from playwright.async_api import Browser, Page

AXE = Path(__file__).parent / "vendor" / "axe.min.js"
CODE = 'def greet(name):\n    return f"Hello, {name}!"'
MARKDOWN_REPLY = (
    "Here is a **table**:\n\n"
    "| planet | moons |\n|--------|------:|\n| Mars | 2 |\n| Jupiter | 95 |\n\n"
    f"And some code:\n\n```python\n{CODE}\n```\n\n"
    "Read more at [the docs](https://example.com/docs)."
)
XSS_REPLY = (
    "Careful <script>window.__x = 1</script>\n\n"
    '<img src=x onerror="window.__y = 1">\n\n'
    "[a](javascript:window.__z=1) and "
    '<a href="javascript:window.__w=1">raw link</a> and '
    '<a href="JaVaScRiPt:alert(3)">mixed case</a> and [b](javascript:alert(4))'
)


SPOKEN = "spoken words from the microphone"
FAKE_MICROPHONE = ["--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream"]


def script(req: FakeRequest) -> Reply:
    text = req.last_user_text
    if SPOKEN in text:
        return Reply(text="I heard your voice note.")
    if text.startswith("markdown"):
        return Reply(text=MARKDOWN_REPLY)
    if text.startswith("xss"):
        return Reply(text=XSS_REPLY)
    return Reply(text=f"You said: {text}")


@pytest.fixture(scope="module")
def system(
    tmp_path_factory: pytest.TempPathFactory, module_nats_url: str, module_database_url: str
) -> Iterator[ServiceProcesses]:
    require_browser()  # before the services start: skipped here, or failed under CI=true
    home = tmp_path_factory.mktemp("webchat-markdown")
    with FakeTranscription(require_key="tr-webchat", default_text=SPOKEN) as transcription:
        env = {
            "SB_TRANSCRIPTION_BASE_URL": transcription.base_url,
            "SB_TRANSCRIPTION_API_KEY": "tr-webchat",
        }
        with with_fake_model(home, module_nats_url, module_database_url, script, env) as procs:
            procs.transcription = transcription  # type: ignore[attr-defined]
            yield procs


@pytest.fixture
def services(system: ServiceProcesses) -> ServiceProcesses:
    fresh_model(system)
    return system


@asynccontextmanager
async def chromium(*args: str) -> AsyncIterator[Browser]:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=str(CHROMIUM), args=[*ARGS, *args])
        try:
            yield browser
        finally:
            await browser.close()


async def open_chat(browser: Browser, services: ServiceProcesses, **options: Any) -> Page:
    """A new context's page on /webchat, connected with the token."""
    from playwright.async_api import expect

    options.setdefault("viewport", {"width": 1100, "height": 800})
    context = await browser.new_context(**options)
    page = await context.new_page()
    await page.goto(f"{services.url}/webchat")
    await page.get_by_label("Gateway token").fill(services.token)
    await page.get_by_role("button", name="Connect").click()
    await expect(page.get_by_role("status")).to_have_text("Connected", timeout=WAIT_MS)
    return page


async def ask(page: Page, text: str, expected: str) -> None:
    """Send ``text``; wait for a finished answer containing ``expected``."""
    from playwright.async_api import expect

    box = page.get_by_role("textbox", name="Message")
    await box.fill(text)
    await box.press("Enter")
    answer = page.get_by_role("log").locator(".msg.assistant").last
    await expect(answer).to_contain_text(expected, timeout=WAIT_MS)
    await expect(answer).to_have_attribute("aria-busy", "false", timeout=WAIT_MS)


async def test_a_reply_with_a_table_code_and_a_link(services: ServiceProcesses) -> None:
    from playwright.async_api import expect

    async with chromium() as browser:
        page = await open_chat(browser, services, permissions=["clipboard-read", "clipboard-write"])
        await ask(page, "markdown please", "Read more at")
        reply = page.get_by_role("log").locator(".msg.assistant .md").last

        await expect(reply.locator("strong")).to_have_text("table")
        table = reply.locator("table")
        await expect(table.locator("th")).to_have_text(["planet", "moons"])
        await expect(table.locator("tbody tr")).to_have_count(2)
        await expect(table.locator("tbody tr").last.locator("td")).to_have_text(["Jupiter", "95"])

        code = reply.locator(".md-code code")
        await expect(code).to_have_class("language-python hljs")
        assert await code.text_content() == CODE + "\n"
        # Highlighted: the keywords and the string are spans of highlight.js's classes.
        await expect(code.locator(".hljs-keyword").first).to_have_text("def")
        await expect(code.locator(".hljs-string")).to_have_count(1)
        copy = reply.get_by_role("button", name="Copy code")
        await copy.click()
        await expect(reply.get_by_role("button", name="Copied")).to_have_text("Copied")
        copied = await page.evaluate("navigator.clipboard.readText()")
        assert copied.rstrip("\n") == CODE

        link = reply.get_by_role("link", name="the docs")
        await expect(link).to_have_attribute("href", "https://example.com/docs")
        await expect(link).to_have_attribute("target", "_blank")
        rel = await link.get_attribute("rel")
        assert rel is not None and {"noopener", "noreferrer"} <= set(rel.split())


async def test_a_reply_with_xss_payloads_renders_inert(services: ServiceProcesses) -> None:
    from playwright.async_api import Dialog, expect

    dialogs: list[str] = []

    async def record(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        await dialog.dismiss()

    async with chromium() as browser:
        page = await open_chat(browser, services)
        page.on("dialog", record)
        await ask(page, "xss please", "Careful")
        reply = page.get_by_role("log").locator(".msg.assistant .md").last
        # The raw HTML is shown as text, never made into elements.
        await expect(reply).to_contain_text("<script>window.__x = 1</script>")
        await expect(reply).to_contain_text('<img src=x onerror="window.__y = 1">')
        assert await reply.locator("script, img, iframe, [onerror], [onclick]").count() == 0
        links = reply.locator("a")
        await expect(links).to_have_count(2)  # the two Markdown links, their hrefs removed
        hrefs = await links.evaluate_all("as => as.map(a => a.getAttribute('href'))")
        assert hrefs == [None, None], hrefs
        for i in range(await links.count()):
            await links.nth(i).click()
        await page.wait_for_timeout(300)  # a dialog or a global would show by now
        found = await page.evaluate("[window.__x, window.__y, window.__z, window.__w]")
        assert found == [None, None, None, None]
        assert dialogs == []
        assert len(page.context.pages) == 1  # nothing opened either


async def test_the_sidebar_lists_switches_and_renames_conversations(
    services: ServiceProcesses,
) -> None:
    from playwright.async_api import expect

    async with chromium() as browser:
        page = await open_chat(browser, services)
        await ask(page, "first conversation", "You said: first conversation")
        await page.get_by_role("textbox", name="Message").press("Control+k")  # new chat
        await expect(page.get_by_role("heading", name="New chat")).to_be_visible()
        await expect(page.get_by_role("log").locator(".msg")).to_have_count(0)
        await ask(page, "second conversation", "You said: second conversation")

        sidebar = page.get_by_role("navigation", name="Conversations")
        first = sidebar.locator(".conv").filter(has_text="first conversation")
        second = sidebar.locator(".conv").filter(has_text="second conversation")
        await expect(first).to_have_count(1, timeout=WAIT_MS)
        await expect(second).to_have_count(1)
        await expect(second.locator(".conv-open")).to_have_attribute("aria-current", "page")

        log = page.get_by_role("log")
        await first.locator(".conv-open").click()
        await expect(log.locator(".msg.user")).to_have_text(["Youfirst conversation"])
        await expect(log).not_to_contain_text("second conversation")
        await second.locator(".conv-open").click()
        await expect(log.locator(".msg.user")).to_have_text(["Yousecond conversation"])
        await expect(log).to_contain_text("You said: second conversation")

        await first.get_by_role("button", name="Rename first conversation").click()
        name = sidebar.get_by_role("textbox", name="Name of the conversation")
        await name.fill("Planets and moons")
        await name.press("Enter")
        renamed = sidebar.locator(".conv").filter(has_text="Planets and moons")
        await expect(renamed).to_have_count(1)

        await page.reload()
        await expect(page.get_by_role("status")).to_have_text("Connected", timeout=WAIT_MS)
        await expect(renamed).to_have_count(1, timeout=WAIT_MS)
        await renamed.locator(".conv-open").click()
        await expect(page.get_by_role("heading", name="Planets and moons")).to_be_visible()
        await expect(log.locator(".msg.user")).to_have_text(["Youfirst conversation"])


async def test_dark_mode_phone_width_accessibility_and_screenshots(
    services: ServiceProcesses, tmp_path: Path
) -> None:
    from playwright.async_api import expect

    out = tmp_path / "webchat-screenshots"
    out.mkdir()
    async with chromium() as browser:
        # The system's dark preference, before any choice: dark; the login form passes axe.
        context = await browser.new_context(color_scheme="dark", bypass_csp=True)
        login = await context.new_page()
        await login.goto(f"{services.url}/webchat")
        await expect(login.get_by_label("Gateway token")).to_be_visible()
        await expect(login.locator("html")).to_have_class("theme-dark")
        await login.add_script_tag(content=AXE.read_text())
        assert await serious_violations(login) == [], "login, dark"
        await login.screenshot(path=str(out / "webchat-login-dark.png"))
        await context.close()

        # bypass_csp: axe is injected as an inline script.
        page = await open_chat(browser, services, bypass_csp=True, color_scheme="light")
        await ask(page, "markdown please", "Read more at")
        root = page.locator("html")
        await expect(root).to_have_class("theme-light")
        await page.add_script_tag(content=AXE.read_text())
        assert await serious_violations(page) == [], "light"
        await page.screenshot(path=str(out / "webchat-light.png"), full_page=True)

        toggle = page.get_by_role("button", name="Dark mode")
        await expect(toggle).to_have_attribute("aria-pressed", "false")
        await toggle.click()
        await expect(root).to_have_class("theme-dark")
        await expect(toggle).to_have_attribute("aria-pressed", "true")
        assert await page.evaluate("getComputedStyle(document.body).colorScheme") == "dark"
        assert await serious_violations(page) == [], "dark"
        await page.screenshot(path=str(out / "webchat-dark.png"), full_page=True)
        await page.reload()  # the choice is remembered
        await expect(page.get_by_role("status")).to_have_text("Connected", timeout=WAIT_MS)
        await expect(root).to_have_class("theme-dark")

        # A phone: no horizontal scrolling, the sidebar behind the Chats button.
        phone = await open_chat(
            browser, services, viewport={"width": 360, "height": 740}, bypass_csp=True
        )
        await ask(phone, "markdown please", "Read more at")
        assert await no_horizontal_scroll(phone)
        sidebar = phone.get_by_role("navigation", name="Conversations")
        await expect(sidebar).to_be_hidden()
        menu = phone.get_by_role("button", name="Chats")
        await menu.click()
        await expect(sidebar).to_be_visible()
        await expect(menu).to_have_attribute("aria-expanded", "true")
        assert await no_horizontal_scroll(phone)
        await phone.add_script_tag(content=AXE.read_text())
        assert await serious_violations(phone) == [], "phone, sidebar open"
        await phone.screenshot(path=str(out / "webchat-phone-sidebar.png"))
        await phone.keyboard.press("Escape")
        await expect(sidebar).to_be_hidden()
        await phone.screenshot(path=str(out / "webchat-phone.png"))
    print(f"WebChat screenshots: {out}")


async def test_the_sessions_method_lists_the_webchat_conversations_only(
    services: ServiceProcesses,
) -> None:
    """The sidebar's source: ``sessions`` lists the default agent's WebChat sessions, newest
    first, and not its sessions of other channels (here one of the OpenAI API)."""
    async with httpx.AsyncClient(timeout=WAIT_MS / 1000) as http:
        reply = await http.post(
            f"{services.url}/v1/chat/completions",
            headers={"Authorization": f"Bearer {services.token}"},
            json={
                "model": "switchboard",
                "user": "api-user",
                "messages": [{"role": "user", "content": "hi"}],
            },
        )
    assert reply.status_code == 200, reply.text
    ws_url = services.url.replace("http://", "ws://") + "/webchat/ws"
    async with connect(ws_url) as ws:
        ids = iter(range(1, 100))

        async def request(method: str, **params: Any) -> dict[str, Any]:
            rid = f"r{next(ids)}"
            await ws.send(
                json.dumps({"type": "req", "id": rid, "method": method, "params": params})
            )
            while True:
                frame = json.loads(await asyncio.wait_for(ws.recv(), WAIT_MS / 1000))
                if frame.get("type") == "res" and frame.get("id") == rid:
                    return dict(frame)
                if frame.get("event") == "lifecycle" and frame["payload"]["phase"] == "end":
                    ended.append(frame["payload"]["run_id"])

        ended: list[str] = []
        assert (await request("connect", token=services.token, session="listed-1"))["ok"]
        assert (await request("send", text="hello list"))["ok"]
        while not ended:  # the run's end: its transcript is written
            frame = json.loads(await asyncio.wait_for(ws.recv(), WAIT_MS / 1000))
            if frame.get("event") == "lifecycle" and frame["payload"]["phase"] == "end":
                ended.append(frame["payload"]["run_id"])
        listed = await request("sessions")
        few = await request("sessions", limit=1)
        bad = await request("sessions", limit=0)
    assert listed["ok"], listed
    sessions = listed["payload"]["sessions"]
    keys = [s["session_key"] for s in sessions]
    assert "main:webchat:listed-1" in keys
    assert all(k.startswith("main:webchat:") for k in keys), keys
    assert "main:openai:api-user" not in keys
    mine = next(s for s in sessions if s["session"] == "listed-1")
    assert mine["message_count"] >= 2 and mine["updated_at_ms"] > 0
    times = [s["updated_at_ms"] for s in sessions]
    assert times == sorted(times, reverse=True)
    assert [s["session"] for s in few["payload"]["sessions"]] == ["listed-1"]
    assert bad["error"]["code"] == "invalid_params"


async def test_a_voice_note_is_recorded_sent_and_transcribed(services: ServiceProcesses) -> None:
    from playwright.async_api import expect

    transcription: FakeTranscription = services.transcription  # type: ignore[attr-defined]
    before = len(transcription.seen())
    async with chromium(*FAKE_MICROPHONE) as browser:
        page = await open_chat(browser, services, permissions=["microphone"])
        record = page.get_by_role("button", name="Record")
        await record.click()
        stop = page.get_by_role("button", name="Stop recording")
        await expect(stop).to_be_visible()
        await expect(page.get_by_role("status")).to_have_text("Recording\u2026")
        await page.wait_for_timeout(1000)  # a second of the fake microphone's tone
        await stop.click()
        await expect(page.locator("#attached")).to_have_text(re.compile(r"^voice-note-\d+\.\w+$"))
        await page.get_by_role("button", name="Send").click()
        mine = page.get_by_role("log").locator(".msg.user").last
        await expect(mine).to_contain_text("Attached: voice-note-")
        answer = page.get_by_role("log").locator(".msg.assistant").last
        await expect(answer).to_contain_text("I heard your voice note.", timeout=WAIT_MS)
    uploads = transcription.seen()[before:]
    assert len(uploads) == 1, uploads
    assert uploads[0].content_type.startswith(("audio/webm", "audio/ogg")), uploads[0]
    assert uploads[0].size > 1000


async def serious_violations(page: Page) -> list[dict[str, Any]]:
    result: dict[str, Any] = await page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    return [
        {"id": v["id"], "nodes": [n["target"] for n in v["nodes"]]}
        for v in result["violations"]
        if v["impact"] in ("serious", "critical")
    ]


async def no_horizontal_scroll(page: Page) -> bool:
    widths: list[int] = await page.evaluate(
        "[document.documentElement.scrollWidth, document.documentElement.clientWidth,"
        " document.body.scrollWidth]"
    )
    return widths[0] <= widths[1] and widths[2] <= widths[1]
