"""The layered sandbox: start-up probe, per-call attestation measured inside, profiles."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from switchboard_tools.builtin import builtin_registry
from switchboard_tools.registry import ToolContext
from switchboard_tools.sandbox import (
    LayeredSandbox,
    ProfiledSandbox,
    Sandbox,
    SandboxProfile,
    SandboxUnavailable,
    probe_layers,
)

from .sandbox_checks import (
    SANDBOX_UID,
    HostTargets,
    assert_all_gone,
    host_targets,
    require_root,
    sandbox_commands,
    skip_or_fail,
    wait_until,
)

Need = Callable[..., None]


LAYERS = ("seccomp", "landlock", "namespaces")


@pytest.mark.parametrize("layer", LAYERS)
async def test_attestation_reports_probed_layers(
    layered: LayeredSandbox, workspace: Path, layer: str
) -> None:
    assert isinstance(layered, Sandbox) and isinstance(layered, ProfiledSandbox)
    att = layered.attestation()
    json.dumps(att)
    assert att["measured"] is True
    assert att["process_group"] and att["rlimits"] and att["no_new_privs"]
    # The optional layer is either proved by its probe or reported with a reason...
    status = att["probe"][layer]
    assert (status == "ok") == att[layer], status
    assert status == "ok" or status.startswith("unavailable: ")
    if status != "ok":
        skip_or_fail(f"the probe found no {layer} layer here ({status})")
    # ... and a layer reported in force really acts: a command run under it alone sees its
    # effect, the same command with every layer off does not (so this check can fail).
    with host_targets() as host:
        assert await layer_effect(layered, workspace, host, layer, on=True)
        assert not await layer_effect(layered, workspace, host, layer, on=False)


async def layer_effect(
    layered: LayeredSandbox, workspace: Path, host: HostTargets, layer: str, *, on: bool
) -> bool:
    """Whether ``layer``'s effect is visible to a command run with only that layer (``on``)
    or with no optional layer at all."""
    if layer == "seccomp":  # unshare(0) is a no-op unless the filter denies the syscall
        argv = ["python3", "-c", "import ctypes; print(ctypes.CDLL(None).unshare(0))"]
    elif layer == "landlock":  # reads outside the system directories and the workspace
        argv = ["cat", str(host.readable)]
    else:  # namespaces: the command's own mount and pid namespaces
        argv = ["readlink", "/proc/self/ns/mnt", "/proc/self/ns/pid"]
    result = await layered.run(
        argv,
        cwd=workspace,
        timeout_s=10,
        output_cap=1000,
        profile=SandboxProfile(network=True),  # the network is not what is checked here
        layers={name: on and name == layer for name in LAYERS},
    )
    iso = result.isolation or {}
    assert {name: iso[name] for name in LAYERS} == {name: on and name == layer for name in LAYERS}
    if layer == "seccomp":
        return result.output.split() == ["-1"]
    if layer == "landlock":
        return host.READABLE_TEXT not in result.output and result.exit_code != 0
    host_ns = [os.readlink(f"/proc/self/ns/{kind}") for kind in ("mnt", "pid")]
    assert result.exit_code == 0, result.output
    return result.output.split() != host_ns


async def test_call_is_measured_inside(layered: LayeredSandbox, workspace: Path) -> None:
    result = await layered.run(["id", "-u"], cwd=workspace, timeout_s=10, output_cap=100)
    iso = result.isolation
    assert iso is not None and iso["measured"] and iso["ok"]
    att = layered.attestation()
    for layer in ("seccomp", "landlock", "namespaces", "no_new_privs"):
        assert iso[layer] == att[layer], layer
    assert iso["network"] is False  # default profile: no network, enforced
    assert iso["caps_effective"] == "0000000000000000"
    assert iso["rlimits"]["nproc"] == layered.nproc
    # The uid the command itself runs as: what the wrapper measured, and the sandbox's own
    # unprivileged uid whenever the executor is root.
    assert result.exit_code == 0 and iso["uid"] == int(result.output), result.output
    require_root("the sandbox uid")
    assert int(result.output) == SANDBOX_UID


async def test_measurement_matches_what_the_command_sees(
    layered: LayeredSandbox, workspace: Path, need: Need
) -> None:
    need("seccomp")
    result = await layered.run(
        ["grep", "-E", "^(NoNewPrivs|Seccomp):", "/proc/self/status"],
        cwd=workspace,
        timeout_s=10,
        output_cap=1000,
    )
    assert result.output.split() == ["NoNewPrivs:", "1", "Seccomp:", "2"]


async def test_missing_bwrap_changes_attestation_and_profile_refuses(workspace: Path) -> None:
    sandbox = await probe_layers(LayeredSandbox(uid=SANDBOX_UID), bwrap_path="/nonexistent/bwrap")
    att = sandbox.attestation()
    assert att["namespaces"] is False
    assert att["probe"]["namespaces"].startswith("unavailable: bubblewrap not found")
    assert att["sandbox"] == "process"

    strict = SandboxProfile(require=frozenset({"namespaces"}))
    assert sandbox.missing(strict) == ["namespaces"]
    marker = workspace / "ran"
    with pytest.raises(SandboxUnavailable, match="namespaces"):
        await sandbox.run(
            ["touch", str(marker)], cwd=workspace, timeout_s=5, output_cap=100, profile=strict
        )
    assert not marker.exists()

    # Through the exec tool: a readable tool error, nothing run.
    registry = builtin_registry(sandbox, exec_mode="sandbox")
    registry.get("exec").profile = strict  # type: ignore[union-attr]
    ctx = ToolContext("a", "s", "c", workspace, 10.0)
    out = await registry.execute("exec", json.dumps({"command": "touch ran"}), ctx)
    assert out.is_error and "namespaces" in out.content and "not run" in out.content
    assert not marker.exists()

    # Without bwrap, what remains is still measured per call.
    result = await sandbox.run(["true"], cwd=workspace, timeout_s=5, output_cap=100)
    assert result.isolation is not None and result.isolation["namespaces"] is False


async def test_inner_refuses_when_required_layer_not_in_force(
    layered: LayeredSandbox, workspace: Path, need: Need
) -> None:
    # The probe says seccomp works, but if it is not applied for a call the wrapper's own
    # measurement refuses to exec the command.
    need("seccomp")
    marker = workspace / "ran"
    with pytest.raises(SandboxUnavailable, match="seccomp"):
        await layered.run(
            ["touch", str(marker)],
            cwd=workspace,
            timeout_s=5,
            output_cap=100,
            profile=SandboxProfile(require=frozenset({"seccomp"}), network=True),
            layers={"seccomp": False},
        )
    assert not marker.exists()


async def test_network_denied_needs_an_enforcing_layer(workspace: Path) -> None:
    sandbox = LayeredSandbox(uid=SANDBOX_UID)
    sandbox.layers.python = "/usr/bin/python3"  # measured, but no layer can deny network
    assert sandbox.missing(SandboxProfile(network=False)) == ["network_isolation"]
    assert sandbox.missing(SandboxProfile(network=True)) == []
    with pytest.raises(SandboxUnavailable, match="network_isolation"):
        await sandbox.run(["true"], cwd=workspace, timeout_s=5, output_cap=100)


def test_profile_validation() -> None:
    with pytest.raises(ValueError, match="unknown sandbox layer"):
        SandboxProfile(require=frozenset({"gvisor"}))
    profile = SandboxProfile.parse("namespaces, seccomp", network=False)
    assert profile.require == {"namespaces", "seccomp"}
    assert profile.describe() == {"require": ["namespaces", "seccomp"], "network": False}


async def test_unprobed_sandbox_refuses(workspace: Path) -> None:
    with pytest.raises(SandboxUnavailable):
        await LayeredSandbox(uid=SANDBOX_UID).run(
            ["true"], cwd=workspace, timeout_s=5, output_cap=100
        )


async def test_exec_result_carries_isolation(lcall: Any, scall: Any) -> None:
    out = await lcall("exec", {"command": "echo hi"})
    assert not out.is_error and out.content == "hi\n"
    iso = out.details["isolation"]
    assert iso["measured"] and iso["ok"] and iso["network"] is False
    assert out.details["mode"] == "allowlist"
    out = await scall("exec", {"command": "echo $((6*7)) | cat"})
    assert not out.is_error and out.content == "42\n"
    assert out.details["mode"] == "sandbox" and out.details["isolation"]["ok"]


async def test_files_written_by_tools_are_usable_in_the_sandbox(scall: Any) -> None:
    out = await scall("write", {"path": "early.txt", "content": "before first exec\n"})
    assert not out.is_error
    out = await scall("exec", {"command": "echo more >> early.txt"})
    assert not out.is_error, out.content
    out = await scall("write", {"path": "sub/notes.txt", "content": "one\n"})
    assert not out.is_error
    out = await scall("exec", {"command": "echo two >> sub/notes.txt"})
    assert not out.is_error, out.content
    out = await scall("read", {"path": "sub/notes.txt"})
    assert "one" in out.content and "two" in out.content


async def test_cancellation_kills_the_sandbox(layered: LayeredSandbox, workspace: Path) -> None:
    task = asyncio.create_task(
        layered.run(["sleep", "60"], cwd=workspace, timeout_s=30, output_cap=100)
    )

    def sleeping() -> bool:
        return ["sleep", "60"] in sandbox_commands(workspace)

    # The command really runs before the cancel (else "nothing left" would prove nothing).
    assert await wait_until(sleeping), "the sandboxed sleep never started"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await assert_all_gone(workspace, layered.drop_uid)
