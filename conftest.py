from pathlib import Path

import pytest

from switchboard import process_env

process_env.prepare()  # before anything loads gRPC: the executor tests fork commands

pytest_plugins = ["tests.support.servers"]

# Where the long test files are: system tests (each module starts whole stacks, seconds to a
# minute and a half per file) and the executor's and gateway's tests (real sandboxes, servers).
LONG_FILES = (
    "tests/lanes",
    "tests/e2e",
    "tests/embedded",
    "tests/deploy",
    "services/tools/tests",
    "services/gateway/tests",
    "tests/soak",
)
ROOT = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The folders of long test files first, in ``LONG_FILES`` order, then the others (a
    stable sort: each file's tests keep their order and stay together). `make test` shares whole
    files out to its workers in this order, so short files even out the workers' ends instead of
    a long one starting last."""

    def rank(item: pytest.Item) -> int:
        path = item.path.relative_to(ROOT).as_posix() if item.path.is_relative_to(ROOT) else ""
        return next((i for i, f in enumerate(LONG_FILES) if path.startswith(f)), len(LONG_FILES))

    items.sort(key=rank)
