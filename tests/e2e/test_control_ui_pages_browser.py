"""The Control UI's operator pages in a real browser against the real services (Debian's
Chromium driven by Playwright): an approval decided from the Approvals page (the run then
finishes), a pairing request approved and revoked from the Pairing page, a cron job added,
changed, run now (its result shown) and deleted from the Cron page, the usage charts drawn
from the real usage rows with the budget's limits, every service ready on the Health page, the
Configuration page with its secrets redacted and the audit's findings; axe-core on each page and
screenshots in light and dark mode (the directory is printed).

One system for the module (the fake model; get_time needs an approval, DMs need pairing); each
test its own browser and session keys."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from switchboard import registry
from tests.e2e.browser import WAIT_MS, require_browser
from tests.e2e.test_control_ui_browser import browser, new_page
from tests.e2e.ui_support import (
    accept_dialogs,
    client,
    final_text,
    get,
    open_page,
    publish_dm,
    shots_and_axe,
    waited,
)
from tests.fakes.llm import FakeRequest, Reply
from tests.support.services import ServiceProcesses, fresh_model, with_fake_model

if TYPE_CHECKING:
    from playwright.async_api import Page

MODEL = "gpt-ui-pages"
DAILY_TOKENS = 1_000_000
ENV = {
    "SB_DM_POLICY": "pairing",  # an unknown sender gets a code (with_fake_model opens it)
    "SB_TOOL_APPROVALS": '["get_time"]',  # every get_time call waits for a person
    "SB_MODEL": f"openai:{MODEL}",
    "SB_PRICES": json.dumps({MODEL: {"input": 1000, "output": 2000}}),  # USD per 1M tokens
    "SB_BUDGET": json.dumps(
        {"agent_daily_tokens": DAILY_TOKENS, "agent_daily_usd": 50, "session_tokens": 200_000}
    ),
}


def script(req: FakeRequest) -> Reply:
    if req.last_tool_results:
        return Reply(text="done: " + " ".join(req.last_tool_results))
    if req.last_user_text == "time":
        return Reply(tool_calls=[("get_time", {"timezone": "UTC"})])
    return Reply(text=f"noted: {req.last_user_text}")


@pytest.fixture(scope="module")
def system(
    tmp_path_factory: pytest.TempPathFactory, module_nats_url: str, module_database_url: str
) -> Iterator[ServiceProcesses]:
    require_browser()  # before the services start: skipped here, or failed under CI=true
    home = tmp_path_factory.mktemp("control-ui-pages")
    with with_fake_model(home, module_nats_url, module_database_url, script, ENV) as procs:
        yield procs


@pytest.fixture
def services(system: ServiceProcesses) -> ServiceProcesses:
    fresh_model(system)
    return system


async def test_an_approval_decided_from_the_page(services: ServiceProcesses) -> None:
    from playwright.async_api import expect

    key = "main:api:ui-approval"
    with client(services) as c:
        sent = c.post(f"/api/sessions/{key}/messages", json={"text": "time"})
        assert sent.status_code in (200, 202), sent.text
    async with browser() as (_, chromium):
        _, page = await new_page(chromium)
        await open_page(page, services, "approvals", "Approvals")
        # The list refreshes itself: the call shows up without a reload.
        row = page.locator("table.approvals tbody tr").filter(has_text=key)
        await expect(row).to_have_count(1, timeout=WAIT_MS)
        await expect(row.locator("th")).to_have_text("get_time")
        await expect(row.locator("pre.args")).to_contain_text('"timezone": "UTC"')
        await expect(row).to_contain_text("ui-approval (api)")  # requested by: the session's peer
        await row.get_by_role("button", name="Approve").click()
        await expect(page.get_by_role("status")).to_have_text(
            f"Approved: get_time in {key}.", timeout=WAIT_MS
        )
        await expect(row).to_have_count(0)
    # The run goes on with the tool's result.
    text = await waited(lambda: final_text(services, key), "the approved run's answer")
    assert text.startswith("done: "), text
    [decided] = get(services, "/api/approvals", session_key=key)["approvals"]
    assert decided["status"] == "approved"


async def test_a_pairing_request_approved_and_revoked_from_the_page(
    services: ServiceProcesses,
) -> None:
    from playwright.async_api import expect

    sender = "770011"
    await publish_dm(services.nats_url, sender, "hello there, may I talk to the bot?")

    def pending() -> list[dict[str, Any]]:
        requests = get(services, "/api/pairing")["requests"]
        return [r for r in requests if r["sender"] == sender]

    [request] = await waited(pending, "the pairing request")
    dialogs: list[str] = []
    async with browser() as (_, chromium):
        _, page = await new_page(chromium)
        await accept_dialogs(page, dialogs)
        await open_page(page, services, "pairing", "Pairing")
        row = page.locator("table.pairing-pending tbody tr").filter(has_text=request["code"])
        await expect(row).to_have_count(1, timeout=WAIT_MS)
        await expect(row).to_contain_text("telegram")
        await expect(row).to_contain_text(sender)
        await expect(row.locator("td.words")).to_have_text("hello there, may I talk to the bot?")
        await expect(row).to_contain_text("in ")  # expires in ...
        await row.get_by_role("button", name="Approve", exact=True).click()
        await expect(page.get_by_role("status")).to_have_text(
            f"Paired {sender} on telegram (default) as user.", timeout=WAIT_MS
        )
        await expect(row).to_have_count(0)
        paired = page.locator("table.pairing-paired tbody tr").filter(has_text=sender)
        await expect(paired).to_have_count(1)
        await expect(paired).to_contain_text("default")
        senders = get(services, "/api/pairing/paired")["senders"]
        assert [s["role"] for s in senders if s["sender"] == sender] == ["user"]

        await paired.get_by_role("button", name="Revoke").click()
        await expect(page.get_by_role("status")).to_have_text(
            f"Revoked {sender} on telegram (default).", timeout=WAIT_MS
        )
        await expect(paired).to_have_count(0)
    assert dialogs == [f"Revoke {sender} on telegram (default)?"]
    assert not [s for s in get(services, "/api/pairing/paired")["senders"] if s["sender"] == sender]


async def test_a_cron_job_added_changed_run_and_deleted_from_the_page(
    services: ServiceProcesses,
) -> None:
    from playwright.async_api import expect

    key = "main:api:ui-cron"
    dialogs: list[str] = []
    async with browser() as (_, chromium):
        _, page = await new_page(chromium)
        await accept_dialogs(page, dialogs)
        await open_page(page, services, "cron", "Cron jobs")
        await page.get_by_label("Name").fill("ui-digest")
        await page.get_by_label("Schedule type").select_option("every")
        await page.get_by_label("Schedule", exact=True).fill("1h30m")
        await page.get_by_label("Session key (optional)").fill(key)
        await page.get_by_label("Message").fill("sum up")
        await page.get_by_role("button", name="Add job").click()
        status = page.get_by_role("status")
        await expect(status).to_contain_text("Added ui-digest; next run ", timeout=WAIT_MS)
        row = page.locator("table.cron-jobs tbody tr[data-job='ui-digest']")
        await expect(row).to_contain_text("every 1h30m")
        await expect(row).to_contain_text("sum up")
        assert get(services, "/api/cron/ui-digest")["every"] == "1h30m"

        # Edit: the form filled with the job, the name fixed; the change is saved.
        await row.get_by_role("button", name="Edit ui-digest").click()
        await expect(page.get_by_label("Name")).to_be_disabled()
        await expect(page.get_by_label("Message")).to_have_value("sum up")
        await page.get_by_label("Schedule", exact=True).fill("2h")
        await page.get_by_role("button", name="Save changes").click()
        await expect(status).to_contain_text("Saved ui-digest; next run ", timeout=WAIT_MS)
        await expect(row).to_contain_text("every 2h")
        assert get(services, "/api/cron/ui-digest")["every"] == "2h"

        # Run now: the result shown, in the status and the job's last result.
        await row.get_by_role("button", name="Run now: ui-digest").click()
        await expect(status).to_have_text("Ran ui-digest: published", timeout=WAIT_MS)
        await expect(row.locator("td.last-result")).to_have_text("published")
        text = await waited(lambda: final_text(services, key), "the job's run")
        assert text.startswith("noted: [Scheduled job 'ui-digest'") and "sum up" in text, text

        await row.get_by_role("button", name="Delete ui-digest").click()
        await expect(status).to_have_text("Deleted ui-digest.", timeout=WAIT_MS)
        await expect(row).to_have_count(0)
    assert dialogs == ["Delete the job ui-digest?"]
    with client(services) as c:
        assert c.get("/api/cron/ui-digest").status_code == 404


async def test_usage_charts_drawn_from_the_usage_rows(services: ServiceProcesses) -> None:
    from playwright.async_api import expect

    key = "main:api:ui-usage"
    with client(services) as c:
        sent = c.post(f"/api/sessions/{key}/messages", json={"text": "count my tokens"})
        assert sent.status_code in (200, 202), sent.text
    assert await waited(lambda: final_text(services, key), "the turn") == "noted: count my tokens"
    today = datetime.now(UTC).date().isoformat()

    def settled() -> dict[str, Any] | None:
        # The usage row is written off the turn's path: wait until the session shows it.
        [mine] = [s for s in get(services, "/api/sessions")["sessions"] if s["session_key"] == key]
        return dict(mine["usage"]) if mine["usage"]["calls"] else None

    turn = await waited(settled, "the turn's usage row")
    usage = get(services, "/api/usage")
    assert usage["budget"] == {
        "agent_daily_tokens": DAILY_TOKENS,
        "agent_daily_usd": 50,
        "session_tokens": 200_000,
    }
    rows = [r for r in usage["rows"] if r["agent"] == "main" and r["day"] == today]
    assert [r["model"] for r in rows] == [f"openai:{MODEL}"]
    assert rows[0]["cost_usd"] > 0

    async with browser() as (_, chromium):
        _, page = await new_page(chromium)
        await open_page(page, services, "usage", "Usage and cost")
        charts = {}
        for name in ("day-tokens", "day-cost", "session-tokens"):
            box = page.locator(f"figure[data-chart='{name}']")
            await expect(box.locator("canvas")).to_have_count(1, timeout=WAIT_MS)
            charts[name] = await box.evaluate(
                "b => ({data: b.chart.data, labels: b.chart.series.map(s => s.label ?? null)})"
            )
        tokens, cost, sessions = charts["day-tokens"], charts["day-cost"], charts["session-tokens"]
        day = tokens["data"][0].index(datetime.fromisoformat(f"{today}T00:00:00+00:00").timestamp())
        assert tokens["labels"][1:] == ["main", "main limit (agent_daily_tokens)"]
        assert (
            tokens["data"][1][day]
            == rows[0]["tokens"]
            >= turn["input_tokens"] + turn["output_tokens"]
        )
        assert set(tokens["data"][2]) == {DAILY_TOKENS}
        assert cost["labels"][1:] == ["main", "main limit (agent_daily_usd)"]
        assert cost["data"][1][day] == pytest.approx(rows[0]["cost_usd"])
        assert set(cost["data"][2]) == {50}
        # The session's bar is the turn's tokens; its session limit drawn beside it.
        assert turn["input_tokens"] + turn["output_tokens"] in sessions["data"][1]
        assert set(sessions["data"][2]) == {200_000}
        assert sessions["labels"][1:] == ["tokens", "limit (session_tokens)"]
        table = page.locator("table.usage-sessions tbody tr").filter(has_text=key)
        await expect(table).to_contain_text(f"{turn['cost_usd']:.4f}")


async def test_the_health_page_shows_every_service_ready(services: ServiceProcesses) -> None:
    from playwright.async_api import expect

    health = get(services, "/api/health")
    assert [s["name"] for s in health["services"]] == registry.names()
    async with browser() as (_, chromium):
        _, page = await new_page(chromium)
        await open_page(page, services, "health", "Health")
        await expect(page.get_by_role("status")).to_have_text(
            re.compile(rf"^Every service is ready \({len(registry.SERVICES)} services, \d+ "),
            timeout=WAIT_MS,
        )
        for name in registry.names():
            row = page.locator(f"table.health-services tr[data-service='{name}']")
            await expect(row.first).to_be_visible()
            states = await row.locator("td.state").evaluate_all(
                "cells => cells.map(c => c.dataset.ready)"
            )
            assert states and set(states) == {"yes"}, (name, states)
        for queue in ("router", "lanes", "executor"):
            row = page.locator(f"table.health-queues tr[data-queue='{queue}']")
            await expect(row).to_have_count(1)
        await expect(page.locator(".dead-total")).to_contain_text("messages in DEADLETTER")


async def test_the_configuration_page_redacts_secrets_and_shows_the_audit(
    services: ServiceProcesses,
) -> None:
    from playwright.async_api import expect

    async with browser() as (_, chromium):
        _, page = await new_page(chromium)
        await open_page(page, services, "config", "Configuration")
        token = page.locator("table.config-settings tr[data-env='SB_GATEWAY_TOKEN']")
        await expect(token).to_contain_text("**********", timeout=WAIT_MS)
        await expect(token).to_contain_text("(secret)")
        findings = page.locator("table.config-audit tbody tr")
        await expect(findings.first).to_be_visible()
        assert await findings.count() >= 1
        await page.get_by_label("Search settings").fill("SB_HTTP_PORT")
        rows = page.locator("table.config-settings tbody tr")
        port = rows.and_(page.locator("[data-env='SB_HTTP_PORT']"))
        await expect(port).to_contain_text(str(services.http_port))
        await expect(rows.filter(has_not_text="SB_HTTP_PORT")).to_have_count(0)  # the search
        await page.get_by_label("Search settings").fill("")
        html = await page.content()
        answer = json.dumps(get(services, "/api/config"))
    for secret in (services.token, services.env["SB_SERVICE_TOKEN"]):
        assert secret not in html
        assert secret not in answer


async def test_axe_and_screenshots_of_each_page(services: ServiceProcesses, tmp_path: Path) -> None:
    from playwright.async_api import expect

    out = tmp_path / "control-ui-pages-screenshots"
    out.mkdir()
    # Something on each page: a waiting approval, a pairing request, a job.
    with client(services) as c:
        c.post("/api/sessions/main:api:ui-shots/messages", json={"text": "time"})
        added = c.post("/api/cron", json={"name": "ui-shots", "every": "1h", "message": "hi"})
        assert added.status_code == 201, added.text
    await publish_dm(services.nats_url, "880022", "a request for the screenshot")

    async def rows(selector: str) -> Any:
        async def ready(page: Page) -> None:
            await expect(page.locator(f"{selector} tbody tr").first).to_be_visible(timeout=WAIT_MS)

        return ready

    async def charts_drawn(page: Page) -> None:
        await expect(page.locator("figure.chart canvas")).to_have_count(3, timeout=WAIT_MS)

    pages = [
        ("approvals", "Approvals", await rows("table.approvals")),
        ("pairing", "Pairing", await rows("table.pairing-pending")),
        ("cron", "Cron jobs", await rows("table.cron-jobs")),
        ("usage", "Usage and cost", charts_drawn),
        ("health", "Health", await rows("table.health-services")),
        ("config", "Configuration", await rows("table.config-audit")),
    ]
    found: list[str] = []
    async with browser() as (_, chromium):
        for route, heading, ready in pages:
            found += await shots_and_axe(chromium, services, route, heading, ready, out)
    print(f"Control UI page screenshots: {out}")
    assert found == []
    assert len(list(out.glob("*.png"))) == 2 * len(pages)
