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
from typing import Literal

from switchboard_tools.sandbox import inner
from switchboard_tools.sandbox.cgroups import CgroupLimits, Cgroups, CgroupUnavailable
from switchboard_tools.sandbox.layered import LayeredSandbox
from switchboard_tools.sandbox.layers import Layers
from switchboard_tools.sandbox.orphans import become_subreaper
from switchboard_tools.sandbox.profile import OPTIONAL_LAYERS, SandboxProfile, SandboxUnavailable

log = logging.getLogger(__name__)

PYTHON_CANDIDATES = ("/usr/bin/python3", "/usr/local/bin/python3")
_PROBE_TIMEOUT_S = 10.0
_OFF = {"seccomp": False, "landlock": False, "namespaces": False, "cgroup": False}
DISABLED = "disabled by the operator (SB_EXEC_DISABLE_LAYERS)"
Wrapper = Literal["auto", "native", "python"]


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


def _wrappers(wrapper: Wrapper, native_path: str | None) -> tuple[list[tuple[str, str]], str]:
    """The wrappers to try, in order, as ``(kind, program)``; and why the compiled one is not
    among them when it was asked for ("" otherwise)."""
    # Imported here: `python -m switchboard_tools.sandbox.native` (make install) must not find
    # the module imported already by this package's __init__.
    from switchboard_tools.sandbox import native

    candidates: list[tuple[str, str]] = []
    why = ""
    if wrapper in ("auto", "native"):
        built = native.find(Path(native_path) if native_path else None)
        if built is not None:
            candidates.append(("native", str(built)))
        else:
            why = "the compiled wrapper is not built (make install builds it)"
    if wrapper in ("auto", "python"):
        candidates += [("python", python) for python in _python_candidates()]
    return candidates, why


async def _find_wrapper(
    sandbox: LayeredSandbox, workspace: Path, wrapper: Wrapper, native_path: str | None
) -> str:
    """Set ``sandbox.layers``' wrapper to the first that runs ``true`` and measures it; return
    the probe status of the measurement."""
    layers = sandbox.layers
    candidates, why = _wrappers(wrapper, native_path)
    failed = [why] if why else []
    for kind, program in candidates:
        layers.native, layers.python = (program, None) if kind == "native" else (None, program)
        status = await _try(sandbox, workspace, {}, frozenset({"no_new_privs"}))
        if status == "ok":
            if failed and wrapper == "auto":
                log.warning("sandbox: compiled wrapper not used: %s", "; ".join(failed))
            return "ok"
        failed.append(f"{kind} wrapper {program}: {status}")
        layers.native = layers.python = None
    return "unavailable: " + ("; ".join(failed) or "no python3 runs")


async def probe_layers(
    sandbox: LayeredSandbox,
    bwrap_path: str | None = "bwrap",
    disable: frozenset[str] = frozenset(),
    wrapper: Wrapper = "auto",
    native_path: str | None = None,
) -> LayeredSandbox:
    """Probe every layer on ``sandbox`` and record the outcome in ``sandbox.layers``; the
    layers in ``disable`` are not probed nor used (reported as disabled by the operator).
    ``wrapper``: which program confines and measures each call (``auto``: the compiled one when
    built and every layer the host has passes its probe under it, else the Python one; see
    :mod:`.native`); ``native_path``: the compiled one (default :func:`.native.default_path`)."""
    unknown = set(disable) - OPTIONAL_LAYERS
    if unknown:
        raise ValueError(
            f"cannot disable sandbox layer(s) {', '.join(sorted(unknown))}: only "
            f"{', '.join(sorted(OPTIONAL_LAYERS))} can be"
        )
    layers = Layers()
    sandbox.layers = layers
    with tempfile.TemporaryDirectory(prefix="sb-probe-") as tmp:
        workspace = Path(tmp)
        layers.status["measurement"] = await _find_wrapper(sandbox, workspace, wrapper, native_path)
        if layers.wrapper is None:
            for name in sorted(OPTIONAL_LAYERS):
                layers.status[name] = "unavailable: nothing to measure it with"
            return sandbox

        # The layers are probed at once (each run enables only its own layer).
        layers.landlock_abi = _landlock_abi()
        layers.bwrap = shutil.which(bwrap_path) if bwrap_path else None
        cgroups = _find_cgroups(sandbox) if "cgroup" not in disable else DISABLED
        layers.cgroups = cgroups if isinstance(cgroups, Cgroups) else None

        async def probe(name: str) -> str:
            if name in disable:
                return f"unavailable: {DISABLED}"
            if name == "landlock" and not layers.landlock_abi:
                return "unavailable: kernel has no landlock"
            if name == "namespaces" and layers.bwrap is None:
                return f"unavailable: bubblewrap not found ({bwrap_path})"
            if name == "cgroup" and layers.cgroups is None:
                return f"unavailable: {cgroups}"
            network = name == "landlock" or name == "cgroup"  # else: prove it denies it
            status = await _try(sandbox, workspace, {name: True}, frozenset({name}), network)
            if status != "ok":
                failed_runs.append(f"{name}: {status}")
            return status

        failed_runs: list[str] = []
        names = sorted(OPTIONAL_LAYERS)
        for name, status in zip(names, await asyncio.gather(*map(probe, names)), strict=True):
            layers.status[name] = status
        if wrapper == "auto" and layers.wrapper == "native" and failed_runs:
            # A layer the host has did not work under the compiled wrapper: "auto" must not cost
            # a layer, so the Python one is probed too and kept if it has one the other lacks.
            await probe_layers(sandbox, bwrap_path, disable, "python")
            if _working(sandbox.layers) - _working(layers):
                log.warning("sandbox: compiled wrapper not used: %s", "; ".join(failed_runs))
                return sandbox
            sandbox.layers = layers
        layers.seccomp = layers.status["seccomp"] == "ok"
        if layers.status["landlock"] != "ok":
            layers.landlock_abi = 0
        if layers.status["namespaces"] != "ok":
            layers.bwrap = None
        if layers.status["cgroup"] != "ok":
            layers.cgroups = None
    log.info("sandbox layers probed", extra={"isolation": sandbox.attestation()})
    return sandbox


def _working(layers: Layers) -> set[str]:
    return {name for name, status in layers.status.items() if status == "ok"}


def _find_cgroups(sandbox: LayeredSandbox) -> Cgroups | str:
    """Where per-call cgroups can be made, or why not."""
    try:
        return Cgroups.find(sandbox.cgroup_limits, sandbox.cgroup_parent)
    except CgroupUnavailable as exc:
        return str(exc)


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
    disable: frozenset[str] = frozenset(),
    cgroup_limits: CgroupLimits | None = None,
    cgroup_parent: str = "",
    wrapper: Wrapper = "auto",
    native_path: str | None = None,
) -> LayeredSandbox:
    """Build a :class:`LayeredSandbox` and probe it: the executor's start-up factory. Also
    makes this process the subreaper of sandbox orphans (see :func:`become_subreaper`).
    ``disable``: layers not to use; ``cgroup_limits``/``cgroup_parent``: the per-call cgroups
    (see :class:`LayeredSandbox`); ``wrapper``/``native_path``: see :func:`probe_layers`."""
    become_subreaper()
    sandbox = LayeredSandbox(uid=uid, cgroup_limits=cgroup_limits, cgroup_parent=cgroup_parent)
    if default_profile is not None:
        sandbox.default_profile = default_profile
    return await probe_layers(sandbox, bwrap_path, disable, wrapper, native_path)
