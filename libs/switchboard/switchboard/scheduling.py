"""What the scheduler, the agent, the gateway and the CLI agree on about scheduled jobs: the
INBOUND channel of fired jobs, the markers a fired job's message carries, the heartbeat's
no-op answer, and how an interval is written (``30s``, ``5m``, ``1h30m``)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from .errors import InvalidSchedule

CHANNEL = "cron"  # fired jobs arrive on sb.inbound.cron
ACCOUNT = "default"
# reply_context keys of a fired job's InboundMessage.
KIND_KEY = "sb_kind"  # the job's kind ("message", "heartbeat", "watch_url"...)
JOB_KEY = "sb_job"  # the job's name
HEARTBEAT = "heartbeat"
# A heartbeat run whose whole answer (trimmed) is this token delivers nothing to any chat.
HEARTBEAT_OK = "HEARTBEAT_OK"
HEARTBEAT_FILE = "HEARTBEAT.md"
KINDS = ("message", "heartbeat", "webhook", "watch_url", "watch_file")
JOB_NAME_PATTERN = r"^[A-Za-z0-9_.-]{1,64}$"

_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION = re.compile(r"(\d+)(ms|s|m|h|d)")


def parse_duration_ms(text: str) -> int:
    """``30s``, ``5m``, ``1h30m``, ``2d``, ``500ms`` -> milliseconds."""
    value = text.strip().lower()
    pos, total = 0, 0
    for match in _DURATION.finditer(value):
        if match.start() != pos:
            break
        total += int(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if not value or pos != len(value):
        raise InvalidSchedule(
            f"invalid interval {text!r}: expected a number and a unit (ms, s, m, h, d), "
            "e.g. 30s, 5m, 1h30m"
        )
    return total


def format_duration_ms(ms: int) -> str:
    """The inverse of :func:`parse_duration_ms` (``5400000`` -> ``1h30m``)."""
    if ms <= 0:
        return "0s"
    parts = []
    for unit in ("d", "h", "m", "s", "ms"):
        n, ms = divmod(ms, _UNITS[unit])
        if n:
            parts.append(f"{n}{unit}")
    return "".join(parts)


def parse_at_ms(text: str, now: datetime | None = None) -> int:
    """A one-shot time: ISO 8601 (``2026-12-24T18:00``, ``...+01:00``; no offset = UTC) or
    ``+<interval>`` from now (``+10m``) -> epoch milliseconds."""
    value = text.strip()
    now = now or datetime.now(UTC)
    if value.startswith("+"):
        return int((now + timedelta(milliseconds=parse_duration_ms(value[1:]))).timestamp() * 1000)
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidSchedule(
            f"invalid time {text!r}: expected ISO 8601 (2026-12-24T18:00, with an optional "
            "offset; UTC without one) or +<interval> (+10m)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def is_heartbeat_ok(text: str) -> bool:
    """Is a heartbeat run's answer the agreed no-op (nothing to deliver)?"""
    return text.strip() == HEARTBEAT_OK
