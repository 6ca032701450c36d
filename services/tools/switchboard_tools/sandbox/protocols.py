"""What tools see of a sandbox: the :class:`Sandbox` protocol.

Tools only see these protocols, so a stronger implementation (bubblewrap namespaces, seccomp,
landlock, per-uid limits) can replace :class:`~switchboard_tools.sandbox.process.ProcessSandbox`
without touching them. Every implementation must report honestly, via
:meth:`Sandbox.attestation`, which isolation layers are actually in force.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from switchboard_tools.output import OutputCallback
from switchboard_tools.sandbox.child import Child
from switchboard_tools.sandbox.profile import SandboxProfile
from switchboard_tools.sandbox.runner import ProcessResult

__all__ = ["ProfiledSandbox", "Sandbox", "SpawningSandbox"]


@runtime_checkable
class Sandbox(Protocol):
    """Runs a command in isolation. Implementations must never give the child the executor's
    own environment (it holds secrets) and must kill everything the command started once it
    finishes or times out."""

    async def run(
        self,
        argv: list[str],
        *,
        cwd: Path,
        timeout_s: float,
        output_cap: int,
        env: Mapping[str, str] | None = None,
        on_output: OutputCallback | None = None,
    ) -> ProcessResult:
        """Run ``argv`` (no shell) in ``cwd``. ``env`` adds variables to the minimal
        environment. Output beyond ``output_cap`` bytes is dropped and reported as truncated.
        ``on_output`` receives the output (within the cap) while it arrives, coalesced."""
        ...

    def attestation(self) -> dict[str, Any]:
        """The isolation layers actually in force (JSON-serialisable), for ``/readyz`` and for
        the ``isolation_json`` of tool results."""
        ...


@runtime_checkable
class ProfiledSandbox(Sandbox, Protocol):
    """A sandbox that enforces :class:`~switchboard_tools.sandbox.profile.SandboxProfile` and
    measures each call (``ProcessResult.isolation``); see
    :class:`~switchboard_tools.sandbox.layered.LayeredSandbox`. ``run`` additionally takes
    ``profile=`` and ``workspace=`` keyword arguments."""

    def missing(self, profile: SandboxProfile) -> list[str]:
        """The layers ``profile`` demands that this sandbox cannot provide."""
        ...


@runtime_checkable
class SpawningSandbox(Sandbox, Protocol):
    """A sandbox that can also leave a command running (the ``process`` tool) under the same
    layers as :meth:`Sandbox.run`. A profiled sandbox's ``spawn`` also takes ``profile=`` and
    ``workspace=`` keyword arguments, and raises when the isolation was not measured in force."""

    async def spawn(
        self,
        argv: list[str],
        *,
        cwd: Path,
        lifetime_s: float,
        output_cap: int,
        env: Mapping[str, str] | None = None,
    ) -> Child:
        """Start ``argv`` in ``cwd``; its group is killed after ``lifetime_s``, when it exits
        (after a short grace) or on :meth:`Child.kill`. The last ``output_cap`` bytes of its
        output are kept in a ring buffer (``Child.sink``)."""
        ...
