"""Settings of ``exec`` and ``process`` and of the sandbox they run in, mixed into
:class:`switchboard_tools.config.ToolsSettings`; read from ``SB_*`` environment variables.

- ``SB_EXEC_MODE``: ``allowlist`` (default: one allowlisted program, no shell, arguments
  checked) or ``sandbox`` (a ``/bin/sh`` command line; the isolation layers are the boundary).
  The operator's choice: callers cannot pick a mode.
- ``SB_EXEC_REQUIRE``: the layers every command requires, comma-separated, ``|`` for
  alternatives; default ``landlock|namespaces`` (filesystem confinement by either). ``""`` is
  the explicit opt-out for hosts with neither.
- ``SB_EXEC_DISABLE_LAYERS``: optional layers the executor must not use (``seccomp``,
  ``landlock``, ``namespaces``, ``cgroup``), e.g. to work around a broken one.
- ``SB_EXEC_MEMORY_MAX`` (default ``512M``) and ``SB_EXEC_PIDS_MAX`` (default 128): the limits of
  each call's cgroup (``0``: none of that kind); ``SB_EXEC_CGROUP_PARENT``: the cgroup the
  per-call cgroups are made in (default: the executor's own).
- ``SB_EXEC_SANDBOX_UID`` (default 65534): the unprivileged uid commands run as when the
  executor is root.
- ``SB_SANDBOX_WRAPPER``: the program that applies Landlock and seccomp inside each call,
  measures what is in force and execs the command: ``auto`` (default: the compiled one,
  :mod:`.native`, when it is built and its start-up probe passes, else the Python one),
  ``native`` (the compiled one or no sandbox) or ``python``. Reported as ``wrapper`` in the
  attestation.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from switchboard_tools.sandbox.cgroups import CgroupLimits
from switchboard_tools.sandbox.layered import LayeredSandbox
from switchboard_tools.sandbox.probe import Wrapper, probe_sandbox
from switchboard_tools.sandbox.profile import DEFAULT_REQUIRE, OPTIONAL_LAYERS, SandboxProfile

_SIZE = re.compile(r"\s*([0-9]+)\s*([KMGT]?)(?:i?B)?\s*", re.IGNORECASE)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(value: object) -> object:
    """``"512M"``, ``"1GiB"``, ``"1048576"`` -> bytes (binary units); other values unchanged."""
    if isinstance(value, str):
        match = _SIZE.fullmatch(value)
        if match is None:
            raise ValueError(f"not a size: {value!r} (e.g. 512M, 1G or a number of bytes)")
        return int(match[1]) * _UNITS[match[2].upper()]
    return value


def check_require(value: str) -> str:
    SandboxProfile.parse(value)  # raises ValueError naming unknown layers
    return value


def layer_names(value: str) -> frozenset[str]:
    return frozenset(name.strip() for name in value.split(",") if name.strip())


def check_disable(value: str) -> str:
    unknown = layer_names(value) - OPTIONAL_LAYERS
    if unknown:
        raise ValueError(
            f"cannot disable {', '.join(sorted(unknown))}: only "
            f"{', '.join(sorted(OPTIONAL_LAYERS))} can be"
        )
    return value


class ExecSettings(BaseSettings):
    """See the module docstring."""

    model_config = SettingsConfigDict(env_prefix="SB_", extra="ignore", frozen=True)

    # How exec and process run commands: allowlist (one allowlisted program, no shell) or sandbox (a
    # /bin/sh line; the isolation layers are the boundary).
    exec_mode: Literal["allowlist", "sandbox"] = "allowlist"
    # Layers every command requires, comma-separated, a|b for either; '' opts out (hosts with
    # neither).
    exec_require: Annotated[str, AfterValidator(check_require)] = DEFAULT_REQUIRE
    # Optional layers not to use (seccomp, landlock, namespaces, cgroup), comma-separated.
    exec_disable_layers: Annotated[str, AfterValidator(check_disable)] = ""
    # Memory limit of each command's cgroup (0: none).
    exec_memory_max: Annotated[int, BeforeValidator(parse_size), Field(ge=0)] = 512 << 20
    # Process limit of each command's cgroup (0: none).
    exec_pids_max: int = Field(default=128, ge=0, le=1_000_000)
    # The cgroup the per-command cgroups are made in; empty: the executor's own.
    exec_cgroup_parent: str = ""
    # The unprivileged uid commands run as when the executor is root. RLIMIT_NPROC counts a
    # uid's processes machine-wide: executors on one machine that must not share that count
    # (one's fork bomb starving the other's commands) each get their own.
    exec_sandbox_uid: int = Field(default=65534, ge=1, le=4_294_967_294)
    # The program that confines and measures each command: auto (the compiled one when built and
    # working, else python), native or python.
    sandbox_wrapper: Wrapper = "auto"

    def sandbox_profile(self) -> SandboxProfile:
        return SandboxProfile.parse(self.exec_require)

    def cgroup_limits(self) -> CgroupLimits:
        return CgroupLimits(
            memory_max=self.exec_memory_max or None, pids_max=self.exec_pids_max or None
        )

    async def probe_sandbox(self) -> LayeredSandbox:
        """The executor's sandbox as these settings say: probed, with the required profile."""
        return await probe_sandbox(
            default_profile=self.sandbox_profile(),
            disable=layer_names(self.exec_disable_layers),
            cgroup_limits=self.cgroup_limits(),
            cgroup_parent=self.exec_cgroup_parent,
            uid=self.exec_sandbox_uid,
            wrapper=self.sandbox_wrapper,
        )
