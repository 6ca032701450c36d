"""The fault campaign's short variant (``make test``): 45 s of mixed traffic on
every entry point against the whole system in processes mode (agent, tools and scheduler
twice, NATS as a three-node cluster with the streams at three replicas), with one fault of
each of the kinds that cost most: a service process SIGKILLed, a NATS node SIGKILLed and
restarted, PostgreSQL restarted. Nothing accepted may be lost, nothing duplicated, every
conversation answered in order, no process left behind. ``make soak`` runs the long one."""

from __future__ import annotations

import asyncio
import os

import pytest

from tests.soak.campaign import Options, run
from tests.soak.nats_backend import cluster_available
from tests.soak.report import markdown
from tests.soak.traffic import Load

SEED = int(os.environ.get("SOAK_SEED", "2024"))
PLAN = ("kill", "nats", "postgres")


@pytest.mark.timeout(900)
def test_nothing_accepted_is_lost_or_duplicated_under_faults() -> None:
    if os.environ.get("CI") == "true":  # no silent fallback to one NATS server in CI
        assert cluster_available(), "switchboard.natscluster is missing: no NATS cluster"
    options = Options(
        minutes=0.75, seed=SEED, load=Load(per_channel=2), gap_s=(5.0, 8.0), plan=PLAN
    )
    report = asyncio.run(run(options))
    summary = f"seed {SEED}\n{markdown(report)}"
    assert report["settled"], summary
    assert report["lost"] == 0 and report["duplicated"] == 0, summary
    assert report["processes_left"] == 0, report["processes_left_detail"]
    assert report["faults_per_kind"] == {kind: 1 for kind in PLAN}, report["faults"]
    assert report["unrecovered_faults"] == 0, report["faults"]
    assert report["messages"]["out_of_order"] == 0, summary
    # Traffic flowed on every entry point, tool calls and memory included, and cron fired.
    for channel, figures in report["per_channel"].items():
        assert figures.get("answered_once", 0) >= 5, (channel, summary)
    assert report["memory"]["documents_found"] >= 3 and report["memory"]["facts_found"] >= 1
    # Every slot between the jobs' add and removal fired (a scheduler that stopped after a
    # fault, or started late, misses slots at the edges of the window).
    cron = {name: (job["slots_fired"], job["missed"]) for name, job in report["cron"].items()}
    assert all(job["slots_fired"] >= 5 for job in report["cron"].values()), (cron, summary)
    assert all(job["missed_slots"] == 0 for job in report["cron"].values()), (cron, summary)
    if cluster_available():
        assert report["stream_replicas"] == {"INBOUND": 3, "LANES": 3, "OUTBOUND": 3}
    assert report["passed"], summary
