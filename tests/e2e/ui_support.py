"""What the Control UI's browser tests share beside test_control_ui_browser.py's helpers: a
logged-in page at a route, its axe check and screenshots in both themes, the API calls the
tests check the pages against, and a Telegram DM published as the gateway would."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import nats

from switchboard import bus
from switchboard.v1 import messages_pb2
from tests.e2e import helpers
from tests.e2e.browser import WAIT_MS
from tests.e2e.helpers import wait_for
from tests.e2e.test_control_ui_browser import axe_violations, log_in
from tests.support.services import ServiceProcesses

if TYPE_CHECKING:
    from playwright.async_api import Browser, Dialog, Page

__all__ = [
    "WAIT_S",
    "accept_dialogs",
    "axe_violations",
    "client",
    "final_text",
    "get",
    "log_in",
    "open_page",
    "publish_dm",
    "shots_and_axe",
    "waited",
]

WAIT_S = WAIT_MS / 1000


async def waited(predicate: Callable[[], Any], what: str = "") -> Any:
    """:func:`tests.e2e.helpers.wait_for` off the event loop (the browser's driver keeps
    running)."""
    return await asyncio.to_thread(wait_for, predicate, WAIT_S, what)


async def open_page(page: Page, services: ServiceProcesses, route: str, heading: str) -> None:
    """Logged in, at ``#/<route>``, its heading shown."""
    from playwright.async_api import expect

    await log_in(page, services)
    await page.goto(f"{services.url}/ui#/{route}")
    await expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible(
        timeout=WAIT_MS
    )


async def shots_and_axe(
    chromium: Browser,
    services: ServiceProcesses,
    route: str,
    heading: str,
    ready: Callable[[Page], Awaitable[None]],
    out: Path,
) -> list[str]:
    """``#/<route>`` in light and dark mode: a screenshot of each into ``out``, and axe's
    serious or critical findings (as "<route> <scheme>: <rule>")."""
    found: list[str] = []
    for scheme in ("light", "dark"):
        # bypass_csp: axe is injected as an inline script.
        context = await chromium.new_context(
            viewport={"width": 1100, "height": 800}, color_scheme=scheme, bypass_csp=True
        )
        page = await context.new_page()
        await open_page(page, services, route, heading)
        await ready(page)
        await page.screenshot(path=str(out / f"{route}-{scheme}.png"), full_page=True)
        found += [f"{route} {scheme}: {v['id']}" for v in await axe_violations(page)]
        await context.close()
    return found


def client(services: ServiceProcesses) -> httpx.Client:
    return helpers.client(services.url, services.token)


def get(services: ServiceProcesses, path: str, **params: str) -> dict[str, Any]:
    with client(services) as c:
        r = c.get(path, params=params)
        assert r.status_code == 200, r.text
        return dict(r.json())


def final_text(services: ServiceProcesses, key: str) -> str | None:
    with client(services) as c:
        return helpers.final_text(c, key)


async def accept_dialogs(page: Page, seen: list[str]) -> None:
    async def accept(dialog: Dialog) -> None:
        seen.append(dialog.message)
        await dialog.accept()

    page.on("dialog", accept)


async def publish_dm(nats_url: str, sender: str, text: str) -> None:
    """A Telegram DM from ``sender`` on the bus, as the gateway publishes one."""
    message = messages_pb2.InboundMessage(
        channel="telegram",
        account="default",
        sender=sender,
        chat=messages_pb2.ChatRef(id=sender, type="direct"),
        text=text,
        message_id=f"ui-{sender}-{time.time_ns()}",
        received_at_ms=int(time.time() * 1000),
    )
    nc = await nats.connect(nats_url)
    try:
        subjects = bus.Subjects()
        msg_id = f"telegram:default:{message.message_id}"
        await bus.js_publish(nc.jetstream(), subjects.inbound("telegram"), message, msg_id=msg_id)
    finally:
        await nc.close()
