"""The Control UI (/ui) in a real browser against the real services: Debian's Chromium, driven
by Playwright. Login through the form (an HttpOnly, SameSite=Strict cookie; the token in no
URL), the sessions list with a session made through the OpenAI API, its transcript with the
fake model's get_time call (arguments and result), the session actions from the page, a cookie
request without its CSRF token refused, an assistant reply full of XSS payloads rendered inert,
axe-core on the pages, and screenshots in light and dark mode (the directory is printed).

One system for the module; each test its own browser."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tests.e2e import helpers
from tests.e2e.browser import ARGS, CHROMIUM, WAIT_MS, require_browser
from tests.fakes.llm import FakeRequest, Reply
from tests.support.services import ServiceProcesses, fresh_model, with_fake_model

if TYPE_CHECKING:
    from playwright.async_api import Browser, BrowserContext, Page, Playwright

AXE = Path(__file__).parent / "vendor" / "axe.min.js"
ALICE = "main:openai:alice"  # asks the time: a get_time call, then "Tool said: ..."
MALLORY = "main:openai:mallory"  # gets the XSS reply
BOB = "main:openai:bob"  # the actions test's
XSS_REPLY = (
    "Here you go <script>window.__xss = 'script'</script>\n\n"
    "<img src=x onerror=\"window.__xss = 'img'; alert(1)\">\n\n"
    "[click me](javascript:window.__xss='md-link') and "
    '<a href="javascript:alert(2)">raw link</a> and '
    '<a href="JaVaScRiPt:alert(3)">mixed case</a>'
)


def script(req: FakeRequest) -> Reply:
    if req.last_user_text.startswith("xss"):
        return Reply(text=XSS_REPLY)
    if req.last_tool_results:
        return Reply(text="Tool said: " + " ".join(req.last_tool_results))
    return Reply(tool_calls=[("get_time", {"timezone": "UTC"})])


def ask(url: str, token: str, user: str, text: str) -> str:
    """One turn of ``user``'s session through the OpenAI API; the reply's text."""
    reply = httpx.post(
        f"{url}/v1/chat/completions",
        headers={"Authorization": f"Bearer {token}"},
        json={
            "model": "switchboard",
            "user": user,
            "messages": [{"role": "user", "content": text}],
        },
        timeout=WAIT_MS / 1000,
    )
    assert reply.status_code == 200, reply.text
    return str(reply.json()["choices"][0]["message"]["content"])


@pytest.fixture(scope="module")
def system(
    tmp_path_factory: pytest.TempPathFactory, module_nats_url: str, module_database_url: str
) -> Iterator[ServiceProcesses]:
    require_browser()  # before the services start: skipped here, or failed under CI=true
    home = tmp_path_factory.mktemp("control-ui")
    with with_fake_model(home, module_nats_url, module_database_url, script, {}) as procs:
        assert ask(procs.url, procs.token, "alice", "What time is it in UTC?").startswith(
            "Tool said:"
        )
        assert "window.__xss" in ask(procs.url, procs.token, "mallory", "xss please")
        yield procs


@pytest.fixture
def services(system: ServiceProcesses) -> ServiceProcesses:
    fresh_model(system)
    return system


@asynccontextmanager
async def browser() -> AsyncIterator[tuple[Playwright, Browser]]:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        chromium = await pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield pw, chromium
        finally:
            await chromium.close()


async def log_in(page: Page, services: ServiceProcesses) -> None:
    from playwright.async_api import expect

    await page.goto(f"{services.url}/ui")
    await page.get_by_label("Gateway token").fill(services.token)
    await page.get_by_role("button", name="Log in").click()
    await expect(page.get_by_role("heading", name="Sessions")).to_be_visible(timeout=WAIT_MS)


async def new_page(chromium: Browser, **options: Any) -> tuple[BrowserContext, Page]:
    context = await chromium.new_context(viewport={"width": 1100, "height": 800}, **options)
    return context, await context.new_page()


async def test_login_list_and_transcript(services: ServiceProcesses) -> None:
    from playwright.async_api import Request, expect

    requested: list[str] = []
    async with browser() as (_, chromium):
        context, page = await new_page(chromium)

        def on_request(request: Request) -> None:
            requested.append(request.url)

        page.on("request", on_request)
        await page.goto(f"{services.url}/ui")
        # A wrong token: refused with the gateway's message, the form again.
        await page.get_by_label("Gateway token").fill("not-the-token")
        await page.get_by_role("button", name="Log in").click()
        await expect(page.locator("#login-error")).to_have_text(
            "Wrong gateway token.", timeout=WAIT_MS
        )
        await page.get_by_label("Gateway token").fill(services.token)
        await page.get_by_role("button", name="Log in").click()
        await expect(page.get_by_role("heading", name="Sessions")).to_be_visible(timeout=WAIT_MS)

        cookies = {c["name"]: c for c in await context.cookies()}
        assert cookies["sb_ui"]["httpOnly"] is True
        assert cookies["sb_ui"]["sameSite"] == "Strict"
        assert services.token not in cookies["sb_ui"]["value"]
        assert await page.evaluate("document.cookie") == ""  # HttpOnly: not readable

        # The list: both sessions, with their agent, channel and usage; the search narrows it.
        rows = page.locator("table.sessions tbody tr")
        alice = rows.filter(has_text=ALICE)
        await expect(alice).to_have_count(1, timeout=WAIT_MS)
        await expect(alice.locator("td").nth(0)).to_have_text("main")
        await expect(alice.locator("td").nth(1)).to_have_text("openai")
        assert int(await alice.locator("td").nth(3).inner_text()) == 4  # user, call, result, text
        assert int(await alice.locator("td").nth(4).inner_text()) > 0  # input tokens
        await expect(rows.filter(has_text=MALLORY)).to_have_count(1)
        await page.get_by_label("Search sessions").fill("alice")
        await expect(rows).to_have_count(1)
        await page.get_by_label("Search sessions").fill("")
        await expect(rows.filter(has_text=MALLORY)).to_have_count(1)

        # The transcript: the question, the tool call with its arguments and result, the answer.
        await alice.get_by_role("link", name=ALICE).click()
        transcript = page.get_by_role("list", name="Transcript")
        await expect(transcript.locator(".msg.user").first).to_contain_text(
            "What time is it in UTC?", timeout=WAIT_MS
        )
        card = transcript.locator(".tool-card")
        await expect(card).to_have_count(1)
        await expect(card.locator(".tool-name")).to_have_text("get_time")
        await expect(card.locator(".tool-args")).to_contain_text('"timezone": "UTC"')
        await expect(card).to_have_attribute("data-status", "done")
        await expect(card.locator(".tool-result")).not_to_be_empty()
        # The executor's timing of the call, kept in the transcript (not sent to the model).
        await expect(card).to_contain_text(re.compile(r"Took \d+(\.\d+)? ms"))
        result = await card.locator(".tool-result").inner_text()
        await expect(transcript.locator(".msg.assistant").last).to_contain_text(
            f"Tool said: {result}"
        )

        # A reload keeps the login (the cookie; the page asks /ui/session for its CSRF token).
        await page.reload()
        await expect(card.locator(".tool-name")).to_have_text("get_time", timeout=WAIT_MS)
        await expect(page.get_by_label("Gateway token")).to_be_hidden()

        # The cookie gone (expired, say): the next API call shows the login form.
        await page.get_by_role("link", name="All sessions").click()
        await expect(rows.filter(has_text=ALICE)).to_have_count(1, timeout=WAIT_MS)
        await context.clear_cookies()
        await page.get_by_role("button", name="Refresh").click()
        await expect(page.locator("#login-error")).to_contain_text("Log in again", timeout=WAIT_MS)
        await expect(page.get_by_label("Gateway token")).to_be_visible()
        # Log in and out again: the cookie is cleared, a reload asks for the token.
        await page.get_by_label("Gateway token").fill(services.token)
        await page.get_by_role("button", name="Log in").click()
        await expect(rows.filter(has_text=ALICE)).to_have_count(1, timeout=WAIT_MS)
        await page.get_by_role("button", name="Log out").click()
        await expect(page.get_by_label("Gateway token")).to_be_visible(timeout=WAIT_MS)
        assert "sb_ui" not in {c["name"] for c in await context.cookies()}
        await page.reload()
        await expect(page.get_by_label("Gateway token")).to_be_visible(timeout=WAIT_MS)

        assert requested and all(services.token not in url for url in requested), requested
        await context.close()


async def test_the_session_actions_work_from_the_page(services: ServiceProcesses) -> None:
    from playwright.async_api import Dialog, expect

    assert ask(services.url, services.token, "bob", "What time is it in UTC?")
    dialogs: list[str] = []
    async with browser() as (_, chromium):
        _, page = await new_page(chromium)

        async def accept(dialog: Dialog) -> None:
            dialogs.append(dialog.message)
            await dialog.accept()

        page.on("dialog", accept)
        await log_in(page, services)
        await page.goto(f"{services.url}/ui#/sessions/{BOB}")
        transcript = page.get_by_role("list", name="Transcript")
        await expect(transcript.locator(".tool-card")).to_have_count(1, timeout=WAIT_MS)
        status = page.get_by_role("status").last

        # A refusal of the gateway is shown with its message.
        await page.get_by_label("Model", exact=True).fill("nonsense")
        await page.get_by_role("button", name="Set model").click()
        await expect(page.locator("#error")).to_contain_text("provider:model", timeout=WAIT_MS)
        await page.get_by_label("Model", exact=True).fill("openai:other-model")
        await page.get_by_role("button", name="Set model").click()
        await expect(status).to_have_text(
            "Model: openai:other-model; queue mode: default.", timeout=WAIT_MS
        )
        await page.get_by_label("Queue mode").select_option("collect")
        await page.get_by_role("button", name="Set queue mode").click()
        await expect(status).to_have_text(
            "Model: openai:other-model; queue mode: collect.", timeout=WAIT_MS
        )
        await page.get_by_role("button", name="Abort").click()
        await expect(status).to_have_text("No run was in progress.", timeout=WAIT_MS)
        await page.get_by_role("button", name="Compact").click()
        await expect(status).to_have_text(
            re.compile(r"^(Compacted \d+ messages|Not compacted: .+)"),
            timeout=WAIT_MS,
        )

        await page.get_by_role("button", name="Reset").click()
        await expect(status).to_have_text("Reset: 4 messages removed.", timeout=WAIT_MS)
        await expect(transcript).to_have_text("No messages.")
        with helpers.client(services.url, services.token) as c:
            assert helpers.history(c, BOB) == []

        # The model set from the page is the one the next run asks for.
        llm = fresh_model(services)
        ask(services.url, services.token, "bob", "What time is it in UTC?")
        assert {call.request.raw.get("model") for call in llm.calls} == {"other-model"}

        await page.reload()
        await expect(transcript.locator(".tool-card")).to_have_count(1, timeout=WAIT_MS)
        await page.get_by_role("button", name="Delete").click()
        await expect(page.get_by_role("heading", name="Sessions")).to_be_visible(timeout=WAIT_MS)
        await expect(page.locator("table.sessions tbody tr").first).to_be_visible()
        await expect(page.locator("table.sessions tbody tr").filter(has_text=BOB)).to_have_count(0)
        assert [d.split("?")[0] for d in dialogs] == [f"Reset {BOB}", f"Delete {BOB}"]


async def test_a_cookie_request_needs_its_csrf_token(services: ServiceProcesses) -> None:
    async with browser() as (_, chromium):
        context, page = await new_page(chromium)
        await log_in(page, services)
        # The browser's own cookie jar: the cookie goes, the CSRF header does not.
        refused = await context.request.get(f"{services.url}/api/sessions")
        assert refused.status == 403, await refused.text()
        assert "X-CSRF-Token" in (await refused.json())["error"]["message"]
        wrong = await context.request.get(
            f"{services.url}/api/sessions", headers={"X-CSRF-Token": "forged"}
        )
        assert wrong.status == 403
        csrf = (await (await context.request.get(f"{services.url}/ui/session")).json())["csrf"]
        allowed = await context.request.get(
            f"{services.url}/api/sessions", headers={"X-CSRF-Token": csrf}
        )
        assert allowed.status == 200, await allowed.text()
        await context.close()


@pytest.mark.parametrize("bypass_csp", [False, True], ids=["with-csp", "markup-alone"])
async def test_an_assistant_reply_with_xss_payloads_renders_inert(
    services: ServiceProcesses, bypass_csp: bool
) -> None:
    """With the page's policy, and without it (``bypass_csp``: the rendered markup alone must
    be inert, the policy being a second line)."""
    from playwright.async_api import Dialog, expect

    dialogs: list[str] = []
    async with browser() as (_, chromium):
        _, page = await new_page(chromium, bypass_csp=bypass_csp)

        async def record(dialog: Dialog) -> None:
            dialogs.append(dialog.message)
            await dialog.dismiss()

        page.on("dialog", record)
        await log_in(page, services)
        await page.goto(f"{services.url}/ui#/sessions/{MALLORY}")
        reply = page.locator(".msg.assistant").last
        await expect(reply).to_contain_text("Here you go", timeout=WAIT_MS)
        await expect(reply).to_contain_text("raw link")
        await page.wait_for_load_state("networkidle")
        for link in await reply.locator("a").all():
            await link.click(modifiers=["Alt"], no_wait_after=True)  # no navigation, no script
        assert await page.evaluate("window.__xss") is None
        assert dialogs == []
        assert await reply.locator("script").count() == 0
        assert await reply.locator("[onerror], [onclick], [onload]").count() == 0
        hrefs = await reply.locator("a").evaluate_all("as => as.map(a => a.getAttribute('href'))")
        assert not any(h and h.strip().lower().startswith("javascript:") for h in hrefs), hrefs


async def axe_violations(page: Page) -> list[dict[str, Any]]:
    await page.add_script_tag(content=AXE.read_text())
    result: dict[str, Any] = await page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    return [v for v in result["violations"] if v["impact"] in ("serious", "critical")]


async def test_axe_finds_no_serious_violations(services: ServiceProcesses) -> None:
    from playwright.async_api import expect

    async with browser() as (_, chromium):
        for scheme in ("light", "dark"):
            # bypass_csp: axe is injected as an inline script.
            _, page = await new_page(chromium, bypass_csp=True, color_scheme=scheme)
            await page.goto(f"{services.url}/ui")
            await expect(page.get_by_label("Gateway token")).to_be_visible(timeout=WAIT_MS)
            assert await axe_violations(page) == [], f"login page, {scheme}"
            await log_in(page, services)
            await expect(page.locator("table.sessions tbody tr").first).to_be_visible()
            assert await axe_violations(page) == [], f"sessions page, {scheme}"
            await page.goto(f"{services.url}/ui#/sessions/{ALICE}")
            await expect(page.locator(".tool-card")).to_have_count(1, timeout=WAIT_MS)
            assert await axe_violations(page) == [], f"transcript page, {scheme}"


async def test_screenshots_in_light_and_dark_mode(
    services: ServiceProcesses, tmp_path: Path
) -> None:
    from playwright.async_api import expect

    out = tmp_path / "control-ui-screenshots"
    out.mkdir()
    async with browser() as (_, chromium):
        for scheme in ("light", "dark"):
            for width, suffix in ((1100, ""), (360, "-phone")):
                context = await chromium.new_context(
                    viewport={"width": width, "height": 800}, color_scheme=scheme
                )
                page = await context.new_page()
                await page.goto(f"{services.url}/ui")
                await expect(page.get_by_label("Gateway token")).to_be_visible(timeout=WAIT_MS)
                await page.screenshot(path=str(out / f"login-{scheme}{suffix}.png"))
                await log_in(page, services)
                await expect(page.locator("table.sessions tbody tr").first).to_be_visible()
                await page.screenshot(
                    path=str(out / f"sessions-{scheme}{suffix}.png"), full_page=True
                )
                await page.goto(f"{services.url}/ui#/sessions/{ALICE}")
                await expect(page.locator(".tool-card")).to_have_count(1, timeout=WAIT_MS)
                await page.screenshot(
                    path=str(out / f"transcript-{scheme}{suffix}.png"), full_page=True
                )
                # Nothing wider than the window (the table scrolls in its own box).
                assert await page.evaluate("document.documentElement.scrollWidth") <= width
                await context.close()
        # The theme toggle wins over the system's scheme, and is remembered.
        context = await chromium.new_context(color_scheme="light")
        page = await context.new_page()
        await log_in(page, services)
        await page.get_by_role("button", name="Switch to dark mode").click()
        await page.reload()
        await expect(page.get_by_role("button", name="Switch to light mode")).to_be_visible(
            timeout=WAIT_MS
        )
        assert await page.evaluate("document.documentElement.dataset.theme") == "dark"
        await context.close()
    print(f"Control UI screenshots: {out}")
    assert len(list(out.glob("*.png"))) == 12
