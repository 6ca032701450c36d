"""The modules under mutation and the tests that exercise each one.

Each module runs only its own unit tests: a mutant is only as dead as the tests that reach it,
and the end-to-end suites (processes, whole stacks) would make one mutant cost minutes.
``tests`` are the files that existed before issue 24's item 3; ``added`` are the files written
to kill its survivors (the runner's ``--before`` leaves them out, which is how the "before"
figures of tests/mutation/baseline.toml were measured).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Module:
    name: str
    root: str  # the installable package's folder: libs/switchboard, services/agent
    package: str  # its import package, a folder of root: switchboard, switchboard_agent
    file: str  # the module, relative to root
    tests: tuple[str, ...]  # test files, relative to the repository
    added: tuple[str, ...] = ()
    database: bool = False  # its tests use PostgreSQL: one server for the whole run
    # Test ids left out of the mutation run (each costs seconds per mutant); say why at the entry.
    deselect: tuple[str, ...] = ()
    note: str = ""  # anything the report should say about this module's figures
    # Test runs at once. The modules whose tests mostly wait on NATS, PostgreSQL and timers
    # (a few % CPU each) run four: on 2 cores that keeps the CPU as busy as two CPU-bound ones.
    children: int = 2

    @property
    def test_files(self) -> tuple[str, ...]:
        return self.tests + self.added

    @property
    def source(self) -> str:
        return f"{self.root}/{self.file}"


_AGENT = "services/agent/tests"
_ROUTER = "services/router/tests"

MODULES: tuple[Module, ...] = (
    Module(
        "ssrf",
        "libs/switchboard",
        "switchboard",
        "switchboard/net/ssrf.py",
        ("libs/switchboard/tests/test_ssrf.py",),
        ("libs/switchboard/tests/test_ssrf_messages.py",),
    ),
    Module(
        "beneath",
        "libs/switchboard",
        "switchboard",
        "switchboard/beneath.py",
        ("libs/switchboard/tests/test_beneath_reads.py", "services/tools/tests/test_beneath.py"),
        ("libs/switchboard/tests/test_beneath_resolution.py",),
    ),
    Module(
        "chunker",
        "services/agent",
        "switchboard_agent",
        "switchboard_agent/outbound/chunker.py",
        (f"{_AGENT}/test_chunker.py",),
        (f"{_AGENT}/test_chunker_edges.py",),
        # The property test's two smallest sizes take 4.7 of its 6.5 s (2,000 generated
        # replies); the three larger sizes stay.
        deselect=(
            f"{_AGENT}/test_chunker.py::test_properties_over_generated_replies[0-40]",
            f"{_AGENT}/test_chunker.py::test_properties_over_generated_replies[10-60]",
        ),
    ),
    Module(
        "policy",
        "services/agent",
        "switchboard_agent",
        "switchboard_agent/tools/policy.py",
        (
            f"{_AGENT}/test_policy.py",
            f"{_AGENT}/test_policy_layers.py",
            f"{_AGENT}/test_approval_rules.py",
            f"{_AGENT}/test_approval_bypasses.py",
            f"{_AGENT}/test_group_layer.py",
            f"{_AGENT}/test_tool_groups.py",
        ),
    ),
    Module(
        "router_security",
        "services/router",
        "switchboard_router",
        "switchboard_router/security.py",
        # test_admission.py asks the policy directly; test_security.py runs a router over NATS
        # (a server per test: seconds per mutant) for the same decisions, so it is left out.
        (f"{_ROUTER}/test_admission.py",),
        (f"{_ROUTER}/test_admission_pairing.py",),
    ),
    Module(
        "pairing",
        "services/router",
        "switchboard_router",
        "switchboard_router/pairing.py",
        (),
        (f"{_ROUTER}/test_admission_pairing.py", f"{_ROUTER}/test_pairing_store.py"),
        note=(
            "Before this work only test_pairing.py reached the store: a router and a NATS "
            "server per test; a first run against it got through 19 of the 246 mutants in its "
            "first 2.5 minutes and was stopped, so the store got tests of its own and no "
            "before figure was measured."
        ),
    ),
    Module(
        "failover",
        "services/agent",
        "switchboard_agent",
        "switchboard_agent/providers/failover.py",
        (
            f"{_AGENT}/test_failover.py",
            f"{_AGENT}/test_failover_chain.py",
            f"{_AGENT}/test_failover_midstream.py",
        ),
        (f"{_AGENT}/test_failover_rules.py",),
        # Through the SDKs against the fake LLM: 4.3 of the three files' 15.4 s.
        deselect=(f"{_AGENT}/test_failover.py::test_a_429_falls_back_and_honours_retry_after",),
    ),
    Module(
        "lanes",
        "services/agent",
        "switchboard_agent",
        "switchboard_agent/runs/lanes.py",
        (f"{_AGENT}/test_lanes.py",),
        (
            f"{_AGENT}/test_lane_delivery.py",
            f"{_AGENT}/test_lane_interrupt.py",
            f"{_AGENT}/test_lane_cursor.py",
            f"{_AGENT}/test_lane_acks.py",
        ),
        database=True,
        children=4,
    ),
    Module(
        "agent_lease",
        "services/agent",
        "switchboard_agent",
        "switchboard_agent/runs/lease.py",
        (f"{_AGENT}/test_lanes.py",),
        (f"{_AGENT}/test_lane_lease.py",),
        database=True,
        children=4,
    ),
    Module(
        "channel_lease",
        "services/gateway",
        "switchboard_gateway",
        "switchboard_gateway/channels/lease.py",
        ("services/gateway/tests/test_telegram_poll_errors.py",),
        (
            "services/gateway/tests/test_channel_lease.py",
            "services/gateway/tests/test_channel_lease_logs.py",
        ),
        # Polling tests that reach the lease only because a replica holds one (4 to 5 s each,
        # and a NATS server each); the lease's own tests and this file's two lease tests stay.
        deselect=tuple(
            f"services/gateway/tests/test_telegram_poll_errors.py::{name}"
            for name in (
                "test_a_hung_get_updates_is_restarted_by_the_watchdog",
                "test_rate_limits_are_waited_out_and_a_new_webhook_is_deleted_again",
                "test_an_update_that_does_not_parse_is_skipped_not_retried_forever",
            )
        ),
        database=True,
        children=4,
    ),
    Module(
        "firing",
        "services/scheduler",
        "switchboard_scheduler",
        "switchboard_scheduler/firing.py",
        ("services/scheduler/tests/test_scheduler.py", "services/scheduler/tests/test_timing.py"),
        (
            "services/scheduler/tests/test_firing_plan.py",
            "services/scheduler/tests/test_firing_attempts.py",
        ),
        # 5.5 of the 7.7 s the selected tests take (it waits for a quiet-hours window to end).
        deselect=(
            "services/scheduler/tests/test_timing.py::"
            "test_quiet_hours_hold_a_proactive_job_until_they_end_unless_urgent",
        ),
        database=True,
        children=4,
    ),
)

BY_NAME = {m.name: m for m in MODULES}
