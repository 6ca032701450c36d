"""The pure parts of `make bench-peers`: medians, ratios, the figures of a round, the markdown,
the reply check, and the proxy trap that keeps nanobot off the internet."""

from __future__ import annotations

import math
from typing import Any

import httpx
import pytest

from tests.bench.peers import drive, measure, report
from tests.bench.peers.trap import ProxyTrap


def _figures(**values: float | None) -> dict[str, float | None]:
    return {key: values.get(key, 1.0) for key, *_ in report.FIGURES}


def _round(sb: dict[str, float | None], nb: dict[str, float | None] | None) -> dict[str, Any]:
    r: dict[str, Any] = {"order": ["switchboard", "nanobot"], "failed": {}}
    for name, figs in (("switchboard", sb), ("nanobot", nb)):
        if figs is None:
            r["failed"][name] = "boom"
            continue
        r[name] = {
            "figures": figs,
            "quiet_check": {"busy_cores": 0.1, "waited_s": 1.0},
            "sequential": {"errors": {}},
            "concurrent": {"errors": {}},
            "outbound_attempts": [],
            "remote_connections": [],
        }
    return r


def test_median_skips_what_was_not_measured() -> None:
    assert report.median([3.0, None, 1.0, math.nan, 2.0]) == 2.0
    assert report.median([4.0, 1.0]) == 2.5  # even count: the mean of the middle two
    assert report.median([None, math.nan]) is None


def test_medians_per_peer_leave_out_a_failed_round() -> None:
    rounds = [
        _round(_figures(turn_p50_ms=10.0), _figures(turn_p50_ms=100.0)),
        _round(_figures(turn_p50_ms=30.0), None),  # nanobot failed in this round
        _round(_figures(turn_p50_ms=20.0), _figures(turn_p50_ms=300.0)),
    ]
    meds = report.medians(rounds)
    assert meds["switchboard"]["turn_p50_ms"] == 20.0
    assert meds["nanobot"]["turn_p50_ms"] == 200.0


def test_ratios_are_switchboard_over_nanobot() -> None:
    meds = {
        "switchboard": _figures(pss_idle_mb=150.0, turns_per_s=20.0, ready_s=None),
        "nanobot": _figures(pss_idle_mb=100.0, turns_per_s=5.0, cpu_ms_per_turn=0.0),
    }
    rat = report.ratios(meds)
    assert rat["pss_idle_mb"] == 1.5
    assert rat["turns_per_s"] == 4.0
    assert rat["ready_s"] is None  # not measured on one side
    assert rat["cpu_ms_per_turn"] is None  # nothing to divide by


def test_cpu_per_turn_leaves_out_the_model_the_client_and_the_others() -> None:
    cpu = {
        "launcher": 1.0,
        "postgres": 0.5,
        "fake-llm": 9.0,
        "bench-client": 9.0,
        "other processes": 9.0,
        "wall_s": 9.0,
    }
    assert measure.cpu_ms_per_turn(cpu, 100) == 15.0
    assert measure.cpu_ms_per_turn(cpu, 0) is None


def test_figures_of_a_round() -> None:
    latency = {"p50": 12.0, "p99": 30.0}
    out = {
        "ready_s": 1.5,
        "ready_again_s": 1.2,
        "sequential": {"latency_ms": latency, "ok": 10},
        "concurrent": {"turns_per_s": 40.0, "ok": 100},
        "pss_idle": {"pss_mb": 150.0, "processes": 3},
        "pss_after": {"pss_mb": 170.0, "processes": 4},
        "cpu_s_sequential": {"nanobot": 0.2, "fake-llm": 1.0, "wall_s": 2.0, "other processes": 0},
        "cpu_s_concurrent": {"nanobot": 1.0, "wall_s": 4.0, "other processes": 2.0},
    }
    figs = measure.figures(out)
    assert figs["turn_p50_ms"] == 12.0 and figs["turn_p99_ms"] == 30.0
    assert figs["cpu_ms_per_turn_sequential"] == 20.0
    assert figs["cpu_ms_per_turn"] == 10.0
    assert figs["pss_after_mb"] == 170.0 and figs["processes"] == 4
    assert figs["other_cores_busy"] == 0.5
    assert set(figs) >= {key for key, *_ in report.FIGURES}


