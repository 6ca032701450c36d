"""Scheduler settings.

Quiet hours (``SB_QUIET_HOURS``): a JSON object whose keys are ``<agent>`` (every job of the
agent), ``<agent>:<channel>`` (its jobs whose reply goes to that channel: ``deliver_to``) or
``*`` (every agent), the most specific winning; each value is ``{"start": "HH:MM", "end":
"HH:MM", "tz": "<IANA zone>"}`` (a window may wrap midnight: 22:00-07:00). A proactive job
(``message``, ``heartbeat``, ``watch_url``, ``watch_file``) due inside its window is held until
the window ends, unless the job is ``urgent``; webhooks are never held.
"""

from __future__ import annotations

import re
from datetime import time
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, field_validator

from switchboard.sessions import AgentId
from switchboard.settings import CommonSettings, DatabaseSettings, RpcSettings

_CLOCK = re.compile(r"([01]\d|2[0-3]):([0-5]\d)(:[0-5]\d)?")


class QuietHours(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    start: str
    end: str
    tz: str = "UTC"

    @field_validator("start", "end")
    @classmethod
    def _clock(cls, value: str) -> str:
        if not _CLOCK.fullmatch(value):
            raise ValueError(f"{value!r} is not a time of day HH:MM[:SS] (00:00-23:59)")
        return value

    @field_validator("tz")
    @classmethod
    def _zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown time zone {value!r}") from exc
        return value

    def window(self) -> tuple[time, time, ZoneInfo]:
        return time.fromisoformat(self.start), time.fromisoformat(self.end), ZoneInfo(self.tz)


class SchedulerSettings(CommonSettings, RpcSettings, DatabaseSettings):
    # Where the scheduler's gRPC listens (embedded mode: 127.0.0.1).
    scheduler_grpc_host: str = "127.0.0.1"
    # Port of the scheduler's gRPC (Scheduler).
    scheduler_grpc_port: int = Field(default=50054, ge=0, le=65535)
    default_agent: AgentId = "main"
    # The agents' workspaces (watch_file jobs read a file inside $SB_WORKSPACES_DIR/<agent>).
    workspaces_dir: Path | None = None
    # The longest a replica sleeps before looking for due jobs (it sleeps less when one is due
    # sooner, and a job added through this replica wakes it at once).
    scheduler_poll_s: float = Field(default=1.0, gt=0, le=60)
    # Due jobs one replica claims per transaction, and fires at once.
    scheduler_batch: int = Field(default=100, ge=1, le=10_000)
    # Due jobs one replica fires at once.
    scheduler_concurrency: int = Field(default=64, ge=1, le=10_000)
    # A job due longer ago than this was missed (the scheduler was down): its policy decides
    # ("skip" or "run_once").
    scheduler_misfire_grace_s: float = Field(default=60.0, gt=0)
    # Shortest "every" interval.
    scheduler_min_interval_s: float = Field(default=1.0, gt=0)
    # Webhooks and URL watchers go through the SSRF guard; these networks are let through.
    scheduler_fetch_allow_cidrs: list[str] = Field(default_factory=list)
    # The largest response body a webhook or URL watcher reads.
    scheduler_fetch_max_bytes: int = Field(default=1024 * 1024, ge=1024, le=64 * 1024 * 1024)
    # The longest one webhook call or URL check may take.
    scheduler_fetch_timeout_s: float = Field(default=15.0, gt=0, le=300)
    # JSON quiet hours per agent, agent:channel or *: {"start": "HH:MM", "end": "HH:MM", "tz"};
    # proactive jobs due inside wait until the window ends (see this module's docstring).
    quiet_hours: dict[str, QuietHours] = Field(default_factory=dict)

    def workspace_root(self) -> Path:
        return self.workspaces_dir or self.home / "workspaces"
