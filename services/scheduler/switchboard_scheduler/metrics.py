"""Scheduler metrics."""

from prometheus_client import Counter, Histogram

FIRES = Counter(
    "sb_scheduler_fires_total",
    "Job runs by kind and outcome (published, unchanged, held, skipped, error...)",
    ["kind", "outcome"],
)
FIRE_LAG = Histogram(
    "sb_scheduler_fire_lag_seconds",
    "From a job's due time to the start of its run",
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0),
)
CLAIMED = Counter("sb_scheduler_claimed_total", "Due jobs claimed by this replica")
