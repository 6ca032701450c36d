"""The committed generated code matches what `make proto` produces now."""

from __future__ import annotations

from pathlib import Path

from switchboard.protogen import PACKAGE_ROOT, generate


def test_generated_code_is_fresh(tmp_path: Path) -> None:
    fresh = generate(tmp_path)
    assert fresh, "no proto files found"
    committed_dir = PACKAGE_ROOT / "switchboard" / "v1"
    names = {p.name for p in fresh}
    assert names == {p.name for p in committed_dir.glob("*_pb2*.py*")}, "run `make proto`"
    for path in fresh:
        committed = (committed_dir / path.name).read_text()
        assert committed == path.read_text(), f"{path.name} is stale: run `make proto`"
