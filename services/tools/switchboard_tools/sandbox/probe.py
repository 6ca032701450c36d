"""Start-up probe: run a trivial command under each isolation layer; keep what really works.

A layer whose probe fails is reported as unavailable with the reason, never assumed.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

from switchboard_tools.sandbox import inner
from switchboard_tools.sandbox.child import become_subreaper
from switchboard_tools.sandbox.layered import LayeredSandbox, Layers
from switchboard_tools.sandbox.profile import SandboxProfile, SandboxUnavailable

log = logging.getLogger(__name__)

PYTHON_CANDIDATES = ("/usr/bin/python3", "/usr/local/bin/python3")
_PROBE_TIMEOUT_S = 10.0
_OFF = {"seccomp": False, "landlock": False, "namespaces": False}


def _python_candidates() -> list[str]:
    found = [p for p in PYTHON_CANDIDATES if os.access(p, os.X_OK)]
    own = os.path.realpath(sys.executable)
    return [*found, own] if own not in found else found


async def _try(
    sandbox: LayeredSandbox,
    workspace: Path,
    layers: dict[str, bool],
    require: frozenset[str],
    network: bool = True,
) -> str:
    """``"ok"`` if ``true`` ran with ``require`` measured in force, else the reason."""
    profile = SandboxProfile(require=require, network=network)
    try:
        result = await sandbox.run(
            ["true"],
            cwd=workspace,
            timeout_s=_PROBE_TIMEOUT_S,
            output_cap=4096,
            profile=profile,
            layers={**_OFF, **layers},
        )
    except SandboxUnavailable as exc:
        return f"unavailable: {exc.message}"
    except OSError as exc:
        return f"unavailable: {exc.strerror or exc}"
    if result.exit_code != 0:
        return f"unavailable: exit code {result.exit_code}: {result.output.strip()[-200:]}"
    return "ok"


async def probe_layers(sandbox: LayeredSandbox, bwrap_path: str | None = "bwrap") -> LayeredSandbox:
    """Probe every layer on ``sandbox`` and record the outcome in ``sandbox.layers``."""
    layers = Layers()
    sandbox.layers = layers
    with tempfile.TemporaryDirectory(prefix="sb-probe-") as tmp:
        workspace = Path(tmp)
        for python in _python_candidates():
            layers.python = python
            status = await _try(sandbox, workspace, {}, frozenset({"no_new_privs"}))
            if status == "ok":
                break
            layers.python = None
        layers.status["measurement"] = "ok" if layers.python else "unavailable: no python3 runs"
        if layers.python is None:
            for name in ("seccomp", "landlock", "namespaces"):
                layers.status[name] = "unavailable: nothing to measure it with"
            return sandbox

        # The layers are probed at once (each run enables only its own layer).
        layers.landlock_abi = _landlock_abi()
        bwrap = shutil.which(bwrap_path) if bwrap_path else None
        layers.bwrap = bwrap
        seccomp, landlock, namespaces = await asyncio.gather(
            _try(sandbox, workspace, {"seccomp": True}, frozenset({"seccomp"}), network=False),
            _try(sandbox, workspace, {"landlock": True}, frozenset({"landlock"})),
            _try(sandbox, workspace, {"namespaces": True}, frozenset({"namespaces"}), network=False)
            if bwrap is not None
            else _unavailable(f"bubblewrap not found ({bwrap_path})"),
        )
        layers.status["seccomp"] = seccomp
        layers.seccomp = seccomp == "ok"
        abi = layers.landlock_abi
        layers.status["landlock"] = landlock if abi else "unavailable: kernel has no landlock"
        if landlock != "ok":
            layers.landlock_abi = 0
        layers.status["namespaces"] = namespaces
        if namespaces != "ok":
            layers.bwrap = None
    log.info("sandbox layers probed", extra={"isolation": sandbox.attestation()})
    return sandbox


async def _unavailable(reason: str) -> str:
    return f"unavailable: {reason}"


def _landlock_abi() -> int:
    try:
        return inner.landlock_abi()
    except (OSError, AttributeError):
        return 0


async def probe_sandbox(
    *,
    bwrap_path: str | None = "bwrap",
    uid: int | None = 65534,
    default_profile: SandboxProfile | None = None,
) -> LayeredSandbox:
    """Build a :class:`LayeredSandbox` and probe it: the executor's start-up factory. Also
    makes this process the subreaper of sandbox orphans (see :func:`become_subreaper`)."""
    become_subreaper()
    sandbox = LayeredSandbox(uid=uid)
    if default_profile is not None:
        sandbox.default_profile = default_profile
    return await probe_layers(sandbox, bwrap_path)
