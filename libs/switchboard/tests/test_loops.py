"""SB_EVENT_LOOP: which loop a process runs on."""

from __future__ import annotations

import asyncio

import pytest
import uvloop

from switchboard import loops
from switchboard.cli.settings import LauncherSettings
from switchboard.settings import CommonSettings


async def loop_type() -> type:
    return type(asyncio.get_running_loop())


def test_auto_and_uvloop_run_on_uvloop_and_asyncio_on_the_standard_loop() -> None:
    assert loops.run(loop_type()) is uvloop.Loop
    assert loops.run(loop_type(), loops.EventLoop.UVLOOP) is uvloop.Loop
    standard = loops.run(loop_type(), loops.EventLoop.ASYNCIO)
    assert standard is not uvloop.Loop and issubclass(standard, asyncio.BaseEventLoop)


def test_auto_falls_back_without_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loops, "uvloop_installed", lambda: False)
    assert loops.loop_factory(loops.EventLoop.AUTO) is None
    assert loops.run(loop_type()) is not uvloop.Loop


def test_the_setting_is_read_and_checked() -> None:
    environ = {"SB_EVENT_LOOP": "asyncio"}
    assert CommonSettings.from_environ(environ).event_loop is loops.EventLoop.ASYNCIO
    assert LauncherSettings.from_environ(environ).event_loop is loops.EventLoop.ASYNCIO
    assert CommonSettings.from_environ({}).event_loop is loops.EventLoop.AUTO
    with pytest.raises(ValueError, match="event_loop"):
        CommonSettings.from_environ({"SB_EVENT_LOOP": "trio"})
