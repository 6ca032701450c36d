"""Which sandbox wrapper runs (``SB_SANDBOX_WRAPPER``): ``auto`` takes the compiled one only when
it is built, current and passes the start-up probe, else the Python one; ``native`` never falls
back (no compiled wrapper: no sandboxed command); ``python`` is the Python one. The choice is in
the attestation. A compiled wrapper that does not work is simulated by a program that fails."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from pydantic import ValidationError

from switchboard_tools.sandbox import SandboxUnavailable, native, probe_sandbox
from switchboard_tools.sandbox.settings import ExecSettings

from .sandbox_checks import SANDBOX_UID, need_confinement, skip_or_fail
from .wrappers import native_wrapper


@contextmanager
def _program(text: str) -> Iterator[str]:
    """An executable shell script where the sandbox uid can run it, named as the compiled
    wrapper."""
    root = Path(tempfile.mkdtemp(prefix="sb-fake-wrapper-"))
    try:
        root.chmod(0o755)
        path = root / native.NAME
        path.write_text(text)
        path.chmod(0o755)
        yield str(path)
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def broken_wrapper() -> Iterator[str]:
    """A compiled wrapper that fails at once."""
    with _program("#!/bin/sh\necho 'wrapper broken' >&2\nexit 1\n") as path:
        yield path


def test_the_setting_accepts_only_the_three_choices(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ExecSettings().sandbox_wrapper == "auto"
    monkeypatch.setenv("SB_SANDBOX_WRAPPER", "native")
    assert ExecSettings().sandbox_wrapper == "native"
    monkeypatch.setenv("SB_SANDBOX_WRAPPER", "compiled")
    with pytest.raises(ValidationError) as bad:
        ExecSettings()
    assert "sandbox_wrapper" in str(bad.value)
    assert "'auto', 'native' or 'python'" in str(bad.value)


async def test_python_is_used_when_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SB_SANDBOX_WRAPPER", "python")
    sandbox = await ExecSettings().probe_sandbox()
    assert sandbox.layers.wrapper == "python"
    assert sandbox.attestation()["wrapper"] == "python"


async def test_auto_takes_the_compiled_wrapper_when_it_works(workspace: Path) -> None:
    with native_wrapper() as path:
        sandbox = await probe_sandbox(uid=SANDBOX_UID, wrapper="auto", native_path=path)
        assert sandbox.layers.wrapper == "native"
        assert sandbox.attestation()["wrapper"] == "native"
        need_confinement(sandbox)
        result = await sandbox.run(["echo", "hi"], cwd=workspace, timeout_s=20, output_cap=4096)
    assert result.output == "hi\n"
    assert result.isolation is not None
    assert result.isolation["wrapper"] == "native"


async def test_auto_falls_back_when_the_compiled_wrapper_fails(
    broken_wrapper: str, workspace: Path
) -> None:
    sandbox = await probe_sandbox(uid=SANDBOX_UID, wrapper="auto", native_path=broken_wrapper)
    assert sandbox.layers.wrapper == "python"
    assert sandbox.layers.status["measurement"] == "ok"
    need_confinement(sandbox)
    result = await sandbox.run(["echo", "hi"], cwd=workspace, timeout_s=20, output_cap=4096)
    assert result.output == "hi\n"
    assert result.isolation is not None
    assert result.isolation["wrapper"] == "python"


# Passes every probe but Landlock's: the report a wrapper writes, without measuring anything
# (bash: dash takes only one-digit descriptors in redirections).
_NO_LANDLOCK = """#!/bin/bash
fd=; landlock=0
for arg; do
  case $arg in report_fd=*) fd=${arg#report_fd=};; landlock=1) landlock=1;; --) break;; esac
done
while [ "$1" != "--" ]; do shift; done; shift
if [ $landlock = 1 ]; then
  echo '{"measured": true, "ok": false, "missing": ["landlock"]}' >&$fd; exit 126
fi
echo '{"measured": true, "ok": true, "missing": []}' >&$fd
exec {fd}>&-
exec "$@"
"""


@pytest.fixture
def no_landlock_wrapper() -> Iterator[str]:
    with _program(_NO_LANDLOCK) as path:
        yield path


async def test_auto_does_not_trade_a_layer_for_speed(no_landlock_wrapper: str) -> None:
    """A compiled wrapper under which a layer the Python one has fails its probe: ``auto``
    keeps the Python wrapper and the layer."""
    python = await probe_sandbox(uid=SANDBOX_UID, wrapper="python")
    if python.layers.status.get("landlock") != "ok":
        skip_or_fail(f"this host has no Landlock: {python.layers.status.get('landlock')}")
    fake = no_landlock_wrapper
    alone = await probe_sandbox(uid=SANDBOX_UID, wrapper="native", native_path=fake)
    assert alone.layers.wrapper == "native", alone.layers.status["measurement"]
    assert alone.layers.status["landlock"] != "ok"
    sandbox = await probe_sandbox(uid=SANDBOX_UID, wrapper="auto", native_path=fake)
    assert sandbox.layers.wrapper == "python"
    assert sandbox.layers.status == python.layers.status
    assert sandbox.available() == python.available()


async def test_native_never_falls_back(broken_wrapper: str, workspace: Path) -> None:
    sandbox = await probe_sandbox(uid=SANDBOX_UID, wrapper="native", native_path=broken_wrapper)
    assert sandbox.layers.wrapper is None
    assert sandbox.layers.status["measurement"].startswith("unavailable: native wrapper")
    assert sandbox.attestation()["measured"] is False
    with pytest.raises(SandboxUnavailable) as refused:
        await sandbox.run(["echo", "hi"], cwd=workspace, timeout_s=20, output_cap=4096)
    assert "measurement" in refused.value.message


async def test_native_without_a_build_is_unavailable(tmp_path: Path) -> None:
    missing = str(tmp_path / "not-built")
    sandbox = await probe_sandbox(uid=SANDBOX_UID, wrapper="native", native_path=missing)
    assert sandbox.layers.wrapper is None
    assert "not built" in sandbox.layers.status["measurement"]


def test_a_stale_or_unusable_build_is_not_found(tmp_path: Path) -> None:
    """A build older than its sources (wrapper.c changed since) is not used, nor one that is not
    executable: ``auto`` then runs the Python wrapper."""
    with native_wrapper() as built:
        copy = tmp_path / native.NAME
        shutil.copy2(built, copy)
    copy.chmod(0o755)
    assert native.find(copy) == copy
    oldest = min((native.source_dir() / name).stat().st_mtime for name in native.SOURCES)
    os.utime(copy, (oldest - 60, oldest - 60))
    assert native.find(copy) is None
    os.utime(copy)
    copy.chmod(0o644)
    assert native.find(copy) is None
