"""Latency summaries: percentiles by linear interpolation, in milliseconds."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypedDict


class Summary(TypedDict):
    n: int
    p50: float
    p90: float
    p99: float
    mean: float
    min: float
    max: float


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ``values``, interpolating between neighbours."""
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def summarize(values_ms: Sequence[float]) -> Summary:
    """p50/p90/p99/mean/min/max of ``values_ms``, rounded to microseconds."""
    if not values_ms:
        nan = math.nan
        return Summary(n=0, p50=nan, p90=nan, p99=nan, mean=nan, min=nan, max=nan)
    return Summary(
        n=len(values_ms),
        p50=round(percentile(values_ms, 50), 3),
        p90=round(percentile(values_ms, 90), 3),
        p99=round(percentile(values_ms, 99), 3),
        mean=round(sum(values_ms) / len(values_ms), 3),
        min=round(min(values_ms), 3),
        max=round(max(values_ms), 3),
    )


def shifted(summary: Summary, minus_ms: float) -> Summary:
    """``summary`` with ``minus_ms`` taken off every figure (turn time minus model time)."""
    return Summary(
        n=summary["n"],
        p50=round(summary["p50"] - minus_ms, 3),
        p90=round(summary["p90"] - minus_ms, 3),
        p99=round(summary["p99"] - minus_ms, 3),
        mean=round(summary["mean"] - minus_ms, 3),
        min=round(summary["min"] - minus_ms, 3),
        max=round(summary["max"] - minus_ms, 3),
    )
