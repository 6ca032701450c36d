"""Router settings."""

from __future__ import annotations

from pydantic import Field

from switchboard.queue_modes import QueueMode
from switchboard.sessions import AgentId
from switchboard.settings import CommonSettings


class RouterSettings(CommonSettings):
    default_agent: AgentId = "main"
    # Per-channel queue modes, e.g. SB_CHANNEL_QUEUE_MODES='{"telegram": "collect"}'. A channel
    # without one follows the agent's SB_QUEUE_MODE; a session override beats both.
    channel_queue_modes: dict[str, QueueMode] = Field(default_factory=dict)
    concurrency: int = Field(default=64, ge=1, le=10_000)
