"""A job as the scheduler keeps it: checked when it is added or changed (a bad schedule, URL or
path is an error there, never at fire time), converted to and from its proto and its row."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from switchboard import scheduling
from switchboard.errors import InvalidSessionKey
from switchboard.sessions import cron_key, is_agent_id, validate_session_key
from switchboard.v1 import messages_pb2, scheduler_pb2

from .errors import InvalidJob
from .schedule import check_cron, next_cron, next_every

_NAME = re.compile(scheduling.JOB_NAME_PATTERN.strip("^$"))
MAX_MESSAGE = 20_000
MAX_BODY = 64 * 1024
PROACTIVE = frozenset({"message", "heartbeat", "watch_url", "watch_file"})
DEFAULT_HEARTBEAT = (
    f"Read {scheduling.HEARTBEAT_FILE} and do what it asks. If nothing needs attention, answer "
    f"exactly {scheduling.HEARTBEAT_OK}."
)


def _ms(value: datetime | None) -> int:
    return int(value.timestamp() * 1000) if value else 0


def from_ms(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


@dataclass
class Job:
    name: str
    kind: str
    agent: str
    session_key: str = ""
    message: str = ""
    cron: str = ""
    timezone: str = ""
    every_ms: int = 0
    at: datetime | None = None
    url: str = ""
    path: str = ""
    body_json: str = ""
    deliver_to: messages_pb2.DeliveryTarget = field(default_factory=messages_pb2.DeliveryTarget)
    enabled: bool = True
    missed: str = "skip"
    urgent: bool = False
    next_run: datetime | None = None
    last_run: datetime | None = None
    last_result: str = ""
    last_error: str = ""
    runs: int = 0
    content_sha256: str = ""
    created_at: datetime | None = None

    @property
    def target_session(self) -> str:
        return self.session_key or cron_key(self.name)

    @property
    def proactive(self) -> bool:
        """Does it speak to someone (held in quiet hours)? Webhooks do not."""
        return self.kind in PROACTIVE

    @property
    def schedule_text(self) -> str:
        if self.cron:
            return f"cron {self.cron} ({self.timezone or 'UTC'})"
        if self.every_ms:
            return f"every {scheduling.format_duration_ms(self.every_ms)}"
        return f"at {self.at.isoformat() if self.at else '?'}"

    def first_run(self, now: datetime) -> datetime | None:
        """When a new (or re-enabled, or rescheduled) job runs first."""
        if self.cron:
            return next_cron(self.cron, self.timezone, now)
        if self.every_ms:
            return now + timedelta(milliseconds=self.every_ms)
        return self.at

    def following(self, slot: datetime, now: datetime) -> datetime | None:
        """The run after the one of ``slot`` (None: a one-shot is done)."""
        if self.cron:
            return next_cron(self.cron, self.timezone, max(slot, now))
        if self.every_ms:
            return next_every(slot, self.every_ms, now)
        return None

    def to_proto(self) -> scheduler_pb2.Job:
        return scheduler_pb2.Job(
            name=self.name,
            kind=self.kind,
            cron=self.cron,
            timezone=self.timezone,
            every_ms=self.every_ms,
            at_ms=_ms(self.at),
            agent=self.agent,
            session_key=self.session_key,
            message=self.message,
            url=self.url,
            path=self.path,
            body_json=self.body_json,
            deliver_to=self.deliver_to,
            enabled=self.enabled,
            missed=self.missed,
            urgent=self.urgent,
            next_run_ms=_ms(self.next_run),
            last_run_ms=_ms(self.last_run),
            last_result=self.last_result,
            last_error=self.last_error,
            runs=self.runs,
            created_at_ms=_ms(self.created_at),
            content_sha256=self.content_sha256,
        )

    @classmethod
    def from_row(cls, row: asyncpg.Record) -> Job:
        target = messages_pb2.DeliveryTarget()
        target.ParseFromString(bytes(row["deliver_to"]))
        values: dict[str, Any] = {k: row[k] for k in _COLUMNS if k != "deliver_to"}
        return cls(deliver_to=target, **values)

    def row(self) -> dict[str, Any]:
        values = {k: getattr(self, k) for k in _COLUMNS}
        values["deliver_to"] = self.deliver_to.SerializeToString()
        return values


_COLUMNS = [
    "name",
    "kind",
    "agent",
    "session_key",
    "message",
    "cron",
    "timezone",
    "every_ms",
    "at",
    "url",
    "path",
    "body_json",
    "deliver_to",
    "enabled",
    "missed",
    "urgent",
    "next_run",
    "last_run",
    "last_result",
    "last_error",
    "runs",
    "content_sha256",
    "created_at",
]
COLUMNS = tuple(_COLUMNS)


def from_proto(p: scheduler_pb2.Job, default_agent: str) -> Job:
    return Job(
        name=p.name,
        kind=p.kind or "message",
        agent=p.agent or default_agent,
        session_key=p.session_key,
        message=p.message,
        cron=p.cron.strip(),
        timezone=p.timezone.strip(),
        every_ms=p.every_ms,
        at=from_ms(p.at_ms) if p.at_ms else None,
        url=p.url.strip(),
        path=p.path.strip(),
        body_json=p.body_json,
        deliver_to=p.deliver_to,
        enabled=p.enabled,
        missed=p.missed or "skip",
        urgent=p.urgent,
    )


UPDATABLE = frozenset(
    [
        "enabled",
        "message",
        "cron",
        "timezone",
        "every_ms",
        "at_ms",
        "session_key",
        "url",
        "path",
        "body_json",
        "deliver_to",
        "missed",
        "urgent",
    ]
)
SCHEDULE_FIELDS = frozenset({"cron", "timezone", "every_ms", "at_ms"})


def updated(job: Job, p: scheduler_pb2.Job, fields: list[str]) -> Job:
    """``job`` with ``fields`` taken from ``p``; a schedule field replaces the schedule."""
    unknown = sorted(set(fields) - UPDATABLE)
    if unknown:
        raise InvalidJob(
            f"cannot update {', '.join(unknown)}; updatable: {', '.join(sorted(UPDATABLE))}"
        )
    if not fields:
        raise InvalidJob("no fields to update given")
    new = replace(job)
    if SCHEDULE_FIELDS & set(fields) - {"timezone"}:
        new.cron, new.every_ms, new.at, new.timezone = "", 0, None, ""
    for name in fields:
        if name == "at_ms":
            new.at = from_ms(p.at_ms) if p.at_ms else None
        elif name in ("cron", "timezone", "url", "path"):
            setattr(new, name, getattr(p, name).strip())
        else:
            setattr(new, name, getattr(p, name))
    if new.missed == "":
        new.missed = "skip"
    return new


def check(job: Job, *, min_interval_ms: int, now: datetime, grace_s: float) -> None:
    """Raise :class:`InvalidJob` with the first problem of ``job``."""
    if not _NAME.fullmatch(job.name):
        raise InvalidJob(f"invalid job name {job.name!r}: expected 1-64 of A-Z a-z 0-9 _ . -")
    if job.kind not in scheduling.KINDS:
        raise InvalidJob(f"unknown kind {job.kind!r}; one of {', '.join(scheduling.KINDS)}")
    if not is_agent_id(job.agent):
        raise InvalidJob(f"invalid agent id {job.agent!r}: expected 1-64 of a-z 0-9 _ -")
    if job.session_key:
        try:
            validate_session_key(job.session_key)
        except InvalidSessionKey as exc:
            raise InvalidJob(f"session_key: {exc}") from exc
    if job.missed not in ("skip", "run_once"):
        raise InvalidJob(f"missed must be 'skip' or 'run_once', not {job.missed!r}")
    if len(job.message) > MAX_MESSAGE:
        raise InvalidJob(f"message longer than {MAX_MESSAGE} characters")
    if job.kind == "message" and not job.message.strip():
        raise InvalidJob("a message job needs a message (the text the agent receives)")
    _check_schedule(job, min_interval_ms, now, grace_s)
    _check_action(job)


def _check_schedule(job: Job, min_interval_ms: int, now: datetime, grace_s: float) -> None:
    given = [n for n, v in (("cron", job.cron), ("every", job.every_ms), ("at", job.at)) if v]
    if len(given) != 1:
        raise InvalidJob(
            "give exactly one schedule: a cron expression (with an optional time zone), an "
            f"interval (every) or a time (at); got {', '.join(given) or 'none'}"
        )
    if job.timezone and not job.cron:
        raise InvalidJob("a time zone goes with a cron expression only")
    if job.cron:
        check_cron(job.cron, job.timezone)
    elif job.every_ms:
        if job.every_ms < min_interval_ms:
            raise InvalidJob(f"interval too short: at least {min_interval_ms / 1000:g}s")
    elif job.at is not None and job.at < now - timedelta(seconds=grace_s) and job.enabled:
        raise InvalidJob(f"the time {job.at.isoformat()} has passed")


def _check_action(job: Job) -> None:
    if job.kind in ("webhook", "watch_url"):
        if not job.url.startswith(("http://", "https://")):
            raise InvalidJob(f"a {job.kind} job needs an http:// or https:// url")
    elif job.url:
        raise InvalidJob(f"url is for webhook and watch_url jobs, not {job.kind}")
    if job.kind == "watch_file":
        check_workspace_path(job.path)
    elif job.path:
        raise InvalidJob(f"path is for watch_file jobs, not {job.kind}")
    if job.body_json and job.kind != "webhook":
        raise InvalidJob("body_json is for webhook jobs")
    if len(job.body_json) > MAX_BODY:
        raise InvalidJob(f"body_json larger than {MAX_BODY} characters")
    if job.body_json:
        try:
            json.loads(job.body_json)
        except ValueError as exc:
            raise InvalidJob(f"body_json is not JSON: {exc}") from exc
    target = job.deliver_to
    if target.channel and (not target.chat.id or target.channel == scheduling.CHANNEL):
        raise InvalidJob("deliver_to needs a chat channel and a chat id")


def check_workspace_path(path: str) -> str:
    """A relative path inside the agent's workspace: no absolute path, no ``..``."""
    parts = path.split("/")
    if not path or path.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise InvalidJob(
            f"invalid path {path!r}: a relative path inside the agent's workspace, "
            "without '..', '.' or empty parts (e.g. notes/todo.md)"
        )
    if len(path) > 512 or "\x00" in path:
        raise InvalidJob("path too long or with a NUL character")
    return path
