"""When jobs run: cron across DST transitions in a test time zone, quiet hours holding a
proactive job until they end (an urgent one runs), watchers waking the agent only on change."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from zoneinfo import ZoneInfo

import grpc
import pytest

from switchboard.v1 import scheduler_pb2
from switchboard_scheduler.config import QuietHours
from switchboard_scheduler.jobs import Job
from switchboard_scheduler.schedule import quiet_until
from tests.support.scheduler import fired, message_job, scheduler_service, wait_until

BERLIN = ZoneInfo("Europe/Berlin")


def local(year: int, month: int, day: int, hour: int, minute: int) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=BERLIN)


def runs(cron: str, start: datetime, n: int) -> list[str]:
    job = Job(name="j", kind="message", agent="main", cron=cron, timezone="Europe/Berlin")
    found, slot = [], start
    for _ in range(n):
        nxt = job.following(slot, slot)
        assert nxt is not None
        found.append(nxt.astimezone(BERLIN).isoformat())
        slot = nxt
    return found


def test_a_daily_job_across_spring_forward_runs_once_right_after_the_jump() -> None:
    # 2026-03-29: Europe/Berlin jumps from 02:00 (+01:00) to 03:00 (+02:00); 02:30 never exists.
    assert runs("30 2 * * *", local(2026, 3, 28, 12, 0), 3) == [
        "2026-03-29T03:00:00+02:00",
        "2026-03-30T02:30:00+02:00",
        "2026-03-31T02:30:00+02:00",
    ]
    assert runs("0 9 * * *", local(2026, 3, 28, 12, 0), 2) == [
        "2026-03-29T09:00:00+02:00",  # 07:00 UTC: the wall-clock time is kept, not the offset
        "2026-03-30T09:00:00+02:00",
    ]


def test_a_daily_job_across_fall_back_runs_once_and_hourly_jobs_every_real_hour() -> None:
    # 2026-10-25: 03:00 (+02:00) falls back to 02:00 (+01:00); 02:xx happens twice.
    assert runs("30 2 * * *", local(2026, 10, 24, 12, 0), 2) == [
        "2026-10-25T02:30:00+02:00",
        "2026-10-26T02:30:00+01:00",  # not a second run at 02:30+01:00 on the 25th
    ]
    assert runs("0 * * * *", local(2026, 10, 25, 0, 30), 4) == [
        "2026-10-25T01:00:00+02:00",
        "2026-10-25T02:00:00+02:00",
        "2026-10-25T02:00:00+01:00",
        "2026-10-25T03:00:00+01:00",
    ]


def test_quiet_hours_wrap_midnight_and_the_most_specific_key_wins() -> None:
    quiet = {
        "main": QuietHours(start="22:00", end="07:00", tz="Europe/Berlin"),
        "main:slack": QuietHours(start="12:00", end="13:00", tz="UTC"),
    }
    late = local(2026, 6, 1, 23, 30)
    assert quiet_until(quiet, "main", "", late) == local(2026, 6, 2, 7, 0).astimezone(UTC)
    early = local(2026, 6, 2, 6, 59)
    assert quiet_until(quiet, "main", "telegram", early) == local(2026, 6, 2, 7, 0)
    assert quiet_until(quiet, "main", "", local(2026, 6, 2, 7, 0)) is None
    assert quiet_until(quiet, "main", "slack", late) is None  # slack's own window
    assert quiet_until(quiet, "other", "", late) is None


def _window_ending_soon() -> tuple[str, str, datetime]:
    """A UTC quiet window that holds now and ends in 5 to 6 seconds (whole seconds)."""
    end = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=6)
    start = end - timedelta(minutes=10)
    return start.strftime("%H:%M:%S"), end.strftime("%H:%M:%S"), end


async def test_quiet_hours_hold_a_proactive_job_until_they_end_unless_urgent(
    nats_url: str, database_url: str, tmp_path: Path
) -> None:
    start, end, ends_at = _window_ending_soon()
    quiet = f'{{"main": {{"start": "{start}", "end": "{end}", "tz": "UTC"}}}}'
    async with scheduler_service(nats_url, database_url, tmp_path, SB_QUIET_HOURS=quiet) as s:
        due = int(time.time() * 1000) + 300
        await s.stub.Add(message_job("reminder", at_ms=due))
        await s.stub.Add(message_job("pager", at_ms=due, urgent=True))

        async def held() -> scheduler_pb2.Job | None:
            job = await s.stub.Status(scheduler_pb2.JobName(name="reminder"))
            return job if job.last_result else None

        job = await wait_until(held)
        assert job.last_result.startswith("held by quiet hours until ")
        assert job.next_run_ms == int(ends_at.timestamp() * 1000) and job.enabled
        [urgent] = await wait_until(lambda: fired(nats_url))
        assert urgent.msg_id == f"cron:pager:{due}"  # the urgent job did not wait
        # At the end of the window the held job runs, for the window's end.
        events = await wait_until(
            lambda: _fired_at_least(nats_url, 2), timeout=100, what="the held job"
        )
        assert events[1] == f"cron:reminder:{int(ends_at.timestamp() * 1000)}"
        assert datetime.now(UTC) >= ends_at


async def _fired_at_least(nats_url: str, n: int) -> list[str] | None:
    found = [e.msg_id for e in await fired(nats_url)]
    return found if len(found) >= n else None


class _Page(BaseHTTPRequestHandler):
    body = b"version 1"

    def do_GET(self) -> None:
        body = type(self).body
        self.send_response(200)
        self.send_header("content-type", "text/plain")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def page() -> Iterator[tuple[str, type[_Page]]]:
    handler = type("Page", (_Page,), {"body": b"version 1"})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/status", handler
    finally:
        server.shutdown()


async def test_a_url_watcher_wakes_the_agent_only_when_the_content_changed(
    nats_url: str, database_url: str, tmp_path: Path, page: tuple[str, type[_Page]]
) -> None:
    url, handler = page
    allow = '["127.0.0.0/8"]'
    async with scheduler_service(
        nats_url, database_url, tmp_path, SB_SCHEDULER_FETCH_ALLOW_CIDRS=allow
    ) as s:
        job = scheduler_pb2.Job(
            name="status", kind="watch_url", url=url, every_ms=3_600_000, message="tell me"
        )
        await s.stub.Add(job)
        name = scheduler_pb2.JobName(name="status")
        first = await s.stub.RunNow(name)
        assert (first.result, first.error) == ("first look", "")
        assert (await s.stub.RunNow(name)).result == "unchanged"
        assert await fired(nats_url) == []
        handler.body = b"version 2: the deploy finished"
        changed = await s.stub.RunNow(name)
        assert changed.result == "changed, published"
        assert changed.job.content_sha256 != first.job.content_sha256
        assert (await s.stub.RunNow(name)).result == "unchanged"
        [event] = await fired(nats_url)
        text = event.message.text
        assert f"{url} changed" in text and "tell me" in text and "the deploy finished" in text
        assert event.message.reply_context["sb_kind"] == "watch_url"


async def test_the_ssrf_guard_refuses_a_watcher_of_an_internal_address(
    nats_url: str, database_url: str, tmp_path: Path, page: tuple[str, type[_Page]]
) -> None:
    url, _ = page
    async with scheduler_service(nats_url, database_url, tmp_path) as s:
        await s.stub.Add(
            scheduler_pb2.Job(name="internal", kind="watch_url", url=url, every_ms=3_600_000)
        )
        ran = await s.stub.RunNow(scheduler_pb2.JobName(name="internal"))
        assert ran.error.startswith("refused:") and "127.0.0.1" in ran.error
        assert ran.job.content_sha256 == ""


async def test_a_file_watcher_reads_inside_the_workspace_only(
    nats_url: str, database_url: str, tmp_path: Path
) -> None:
    workspace = tmp_path / "workspaces" / "main"
    (workspace / "notes").mkdir(parents=True)
    (tmp_path / "secret.txt").write_text("outside")
    (workspace / "notes" / "escape.md").symlink_to(tmp_path / "secret.txt")
    async with scheduler_service(nats_url, database_url, tmp_path) as s:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await s.stub.Add(
                scheduler_pb2.Job(
                    name="bad", kind="watch_file", path="../secret.txt", every_ms=3_600_000
                )
            )
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "without '..'" in (caught.value.details() or "")
        for name, path in (("todo", "notes/todo.md"), ("escape", "notes/escape.md")):
            await s.stub.Add(
                scheduler_pb2.Job(name=name, kind="watch_file", path=path, every_ms=3_600_000)
            )
        escape = await s.stub.RunNow(scheduler_pb2.JobName(name="escape"))
        assert escape.error == (
            "notes/escape.md is or passes through a symbolic link; a watcher follows none"
        )
        todo = scheduler_pb2.JobName(name="todo")
        assert (await s.stub.RunNow(todo)).result == "first look"  # absent, recorded
        (workspace / "notes" / "todo.md").write_text("- water the plants\n")
        assert (await s.stub.RunNow(todo)).result == "changed, published"
        assert (await s.stub.RunNow(todo)).result == "unchanged"
        [event] = await fired(nats_url)
        assert "notes/todo.md changed" in event.message.text
        assert "water the plants" in event.message.text