def test_markdown_has_a_row_per_figure_with_medians_ratio_and_rounds() -> None:
    rounds = [
        _round(_figures(turn_p50_ms=10.0), _figures(turn_p50_ms=40.0)),
        _round(_figures(turn_p50_ms=20.0), _figures(turn_p50_ms=60.0)),
    ]
    rounds[1]["order"] = ["nanobot", "switchboard"]
    rounds[1]["nanobot"]["concurrent"]["errors"] = {"http 500": 2}
    meds = report.medians(rounds)
    result = {
        "plan": {"sessions": 20},
        "medians": meds,
        "ratios": report.ratios(meds),
        "rounds": rounds,
        "commit": "0123456789abcdef",
        "nanobot_version": "0.3.5",
        "date": "2026-11-28 07:00 UTC",
    }
    lines = report.markdown(result)
    rows = [line for line in lines if line.startswith("| ") and "---" not in line]
    assert len(rows) == len(report.FIGURES) + 1  # and the header
    p50 = next(line for line in rows if line.startswith("| turn p50"))
    assert p50 == "| turn p50, one at a time (ms) | 15.0 | 50.0 | 0.30 | 10.0 / 20.0; 40.0 / 60.0 |"
    assert any("turns/s, 20 sessions at once" in line for line in rows)
    assert "- round 2 (nanobot then switchboard)" in "\n".join(lines)
    assert "  - nanobot errors: {'http 500': 2}" in lines


@pytest.mark.parametrize(
    ("status", "body", "verdict"),
    [
        (200, {"choices": [{"message": {"content": "Tool said: max_iterations: 200"}}]}, ""),
        (
            200,
            {"choices": [{"message": {"content": "Tool said: Error: no such tool"}}]},
            "reply without the expected tool result",
        ),
        (200, {"choices": [{"message": {"content": "Hello"}}]}, "reply without a tool result"),
        (200, {"choices": []}, "malformed reply"),
        (502, {"error": "x"}, "http 502"),
    ],
)
def test_a_turn_counts_only_with_the_tool_result(status: int, body: Any, verdict: str) -> None:
    assert drive.check(httpx.Response(status, json=body), "max_iterations: 200") == verdict


def test_the_trap_records_and_refuses_what_would_leave_the_machine() -> None:
    trap = ProxyTrap()
    try:
        env = trap.env()
        assert env["HTTPS_PROXY"] == env["https_proxy"] == trap.url
        assert "127.0.0.1" in env["NO_PROXY"]
        with httpx.Client(proxy=trap.url, timeout=5.0) as client, pytest.raises(httpx.ProxyError):
            client.get("https://peers-bench.invalid/encodings/x")
        assert trap.seen() == ["CONNECT peers-bench.invalid:443 HTTP/1.1"]
    finally:
        trap.close()


def test_loopback_includes_ipv4_mapped_addresses() -> None:
    assert measure._loopback("127.0.0.1") and measure._loopback("::1")
    assert measure._loopback("::ffff:127.0.0.1")
    assert not measure._loopback("10.0.0.1") and not measure._loopback("::ffff:8.8.8.8")


def test_markdown_marks_a_round_a_peer_failed_in() -> None:
    rounds = [
        _round(_figures(turn_p50_ms=10.0), _figures(turn_p50_ms=40.0)),
        _round(_figures(turn_p50_ms=20.0), None),
    ]
    meds = report.medians(rounds)
    result = {
        "plan": {"sessions": 20},
        "medians": meds,
        "ratios": report.ratios(meds),
        "rounds": rounds,
        "commit": "0123456789abcdef",
        "nanobot_version": "0.3.5",
        "date": "2026-11-28 07:00 UTC",
    }
    p50 = next(line for line in report.markdown(result) if line.startswith("| turn p50"))
    assert p50.endswith("| 15.0 | 40.0 | 0.38 | 10.0 / 20.0; 40.0 / failed |")
