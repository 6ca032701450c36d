"""Generate the protobuf/gRPC code in ``switchboard/v1`` from ``proto/`` (``make proto``).

The same function writes into a temporary directory for the staleness test, so the committed
code and a fresh generation are compared byte for byte.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
PROTO_DIR = REPO / "proto"
PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # libs/switchboard: holds switchboard/v1


def proto_files() -> list[Path]:
    return sorted((PROTO_DIR / "switchboard" / "v1").glob("*.proto"))


def generate(out_dir: Path) -> list[Path]:
    """Run protoc for every proto file into ``out_dir``; return the files written."""
    from grpc_tools import protoc  # dev dependency: only needed to regenerate

    out_dir.mkdir(parents=True, exist_ok=True)
    include = Path(protoc.__file__).parent / "_proto"
    args = [
        "protoc",
        f"-I{PROTO_DIR}",
        f"-I{include}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        *[str(p.relative_to(PROTO_DIR)) for p in proto_files()],
    ]
    if protoc.main(args) != 0:
        raise RuntimeError("protoc failed")
    return sorted((out_dir / "switchboard" / "v1").glob("*_pb2*.py*"))


def main() -> None:
    written = generate(PACKAGE_ROOT)
    for path in written:
        print(path.relative_to(REPO))


if __name__ == "__main__":
    main()
