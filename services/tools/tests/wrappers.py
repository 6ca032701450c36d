"""Both sandbox wrappers in the tests: the Python one (:mod:`switchboard_tools.sandbox.inner`)
and the compiled one (:mod:`switchboard_tools.sandbox.native`). The isolation, attestation and
escape tests run under each (the ``layered`` fixture is parametrized over :data:`WRAPPERS`):
the compiled wrapper is accepted only as far as it is equivalent."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from switchboard_tools.sandbox import native

from .sandbox_checks import skip_or_fail

WRAPPERS = ("python", "native")


@contextmanager
def native_wrapper() -> Iterator[str]:
    """The compiled wrapper: the one ``make install`` built, else one built now into a
    temporary directory the sandbox uid can reach (where a C compiler exists). Skips when it
    cannot be had: not built and no compiler; a failed build with a compiler present fails
    under ``CI=true``."""
    built = native.find()
    if built is not None:
        yield str(built)
        return
    if native.compiler() is None:
        pytest.skip("the compiled sandbox wrapper is not built and there is no C compiler")
    root = Path(tempfile.mkdtemp(prefix="sb-wrapper-"))
    try:
        root.chmod(0o755)
        try:
            path = native.build(root / native.NAME)
        except RuntimeError as exc:
            skip_or_fail(f"a C compiler exists but the compiled wrapper did not build: {exc}")
        yield str(path)
    finally:
        shutil.rmtree(root, ignore_errors=True)
