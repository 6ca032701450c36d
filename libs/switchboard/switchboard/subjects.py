"""Every NATS subject, stream and bucket name in one place (:class:`Subjects`), and the TTLs of
the KV buckets; :mod:`switchboard.bus` re-exports them (``bus.Subjects``)."""

from __future__ import annotations

from dataclasses import dataclass

LEASE_TTL_S = 10.0  # a dead lane owner's lease expires this long after its last renewal
CHANNEL_LEASE_TTL_S = 15.0  # a dead poller's lease on a channel connection expires this late
OUTBOUND_SENT_TTL_S = 86400.0  # how long a sent platform message is remembered


@dataclass(frozen=True)
class Subjects:
    """Every subject name in one place, under a configurable prefix."""

    prefix: str = "sb"

    def inbound(self, channel: str) -> str:
        return f"{self.prefix}.inbound.{channel}"

    def lane(self, agent: str, token: str) -> str:
        return f"{self.prefix}.lane.{agent}.{token}"

    def lanes(self) -> str:
        return f"{self.prefix}.lane.*.*"

    def tools_call(self, profile: str) -> str:
        return f"{self.prefix}.tools.call.{profile}"

    def tools_result(self, run_id: str) -> str:
        return f"{self.prefix}.tools.result.{run_id}"

    def tools_cancel(self, run_id: str) -> str:
        return f"{self.prefix}.tools.cancel.{run_id}"

    def tools_specs(self) -> str:
        return f"{self.prefix}.tools.specs"

    def tools_changed(self) -> str:
        """Core subject: an executor's tools changed (an MCP server added, removed, restarted
        or re-listed); every agent replica drops the specs it keeps (no queue group)."""
        return f"{self.prefix}.tools.changed"

    def tools_update(self, call_id: str) -> str:
        """Core subject: partial output of a tool call still running (``ToolUpdate``)."""
        return f"{self.prefix}.tools.update.{call_id}"

    def tools_proc(self, executor: str) -> str:
        """Core request subject: one executor answers poll/kill/list for the processes it runs."""
        return f"{self.prefix}.tools.proc.{executor}"

    def tools_procs(self) -> str:
        """Core subject every executor listens on (no queue group): list processes everywhere."""
        return f"{self.prefix}.tools.procs"

    def approvals(self, run_id: str) -> str:
        """Core subject: an approval of this run was decided (wakes the waiting run)."""
        return f"{self.prefix}.approvals.{run_id}"

    def approvals_decide(self) -> str:
        """Core request subject: a decision typed in a chat (``ChatDecision``), sent by the
        router; any agent replica answers (queue group) with a ``ChatDecisionResult``."""
        return f"{self.prefix}.approvals.decide"

    def events(self, token: str) -> str:
        return f"{self.prefix}.events.{token}"

    def outbound(self, channel: str, account: str) -> str:
        return f"{self.prefix}.outbound.{channel}.{account}"

    def health(self, service: str) -> str:
        return f"{self.prefix}.health.{service}"

    def health_replicas(self, service: str) -> str:
        """Core request subject: every replica of ``service`` answers (no queue group), for
        the gateway's ``GET /api/health``, which gathers the answers for a moment."""
        return f"{self.prefix}.health.{service}.replicas"

    def stream(self, base: str) -> str:
        """Stream/bucket name: as docs/architecture.md names them for the default prefix,
        prefixed otherwise."""
        return base if self.prefix == "sb" else f"{self.prefix.upper()}_{base}"

    def deadletter(self, kind: str, channel: str) -> str:
        """Where an undeliverable ``kind`` (``outbound``) of ``channel`` is kept."""
        return f"{self.prefix}.deadletter.{kind}.{channel}"

    def sessions_command(self) -> str:
        """Core request subject: a session command typed in a chat (``SessionCommand``: /new,
        /reset, /stop, /status, /model), sent by the router (chat channels) or the gateway
        (WebChat); any agent replica answers."""
        return f"{self.prefix}.sessions.command"

    def runs_abort(self) -> str:
        """Where an AbortRun goes (core NATS: every agent replica hears it, the owner acts)."""
        return f"{self.prefix}.runs.abort"

    @property
    def lease_bucket(self) -> str:
        return f"{self.prefix}_lane_leases"

    @property
    def channel_lease_bucket(self) -> str:
        """Leases of the gateway's channel connections (Telegram polling, Discord's gateway):
        one replica holds each."""
        return f"{self.prefix}_channel_leases"

    @property
    def outbound_sent_bucket(self) -> str:
        """The platform messages of reply parts already sent (so none is sent twice)."""
        return f"{self.prefix}_outbound_sent"

    @property
    def pairing_bucket(self) -> str:
        """The router's pairing requests and approved senders."""
        return f"{self.prefix}_pairing"

    def buckets(self) -> dict[str, float]:
        """Every KV bucket and its TTL in seconds (0: keys never expire)."""
        return {
            self.lease_bucket: LEASE_TTL_S,
            self.channel_lease_bucket: CHANNEL_LEASE_TTL_S,
            self.outbound_sent_bucket: OUTBOUND_SENT_TTL_S,
            self.pairing_bucket: 0.0,
        }
