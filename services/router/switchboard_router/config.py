"""Router settings."""

from __future__ import annotations

from pydantic import Field, field_validator

from switchboard.settings import CommonSettings

QUEUE_MODES = ("queue", "followup", "collect", "steer", "interrupt")


class RouterSettings(CommonSettings):
    default_agent: str = Field(default="main", pattern=r"^[a-z0-9_-]{1,64}$")
    # Per-channel queue modes, e.g. SB_CHANNEL_QUEUE_MODES='{"telegram": "collect"}'. A channel
    # without one follows the agent's SB_QUEUE_MODE; a session override beats both.
    channel_queue_modes: dict[str, str] = Field(default_factory=dict)

    @field_validator("channel_queue_modes")
    @classmethod
    def _known_modes(cls, value: dict[str, str]) -> dict[str, str]:
        for channel, mode in value.items():
            if mode not in QUEUE_MODES:
                raise ValueError(
                    f"queue mode {mode!r} of channel {channel!r} is not one of {QUEUE_MODES}"
                )
        return value

    concurrency: int = Field(default=64, ge=1, le=10_000)
