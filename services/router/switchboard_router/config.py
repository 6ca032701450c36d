"""Router settings."""

from __future__ import annotations

from pydantic import Field
from switchboard.settings import CommonSettings


class RouterSettings(CommonSettings):
    default_agent: str = Field(default="main", pattern=r"^[a-z0-9_-]{1,64}$")
    default_queue_mode: str = "queue"
    concurrency: int = Field(default=64, ge=1, le=10_000)
