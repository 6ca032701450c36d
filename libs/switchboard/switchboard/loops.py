"""The event loop a Switchboard process runs on (``SB_EVENT_LOOP``).

``auto`` (the default) is uvloop when it is installed (it is pinned in requirements.txt), else
asyncio's own loop; ``uvloop`` insists on it; ``asyncio`` keeps the standard loop. One place
for the choice: the launcher (one process hosts every service, so the loop's own overhead is
paid by every turn twice over) and each service process call :func:`run`.

Measured with the bench's fake model, one process, 100 sessions at once: the launcher's CPU per
turn went from 24-28 ms to 20-24 ms with uvloop (three interleaved rounds each)."""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Callable, Coroutine
from enum import StrEnum
from typing import Any, TypeVar

T = TypeVar("T")


class EventLoop(StrEnum):
    AUTO = "auto"
    UVLOOP = "uvloop"
    ASYNCIO = "asyncio"


def uvloop_installed() -> bool:
    return importlib.util.find_spec("uvloop") is not None


def loop_factory(choice: EventLoop) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The factory of the loop ``choice`` names (None: asyncio's default)."""
    if choice is EventLoop.ASYNCIO or (choice is EventLoop.AUTO and not uvloop_installed()):
        return None
    import uvloop  # SB_EVENT_LOOP=uvloop without it installed: ImportError says so

    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T], choice: EventLoop = EventLoop.AUTO) -> T:
    """``asyncio.run(main)`` on the chosen loop."""
    with asyncio.Runner(loop_factory=loop_factory(choice)) as runner:
        return runner.run(main)
