"""The web pages' weight and time to interactive (issue 28): the WebChat page and the Control
UI, loaded by Debian's Chromium (Playwright, as the browser tests run it) from a one-process
`switchboard up` against the fake model.

Per page, ``ROUNDS`` loads, each in a fresh browser context (no cache, as a first visit):

- ``bytes``: the bodies of every response the load fetched (the page, its modules, style
  sheets and the vendored libraries; the gateway sends them uncompressed), and ``requests``;
- ``interactive_ms``: from the navigation's start to the moment the page's first control
  takes input (the token field of the login form, visible and enabled, with every module
  script run: the page puts it there), read from the page's own clock
  (``performance.now()``); the median and the largest;
- for the Control UI also ``sessions_ms``: logged in (the cookie set by a login before the
  timed load), from navigation to the sessions list shown.
"""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Callable
from typing import Any

from tests.bench import procs
from tests.bench.run import Plan, fresh_home
from tests.e2e.browser import ARGS, CHROMIUM

ROUNDS = 7
Say = Callable[[str], None]
# What each page shows once it takes input: the login form's token field.
PAGES = {"webchat": "/webchat", "ui": "/ui"}
TOKEN_FIELD = "input[type=password]"
TARGETS = {"bytes": 1_000_000, "interactive_ms": 1000.0}


async def _load(browser: Any, url: str, ready: str) -> dict[str, Any]:
    context = await browser.new_context()
    page = await context.new_page()
    sizes: list[int] = []

    async def on_response(response: Any) -> None:
        try:
            sizes.append(len(await response.body()))
        except Exception:  # a redirect or an aborted request has no body
            sizes.append(0)

    pending: list[asyncio.Task[None]] = []
    page.on("response", lambda r: pending.append(asyncio.ensure_future(on_response(r))))
    try:
        await page.goto(url, wait_until="commit")
        await page.locator(ready).first.wait_for(state="visible", timeout=30_000)
        at = await page.evaluate("performance.now()")
        await page.wait_for_load_state("networkidle")
        await asyncio.gather(*pending)
        return {"interactive_ms": at, "bytes": sum(sizes), "requests": len(sizes)}
    finally:
        await context.close()


async def _sessions_ms(browser: Any, base: str, token: str) -> float:
    """Logged in (the cookie from a login first), navigation to the sessions list shown."""
    context = await browser.new_context()
    page = await context.new_page()
    try:
        await page.goto(base + "/ui")
        await page.locator(TOKEN_FIELD).fill(token)
        await page.locator(TOKEN_FIELD).press("Enter")
        await page.locator("#nav").wait_for(state="visible", timeout=30_000)
        await page.goto("about:blank")
        await page.goto(base + "/ui#/sessions", wait_until="commit")
        await page.locator("[aria-label='Sessions table']").wait_for(timeout=30_000)
        at: float = await page.evaluate("performance.now()")
        return at
    finally:
        await context.close()


async def _measure(base: str, token: str, rounds: int) -> dict[str, Any]:
    from playwright.async_api import async_playwright

    out: dict[str, Any] = {}
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            for name, path in PAGES.items():
                loads = [await _load(browser, base + path, TOKEN_FIELD) for _ in range(rounds)]
                times = [x["interactive_ms"] for x in loads]
                out[name] = {
                    "bytes": loads[-1]["bytes"],
                    "requests": loads[-1]["requests"],
                    "interactive_ms_p50": round(statistics.median(times), 1),
                    "interactive_ms_max": round(max(times), 1),
                    "rounds": rounds,
                }
            logged_in = [await _sessions_ms(browser, base, token) for _ in range(rounds)]
            out["ui"]["sessions_ms_p50"] = round(statistics.median(logged_in), 1)
        finally:
            await browser.close()
    return out


def bench_web(plan: Plan, fake: procs.FakeModel, say: Say) -> dict[str, Any]:
    rounds = 3 if plan.quick else ROUNDS
    with fresh_home() as home:
        say("[web] starting a one-process stack")
        stack = procs.launch_stack(home, fake)
        try:
            say(f"[web] loading /webchat and /ui {rounds} times each in Chromium")
            pages = asyncio.run(_measure(stack.url, stack.token, rounds))
        finally:
            procs.shutdown_stack(stack)
    return {"pages": pages, "targets": TARGETS, "browser": str(CHROMIUM)}


def markdown(w: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "## Web pages (weight and time to interactive, Chromium)",
        "",
        "| page | bytes | requests | interactive p50 ms | max ms | logged in, sessions shown ms |",
        "|---|---|---|---|---|---|",
    ]
    for name, p in w["pages"].items():
        lines.append(
            f"| {name} | {p['bytes']} | {p['requests']} | {p['interactive_ms_p50']:.0f}"
            f" | {p['interactive_ms_max']:.0f} | {p.get('sessions_ms_p50', '')} |"
        )
    lines += ["", "A fresh browser context per load (no cache); bodies as the gateway sends them."]
    return lines
