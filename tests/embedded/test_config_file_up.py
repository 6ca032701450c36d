"""``switchboard up`` reads ``$SB_HOME/switchboard.toml`` (issue 27): a setting written only in
the file reaches the running gateway, seen through its HTTP API."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from switchboard import configfile
from tests.support.stack import start_stack, stop_stack

LIMIT = 2048


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="sb-config-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_up_runs_with_a_setting_from_the_file(short_tmp: Path) -> None:
    home = short_tmp / "home"
    home.mkdir(mode=0o700)
    configfile.path_for(home).write_text(
        f"# Small bodies only.\n[gateway]\nmax_request_bytes = {LIMIT}\n", encoding="utf-8"
    )
    stack = start_stack(home, {}, timeout=120)
    try:
        body = {"model": "main", "messages": [{"role": "user", "content": "x" * LIMIT}]}
        headers = {"Authorization": f"Bearer {stack.token}"}
        with httpx.Client(base_url=stack.url, headers=headers, timeout=30) as client:
            big = client.post("/v1/chat/completions", json=body)
            # The gateway's default (2 MiB) would take it: only the file's limit refuses it.
            assert big.status_code == 413, big.text
            small = client.post("/v1/chat/completions", json={"messages": []})
            assert small.status_code != 413
    finally:
        assert stop_stack(stack) == []
