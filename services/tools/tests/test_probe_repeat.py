"""The start-up probe, again and again (issue 25): a probe that now and then waited its full
10 s for a sandboxed ``true`` and reported the layer "timed out before its isolation could be
measured" delayed a whole stack's start by as much. Each probe here must find what the first one
found, under each wrapper; a stalled launch shows as a layer lost, and the bound on each probe
only keeps a hang from holding the suite."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from switchboard_tools.sandbox import probe_sandbox
from switchboard_tools.sandbox.probe import Wrapper

from .sandbox_checks import SANDBOX_UID
from .wrappers import WRAPPERS, native_wrapper

ROUNDS = 15
PROBE_BOUND_S = 60.0  # generous: a probe takes well under a second; a stall at least 10 s


@pytest.fixture(params=WRAPPERS)
def wrapper(request: pytest.FixtureRequest) -> Iterator[tuple[Wrapper, str | None]]:
    """``(kind, compiled wrapper path or None)``."""
    if request.param == "python":
        yield "python", None
        return
    with native_wrapper() as path:
        yield "native", path


async def test_repeated_probes_find_the_same_layers(wrapper: tuple[Wrapper, str | None]) -> None:
    kind, native = wrapper

    async def probe() -> dict[str, str]:
        sandbox = await asyncio.wait_for(
            probe_sandbox(uid=SANDBOX_UID, wrapper=kind, native_path=native), PROBE_BOUND_S
        )
        assert sandbox.layers.wrapper == kind, sandbox.layers.status
        return dict(sandbox.layers.status)

    first = await probe()
    for round_ in range(ROUNDS):
        assert await probe() == first, f"round {round_}"
