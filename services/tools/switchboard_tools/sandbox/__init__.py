"""The sandbox tools run commands in: what the rest of the executor imports.

Layering (each module imports only those above it): :mod:`.profile` (what a call demands),
:mod:`.child` (one child process and its group), :mod:`.runner` (running one to completion or
in the background), :mod:`.protocols` (the :class:`Sandbox` protocols tools see),
:mod:`.process` (the plain :class:`ProcessSandbox`, rlimits, ``no_new_privs``), :mod:`.bwrap`
(the bubblewrap command line), :mod:`.launch` (the command line of one layered call and the check
of its measured isolation), :mod:`.layered` (:class:`LayeredSandbox`), :mod:`.probe` (the
start-up probe). :mod:`.inner` is the program that runs first inside every layered call: run by
source (``python3 -I -S -c``), so standard library only and no imports from this package.
"""

from switchboard_tools.sandbox.child import Child
from switchboard_tools.sandbox.layered import LayeredSandbox
from switchboard_tools.sandbox.probe import probe_layers, probe_sandbox
from switchboard_tools.sandbox.process import ProcessSandbox
from switchboard_tools.sandbox.profile import SandboxProfile, SandboxUnavailable
from switchboard_tools.sandbox.protocols import ProfiledSandbox, Sandbox, SpawningSandbox
from switchboard_tools.sandbox.runner import ProcessResult

__all__ = [
    "Child",
    "LayeredSandbox",
    "ProcessResult",
    "ProcessSandbox",
    "ProfiledSandbox",
    "Sandbox",
    "SandboxProfile",
    "SandboxUnavailable",
    "SpawningSandbox",
    "probe_layers",
    "probe_sandbox",
]
