"""The environment every service a test starts begins from, and what differs between
pytest-xdist workers (``make test`` runs one per core)."""

from __future__ import annotations

import os

DEFAULT_SANDBOX_UID = 65534
# Settings a developer's shell may hold (SB_QUEUE_MODE, SB_MAX_ITERATIONS, a model key, a
# collector) never reach a service a test starts: only what the test passes does.
NOT_INHERITED_PREFIXES = ("SB_", "OPENAI_", "ANTHROPIC_", "OTEL_")


def sandbox_uid() -> int:
    """The uid this worker's sandboxes run as (``SB_EXEC_SANDBOX_UID``): gw0 65534, gw1 65533
    and so on. RLIMIT_NPROC counts a uid's processes machine-wide, so with one uid a fork bomb
    test on one worker made another worker's sandboxed command fail to fork."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return DEFAULT_SANDBOX_UID - int(worker.removeprefix("gw") or 0)


def base_env() -> dict[str, str]:
    """The test process's environment minus every Switchboard, model and telemetry setting,
    plus this worker's sandbox uid: what a started service gets before the test's own
    settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(NOT_INHERITED_PREFIXES)}
    env["SB_EXEC_SANDBOX_UID"] = str(sandbox_uid())
    return env
