from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from switchboard_tools.registry import ToolContext, ToolOutput, ToolRegistry
from switchboard_tools.tools.get_time import GetTimeTool

Call = Callable[..., Awaitable[ToolOutput]]

FIXED = datetime(2025, 7, 14, 10, 30, 5, 123456, tzinfo=UTC)  # a Monday


def fixed_registry() -> ToolRegistry:
    return ToolRegistry([GetTimeTool(clock=lambda: FIXED)])


async def test_default_is_utc(ctx: ToolContext) -> None:
    out = await fixed_registry().execute("get_time", "{}", ctx)
    assert not out.is_error
    assert out.content == "2025-07-14T10:30:05+00:00 (Monday, UTC)"
    assert out.details == {
        "iso": "2025-07-14T10:30:05+00:00",
        "weekday": "Monday",
        "timezone": "UTC",
        "utc_offset": "+0000",
        "unix": 1752489005,
    }


async def test_with_timezone(ctx: ToolContext) -> None:
    reg = fixed_registry()
    out = await reg.execute("get_time", '{"timezone": "Asia/Tokyo"}', ctx)
    assert out.content == "2025-07-14T19:30:05+09:00 (Monday, Asia/Tokyo)"
    out = await reg.execute("get_time", '{"timezone": "America/Los_Angeles"}', ctx)
    assert out.content == "2025-07-14T03:30:05-07:00 (Monday, America/Los_Angeles)"
    out = await reg.execute("get_time", '{"timezone": "Pacific/Kiritimati"}', ctx)
    assert out.details["weekday"] == "Tuesday"


async def test_real_clock(call: Call) -> None:
    out = await call("get_time", {"timezone": "Europe/Paris"})
    assert not out.is_error
    parsed = datetime.fromisoformat(out.details["iso"])
    assert abs((parsed - datetime.now(UTC)).total_seconds()) < 60
    assert out.details["weekday"] == parsed.strftime("%A")


async def test_bad_zone(call: Call) -> None:
    for zone in ["Mars/Olympus_Mons", "../../../etc/passwd", "/etc/localtime", "Europe/"]:
        out = await call("get_time", {"timezone": zone})
        assert out.is_error, zone
        assert out.content.startswith(f"Invalid arguments for get_time: Unknown time zone {zone!r}")
        assert "Europe/Paris" in out.content
    out = await call("get_time", {"timezone": 5})
    assert out.content == "Invalid arguments for get_time: at 'timezone': 5 is not of type 'string'"
