"""What the start-up probe found (:class:`Layers`), and the refusal a call gets when its profile
demands more: which requirement is missing, why the probe found no such layer, how to fix it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from switchboard_tools.sandbox.cgroups import CgroupLimits, Cgroups
from switchboard_tools.sandbox.profile import SandboxProfile

# How an operator gets each layer (or stops requiring it).
HOW_TO_GET: dict[str, str] = {
    "namespaces": "install bubblewrap (e.g. apt-get install bubblewrap) and allow the executor "
    "to create user namespaces",
    "landlock": "run the executor on a kernel with Landlock (5.13 or later, 'landlock' in the "
    "lsm= boot parameter)",
    "seccomp": "install libseccomp (libseccomp2)",
    "cgroup": "run the executor as root or delegate it a cgroup (SB_EXEC_CGROUP_PARENT), with "
    "the memory and pids controllers",
    "no_new_privs": "install python3 as /usr/bin/python3 (the sandbox measures with it)",
    "measurement": "install python3 as /usr/bin/python3 or build the compiled wrapper (make "
    "install; the sandbox measures with one of them)",
    "uid": "run the executor as root (commands then run as a dedicated unprivileged uid)",
    "network_isolation": "give the executor bubblewrap, libseccomp or Landlock 4+",
}
_WHAT: dict[str, str] = {
    "landlock|namespaces": "filesystem confinement, by Landlock or by namespaces",
    "network_isolation": "no network: a layer that denies it",
}


@dataclass
class Layers:
    """What the start-up probe proved. ``status`` maps each optional layer to ``"ok"`` or
    ``"unavailable: <reason>"``; a layer is only used when its probe passed. ``cgroups``:
    where per-call cgroups are made (``None``: no cgroup layer)."""

    python: str | None = None
    # The compiled wrapper (:mod:`.native`) when it is the one in use (then ``python`` is None).
    native: str | None = None
    bwrap: str | None = None
    seccomp: bool = False
    landlock_abi: int = 0
    cgroups: Cgroups | None = None
    status: dict[str, str] = field(default_factory=dict)

    @property
    def wrapper(self) -> str | None:
        """Which wrapper confines and measures each call: ``native`` (compiled), ``python``
        (:mod:`.inner` in an interpreter) or ``None`` (none runs: nothing can be measured)."""
        if self.native is not None:
            return "native"
        return "python" if self.python is not None else None

    def available(self, run_uid: int) -> dict[str, bool]:
        """Every layer name and whether calls can have it (``run_uid``: the uid they run as)."""
        measured = self.wrapper is not None
        return {
            "process_group": True,
            "rlimits": True,
            "no_new_privs": measured,
            "uid": run_uid != 0,
            "seccomp": measured and self.seccomp,
            "landlock": measured and self.landlock_abi > 0,
            "namespaces": measured and self.bwrap is not None,
            "cgroup": measured and self.cgroups is not None,
        }

    def can_deny_network(self, run_uid: int) -> bool:
        have = self.available(run_uid)
        return have["namespaces"] or have["seccomp"] or self.landlock_abi >= 4

    def missing(self, profile: SandboxProfile, run_uid: int) -> list[str]:
        """Requirements of ``profile`` that cannot be met (``a|b``: neither of them)."""
        have = self.available(run_uid)
        missing = sorted(layer for layer in profile.require if not have.get(layer))
        for group in profile.require_any:
            if not any(have.get(layer) for layer in group):
                missing.append("|".join(sorted(group)))
        if not profile.network and not self.can_deny_network(run_uid):
            missing.append("network_isolation")
        if self.wrapper is None:
            missing.append("measurement")
        return missing

    def attestation(
        self, run_uid: int, profile: SandboxProfile, rlimits: list[str], limits: CgroupLimits
    ) -> dict[str, Any]:
        """What calls get here with ``profile`` (each call's own is measured when it runs)."""
        have = self.available(run_uid)
        return {
            "sandbox": "bwrap" if have["namespaces"] else "process",
            "measured": self.wrapper is not None,
            "wrapper": self.wrapper,
            **have,
            "uid": run_uid,
            "landlock_abi": self.landlock_abi,
            "network": profile.network or not self.can_deny_network(run_uid),
            "workspace_confined": have["namespaces"] or have["landlock"],
            "cgroup_limits": limits.describe() if have["cgroup"] else None,
            "minimal_env": True,
            "rlimits_set": rlimits,
            "probe": dict(self.status),
            "profile": profile.describe(),
        }


def refusal(missing: list[str], status: dict[str, str]) -> str:
    """The message of a call refused because ``missing`` (requirements as written: ``a|b`` for
    alternatives) are not available; ``status``: the probe's findings."""
    parts: list[str] = []
    fixes: list[str] = []
    for requirement in missing:
        layers = requirement.split("|")
        found = [f"{layer}: {status[layer]}" for layer in layers if layer in status]
        what = _WHAT.get(requirement, f"the {requirement} layer")
        parts.append(f"{requirement} ({'; '.join([what, *found])})")
        for layer in layers:
            fix = HOW_TO_GET.get(layer)
            if fix and fix not in fixes:
                fixes.append(fix)
    fixes.append(
        "set SB_EXEC_REQUIRE to what this host has (SB_EXEC_REQUIRE='' is the explicit "
        "opt-out: commands then run without filesystem confinement)"
    )
    return (
        "Refused: this call's sandbox profile requires isolation this executor cannot provide: "
        f"{', '.join(parts)}. The command was not run. To fix it: {'; or '.join(fixes)}."
    )
