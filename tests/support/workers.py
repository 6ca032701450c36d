"""What differs between pytest-xdist workers (``make test`` runs one per core)."""

from __future__ import annotations

import os

DEFAULT_SANDBOX_UID = 65534


def sandbox_uid() -> int:
    """The uid this worker's sandboxes run as (``SB_EXEC_SANDBOX_UID``): gw0 65534, gw1 65533
    and so on. RLIMIT_NPROC counts a uid's processes machine-wide, so with one uid a fork bomb
    test on one worker made another worker's sandboxed command fail to fork."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return DEFAULT_SANDBOX_UID - int(worker.removeprefix("gw") or 0)
