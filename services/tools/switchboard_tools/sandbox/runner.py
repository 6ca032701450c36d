"""Running sandboxed commands: to completion (:func:`spawn_and_collect`) or left running under
a supervisor task (:func:`spawn_background`, for long-running processes, output in a ring
buffer). The mechanics of one child are in :mod:`switchboard_tools.sandbox.child`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from switchboard_tools.output import Output, OutputCallback, OutputStreamer, RingOutput
from switchboard_tools.sandbox.child import (
    Child,
    LaunchFailed,
    SpawnOptions,
    dying_with_parent,
)


@dataclass(frozen=True)
class ProcessResult:
    """The outcome of one command.

    ``exit_code`` is ``None`` when the command was killed because it timed out; a negative
    value ``-N`` means it was killed by signal ``N``. ``output`` is stdout and stderr merged,
    decoded as UTF-8 (invalid bytes replaced), at most ``output_cap`` bytes before decoding.
    ``isolation`` is the attestation measured for this very call, when the sandbox measures.
    """

    exit_code: int | None
    output: str
    truncated: bool
    timed_out: bool
    duration_ms: float
    isolation: dict[str, Any] | None = field(default=None, compare=False)


async def spawn_and_collect(
    argv: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    output_cap: int,
    options: SpawnOptions,
    exit_grace_s: float,
    drain_limit_bytes: int,
    on_output: OutputCallback | None = None,
) -> ProcessResult:
    """Run ``argv`` to completion and collect its output (see :meth:`Child.start` and
    :meth:`Child.supervise` for the limits). ``on_output`` receives the output as it arrives
    (only what fits in the cap), coalesced by an :class:`OutputStreamer`; every piece has been
    handed over before this returns. The child is killed if this process dies."""
    options = dying_with_parent(options)
    started = time.monotonic()
    output = Output(output_cap)
    streamer = OutputStreamer(on_output) if on_output is not None else None
    try:
        try:
            child = await Child.start(
                argv,
                cwd=cwd,
                env=env,
                options=options,
                sink=output,
                on_chunk=streamer.feed if streamer is not None else None,
                drain_limit_bytes=drain_limit_bytes,
            )
        except LaunchFailed as exc:
            elapsed = (time.monotonic() - started) * 1000.0
            return ProcessResult(exc.exit_code, f"{exc.message}\n", False, False, elapsed)
        await child.supervise(timeout_s, exit_grace_s)
        if streamer is not None:
            await streamer.close()
    finally:
        if streamer is not None:
            streamer.abort()
    return ProcessResult(
        exit_code=child.exit_code,
        output=output.text(),
        truncated=output.truncated,
        timed_out=child.timed_out,
        duration_ms=child.duration_ms(),
    )


async def spawn_background(
    argv: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    lifetime_s: float,
    output_cap: int,
    options: SpawnOptions,
    exit_grace_s: float,
) -> Child:
    """Start ``argv`` and leave it running under a supervisor task that kills its group after
    ``lifetime_s`` (``Child.timed_out``) or once it exits. Its output goes to a ring buffer
    keeping the last ``output_cap`` bytes. It is killed if this process dies. Raises
    :class:`LaunchFailed`."""
    options = dying_with_parent(options)
    child = await Child.start(argv, cwd=cwd, env=env, options=options, sink=RingOutput(output_cap))
    child.supervisor = asyncio.create_task(child.supervise(lifetime_s, exit_grace_s))
    return child
