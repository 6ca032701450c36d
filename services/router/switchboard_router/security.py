"""Inbound security (DESIGN.md section 9): whether a message may reach an agent at all, decided
before it is routed. Refused messages are counted and never run.

Today every sender is admitted: the DM policy ``open``. Allowlists, DM pairing, group mention
gating and per-sender rate limits are policies of this module still to be built (see the
README's status table); they plug in as further :class:`InboundPolicy` implementations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from switchboard.v1 import messages_pb2


@dataclass(frozen=True)
class Admission:
    admitted: bool
    reason: str = ""  # why a message was refused: a metric label and a log line

    @classmethod
    def admit(cls) -> Admission:
        return cls(True)

    @classmethod
    def refuse(cls, reason: str) -> Admission:
        return cls(False, reason)


class InboundPolicy(Protocol):
    async def admit(self, msg: messages_pb2.InboundMessage) -> Admission: ...


class OpenPolicy:
    """DM policy ``open``: every sender reaches the agent."""

    async def admit(self, msg: messages_pb2.InboundMessage) -> Admission:
        return Admission.admit()
