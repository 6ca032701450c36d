"""The pairing code's message to an unknown sender, or into an unknown group: an OUTBOUND part
to its chat, delivered by the gateway like a reply."""

from __future__ import annotations

import logging

from switchboard import bus
from switchboard.runtime import ServiceRuntime
from switchboard.v1 import messages_pb2, router_pb2

from .metrics import PAIRING
from .pairing import GROUP_PREFIX, is_group

log = logging.getLogger(__name__)


def pairing_text(request: router_pb2.PairingRequest) -> str:
    minutes = max(1, round((request.expires_at_ms - request.created_at_ms) / 60_000))
    if is_group(request.sender):
        return (
            "This group is not approved to talk to this assistant yet, so I can't answer here.\n"
            f"The group's pairing code: {request.code}\n"
            "Ask the owner of this assistant to approve the group "
            f"(switchboard pairing approve {request.channel} {request.code}); "
            f"this group's id is {request.sender.removeprefix(GROUP_PREFIX)}. "
            f"The code is valid for {minutes} minutes."
        )
    return (
        "I don't know you yet, so I can't answer here.\n"
        f"Your pairing code: {request.code}\n"
        "Ask the owner of this assistant to approve it "
        f"(switchboard pairing approve {request.channel} {request.code}). "
        f"The code is valid for {minutes} minutes."
    )


class CodeSender:
    """Sends a new pairing request's code to the chat that asked (the sender's DM, or the
    group) as an OUTBOUND part (the gateway delivers it like a reply), once per request
    (``Nats-Msg-Id`` from the code)."""

    def __init__(self, rt: ServiceRuntime) -> None:
        self.rt = rt

    async def __call__(
        self, msg: messages_pb2.InboundMessage, request: router_pb2.PairingRequest
    ) -> None:
        run_id = f"pairing:{request.channel}:{request.code}"
        part = messages_pb2.OutboundMessage(
            run_id=run_id,
            part=0,
            parts=1,
            channel=msg.channel,
            account=msg.account or "default",
            chat=msg.chat,
            thread_id=msg.thread_id,
            text=pairing_text(request),
            message_ids=[msg.message_id],
            reply_context=msg.reply_context,
        )
        subject = self.rt.subjects.outbound(
            bus.subject_token(part.channel), bus.subject_token(part.account)
        )
        await bus.js_publish(self.rt.js, subject, part, msg_id=f"{run_id}:0")
        PAIRING.labels(msg.channel, "requested").inc()
        log.info("pairing code sent", extra={"channel": msg.channel})
