"""When a job runs: cron expressions in a time zone, fixed intervals, one-shot times, and the
quiet hours that hold proactive runs.

Cron arithmetic is cronsim's. It was chosen over croniter for its DST behaviour, which is
Debian cron's: a job at a fixed time in the hour a spring-forward skips runs once, right after
the jump, and a job at a fixed time in the hour a fall-back repeats runs once, not twice
(croniter 7.0 runs ``30 2 * * *`` twice on the day Europe/Berlin falls back); jobs that fire
every hour or minute still fire in both copies of the repeated hour, since those are real
hours. Times are kept in UTC; a cron expression is evaluated in the job's zone.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from .config import QuietHours
from .errors import InvalidJob

# cronsim reads five fields; the usual nicknames are spelled out here.
ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
MAX_CRON_CHARS = 200


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise InvalidJob(
            f"unknown time zone {name!r} (use an IANA name like Europe/Berlin)"
        ) from exc


def _expression(cron: str) -> str:
    text = " ".join(cron.split())
    return ALIASES.get(text.lower(), text)


def check_cron(cron: str, timezone: str) -> None:
    """Raise :class:`InvalidJob` saying what is wrong with ``cron`` (five fields: minute hour
    day-of-month month day-of-week, or @daily...) or ``timezone``."""
    if len(cron) > MAX_CRON_CHARS:
        raise InvalidJob(f"cron expression longer than {MAX_CRON_CHARS} characters")
    tz = zone(timezone)
    try:
        it = CronSim(_expression(cron), datetime.now(tz))
        next(it)
    except CronSimError as exc:
        raise InvalidJob(
            f"invalid cron expression {cron!r}: {exc} (expected five fields: minute hour "
            "day-of-month month day-of-week, e.g. '0 9 * * MON-FRI', or @hourly, @daily...)"
        ) from exc
    except StopIteration as exc:
        raise InvalidJob(f"cron expression {cron!r} never matches a date") from exc


def next_cron(cron: str, timezone: str, after: datetime) -> datetime:
    """The first time strictly after ``after`` that ``cron`` matches in ``timezone`` (UTC)."""
    tz = zone(timezone)
    # cronsim works at minute precision from its start: start at the minute of ``after`` and
    # skip a match that is not later than it.
    start = after.astimezone(tz).replace(second=0, microsecond=0)
    for found in CronSim(_expression(cron), start):
        if found > after:
            return found.astimezone(UTC)
    raise InvalidJob(f"cron expression {cron!r} never matches a date")


def next_every(slot: datetime, every_ms: int, now: datetime) -> datetime:
    """The first slot of the interval after ``now``, anchored on ``slot`` (no drift)."""
    step = timedelta(milliseconds=every_ms)
    if slot > now:
        return slot
    skipped = (now - slot) // step + 1
    return slot + skipped * step


def quiet_until(
    quiet: dict[str, QuietHours], agent: str, channel: str, now: datetime
) -> datetime | None:
    """When the quiet hours that cover ``now`` for ``agent`` (and a reply ``channel``) end;
    ``None`` outside quiet hours. Keys: ``<agent>:<channel>``, then ``<agent>``, then ``*``."""
    keys = ([f"{agent}:{channel}"] if channel else []) + [agent, "*"]
    rule = next((quiet[k] for k in keys if k in quiet), None)
    if rule is None:
        return None
    start, end, tz = rule.window()
    local = now.astimezone(tz)
    t = local.time().replace(tzinfo=None)
    if start == end:
        return None
    if start < end:
        inside = start <= t < end
        end_day = local.date()
    else:  # wraps midnight: 22:00-07:00
        inside = t >= start or t < end
        end_day = local.date() if t < end else local.date() + timedelta(days=1)
    if not inside:
        return None
    return datetime.combine(end_day, end, tzinfo=tz).astimezone(UTC)
