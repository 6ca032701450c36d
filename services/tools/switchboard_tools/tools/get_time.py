"""get_time: the current date and time, in UTC or an IANA time zone."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, ClassVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from switchboard_tools.errors import ArgumentError
from switchboard_tools.registry import Tool, ToolContext, ToolOutput


def load_zone(name: str) -> ZoneInfo:
    """The IANA zone ``name``, or :class:`ArgumentError` with an example of a valid name."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise ArgumentError(
            f"Unknown time zone {name!r}: use an IANA name such as 'Europe/Paris', "
            "'America/New_York' or 'UTC'"
        ) from exc


class GetTimeTool(Tool):
    name: ClassVar[str] = "get_time"
    description: ClassVar[str] = (
        "Get the current date and time (ISO 8601) and the day of the week, in UTC or in the "
        "given IANA time zone."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "timezone": {
                "type": "string",
                "minLength": 1,
                "maxLength": 64,
                "description": "IANA time zone name, e.g. 'Europe/Paris'. Default: UTC.",
            }
        },
        "additionalProperties": False,
    }
    groups: ClassVar[tuple[str, ...]] = ("time",)

    def __init__(
        self, *, default_timezone: str = "UTC", clock: Callable[[], datetime] | None = None
    ) -> None:
        self._default = default_timezone
        self._clock = clock or (lambda: datetime.now(UTC))

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        zone_name: str = args.get("timezone") or self._default
        zone = load_zone(zone_name)
        now = self._clock().astimezone(zone)
        iso = now.isoformat(timespec="seconds")
        weekday = now.strftime("%A")
        return ToolOutput(
            content=f"{iso} ({weekday}, {zone_name})",
            details={
                "iso": iso,
                "weekday": weekday,
                "timezone": zone_name,
                "utc_offset": now.strftime("%z"),
                "unix": int(now.timestamp()),
            },
        )
