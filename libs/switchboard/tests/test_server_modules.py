"""The split of the embedded servers (NATS in switchboard.embedded, PostgreSQL in
switchboard.embedded_pg, what both use in switchboard.serverproc) keeps every name importers
use reachable from switchboard.embedded, as the same object; and the cause walk both the
PostgreSQL start and the a2a_delegate tool rely on (switchboard.errors.causes)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import psutil
import pytest

from switchboard import embedded, embedded_pg, serverproc
from switchboard.errors import causes


@pytest.mark.parametrize(
    ("name", "home"),
    [
        ("Postgres", embedded_pg),
        ("LATE_START_S", embedded_pg),
        ("create_database", embedded_pg),
        ("drop_database", embedded_pg),
        ("database_uri", embedded_pg),
        ("_pgserver", embedded_pg),  # the CLI's doctor imports it from switchboard.embedded
        ("ServerError", serverproc),
        ("wait_gone", serverproc),
    ],
)
def test_switchboard_embedded_re_exports_the_moved_names(name: str, home: object) -> None:
    assert getattr(embedded, name) is getattr(home, name)


def test_every_name_in_all_is_importable() -> None:
    for name in embedded.__all__:
        assert hasattr(embedded, name), name
    assert {"Postgres", "NatsServer", "ServerError", "create_database", "drop_database"} <= set(
        embedded.__all__
    )


def test_the_log_tail_names_a_missing_or_empty_log_and_keeps_the_last_lines(
    tmp_path: Path,
) -> None:
    log = tmp_path / "server.log"
    assert serverproc.log_tail(log) == "(no log)"
    log.write_text("")
    assert serverproc.log_tail(log) == "(log is empty)"
    log.write_text("".join(f"line {i}\n" for i in range(30)))
    assert serverproc.log_tail(log, lines=2) == "line 28\nline 29"


def test_wait_gone_returns_at_once_for_exited_processes() -> None:
    proc = subprocess.Popen(["true"])
    handle = psutil.Process(proc.pid)
    proc.wait()
    assert serverproc.wait_gone([handle], timeout=30) == []


def test_causes_follows_cause_and_context_outermost_first() -> None:
    inner = subprocess.TimeoutExpired(["pg_ctl"], 10)
    try:
        try:
            raise inner
        except subprocess.TimeoutExpired:
            raise FileNotFoundError("log") from None  # __context__ kept, __cause__ None
    except FileNotFoundError as handled:
        middle = handled
    outer = RuntimeError("wrapped")
    outer.__cause__ = middle
    assert causes(outer) == [outer, middle, inner]
    assert causes(inner) == [inner]


def test_causes_prefers_the_cause_and_stops_at_a_cycle() -> None:
    a, b, c = ValueError("a"), KeyError("b"), OSError("c")
    a.__cause__, a.__context__ = b, c
    b.__cause__ = a  # a cycle: the walk ends instead of looping
    assert causes(a) == [a, b]
