"""Commands typed in a chat that the router answers itself instead of putting them on a lane:
``/approve <id> [reason]`` and ``/deny <id> [reason]`` decide a tool call waiting for approval
(the agent posted the id in the chat, see docs/chat-approvals.md).

They must not wait on the lane: the session's lane is busy with the very run that waits for
the decision. So, once security has admitted the sender (a refused sender decides nothing) and
stamped its role, the router sends a ``ChatDecision`` request on ``sb.approvals.decide``
carrying the sender (``<channel>:<sender id>``), its role (``inbound.role``, the stamp security
decided: one computation for the lane item and the commands) and the session its messages in
this chat route to; an agent replica checks that the sender may decide this approval
(``trust.may_decide_approval``: an owner any, a DM's own person those of their DM) and decides
it. The answer goes back to the chat as an OUTBOUND part, once per command message
(``Nats-Msg-Id`` from the message id).

A command is the first word of the text, ``/approve`` or ``/deny`` (any case; Telegram's
``/approve@BotName`` form too), after any leading ``@mentions``. Only chat channels: the
first-party channels (API, WebChat...) decide through the approvals API.

A click on an approval notice's Approve or Deny button arrives as the same command from the
clicker (``InboundMessage.click``, set by the gateway): it is admitted, stamped and decided
exactly like the typed one. Its answer carries the click back (``OutboundMessage.click``, with
the decision when this click made one) so the gateway answers the clicker alone and updates the
clicked message; a click security refused is told so (:func:`answer_refused_click`).

The session commands ``/new``, ``/reset``, ``/stop``, ``/status`` and ``/model`` are answered the
same way (:mod:`session_commands`: the agent carries them out)."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from opentelemetry import trace
from prometheus_client import Counter

from switchboard import bus, bus_request
from switchboard.runtime import ServiceRuntime
from switchboard.v1 import approvals_pb2, messages_pb2

from .config import RouterSettings
from .routing import RouteError, resolve
from .security import AUTHENTICATED_CHANNELS, RATE_LIMITED
from .session_commands import SessionCommands

log = logging.getLogger(__name__)
tracer = trace.get_tracer("switchboard.router")

COMMANDS = Counter(
    "sb_router_chat_commands_total",
    "Chat commands (/approve, /deny) answered by the router, by outcome",
    ["channel", "outcome"],
)
REQUEST_TIMEOUT_S = 5.0
MAX_REASON = 500
_COMMAND = re.compile(
    r"\s*(?:@\S+\s+)*/(approve|deny)(?:@[A-Za-z0-9_]+)?(?:\s+(.*))?", re.IGNORECASE | re.DOTALL
)
_ID = re.compile(r"(?:ap_)?[0-9a-f]{6,64}", re.IGNORECASE)

USAGE = (
    "To decide a tool call waiting for approval, reply /approve <id> or /deny <id>,"
    " optionally followed by a reason. The id is in the approval request."
)
ANSWERS = {
    "not_found": "There is no approval {id}.",
    "not_allowed": "You may not decide this approval.",
    "ambiguous": "{id} matches more than one approval; give more of its id.",
    "invalid": USAGE,
}
UNAVAILABLE = "Approvals cannot be decided right now (no agent answered); try again shortly."


@dataclass(frozen=True)
class Command:
    approve: bool
    approval_id: str  # as typed
    reason: str

    @property
    def verb(self) -> str:
        return "approve" if self.approve else "deny"


@dataclass(frozen=True)
class Malformed:
    """``/approve`` or ``/deny`` without a usable id."""

    verb: str


def parse(text: str) -> Command | Malformed | None:
    """The command in ``text``, :class:`Malformed` for one without an id, None for no command."""
    found = _COMMAND.fullmatch(text)
    if found is None:
        return None
    verb = found.group(1).lower()
    words = (found.group(2) or "").strip().split(None, 1)
    if not words or not _ID.fullmatch(words[0]):
        return Malformed(verb)
    reason = words[1].strip()[:MAX_REASON] if len(words) > 1 else ""
    return Command(verb == "approve", words[0], reason)


def answer_text(command: Command, outcome: approvals_pb2.ChatDecisionResult) -> str:
    if outcome.outcome == "decided":
        done = "Approved" if outcome.status == "approved" else "Denied"
        return f"{done}: the call to {outcome.tool} ({command.approval_id})."
    if outcome.outcome == "already_decided":
        return f"That approval is already {outcome.status.replace('_', ' ')}."
    template = ANSWERS.get(outcome.outcome)
    if template is None:
        return "The approval could not be decided; try again or use the approvals API."
    return template.format(id=command.approval_id)


class ChatCommands:
    def __init__(
        self,
        rt: ServiceRuntime,
        settings: RouterSettings,
        timeout_s: float = REQUEST_TIMEOUT_S,
    ) -> None:
        self.rt = rt
        self.settings = settings
        self.timeout_s = timeout_s
        self.sessions = SessionCommands(rt, settings, self._reply, timeout_s)

    async def handle(self, inbound: messages_pb2.InboundMessage) -> bool:
        """Answer ``inbound`` if it is a command (True), else leave it to the lane (False).
        ``inbound`` has been admitted by security."""
        if inbound.channel in AUTHENTICATED_CHANNELS:
            return False
        if await self.sessions.handle(inbound):
            return True
        parsed = parse(inbound.text)
        if parsed is None:
            return False
        with tracer.start_as_current_span("router.command") as span:
            if isinstance(parsed, Malformed):
                span.set_attribute("sb.command", parsed.verb)
                COMMANDS.labels(inbound.channel, "malformed").inc()
                await self._reply(inbound, USAGE)
                return True
            span.set_attribute("sb.command", parsed.verb)
            span.set_attribute("sb.command.click", inbound.HasField("click"))
            text, outcome, decision = await self._decide(inbound, parsed)
            span.set_attribute("sb.command.outcome", outcome)
            COMMANDS.labels(inbound.channel, outcome).inc()
            log.info(
                "chat command %s: %s",
                parsed.verb,
                outcome,
                extra={"channel": inbound.channel, "outcome": outcome},
            )
            await self._reply(inbound, text, decision)
            return True

    async def _decide(
        self, inbound: messages_pb2.InboundMessage, command: Command
    ) -> tuple[str, str, str]:
        """The answer's text, the outcome, and the decision made (``approved``, ``denied``;
        ``""`` when none was)."""
        sender = inbound.sender or inbound.chat.id
        try:
            route = resolve(inbound, self.settings.agent_for)
        except RouteError:
            route = None
        if not sender or route is None:
            return "Approvals cannot be decided from this chat.", "unroutable", ""
        request = approvals_pb2.ChatDecision(
            approval_id=command.approval_id,
            approve=command.approve,
            reason=command.reason,
            sender=f"{inbound.channel}:{sender}",
            session_key=route.session_key,
            role=inbound.role,  # stamped by the pipeline from the admission
        )
        try:
            outcome = await bus_request.request(
                self.rt.nc,
                self.rt.subjects.approvals_decide(),
                request,
                approvals_pb2.ChatDecisionResult,
                self.timeout_s,
            )
        except bus_request.NoAnswer as exc:
            log.warning("no answer to a chat decision: %s", exc)
            return UNAVAILABLE, "unavailable", ""
        decision = outcome.status if outcome.outcome == "decided" else ""
        return answer_text(command, outcome), outcome.outcome or "error", decision

    async def _reply(
        self, inbound: messages_pb2.InboundMessage, text: str, decision: str = ""
    ) -> None:
        """``text`` to the command's chat (in its thread), once per command message; the
        answer to a button click carries the click back, with ``decision`` when it made one."""
        await publish_answer(self.rt, inbound, text, decision)


async def answer_refused_click(
    rt: ServiceRuntime, inbound: messages_pb2.InboundMessage, reason: str
) -> None:
    """Tell the clicker of a button that security refused (a group's sender outside its
    allowlist...) that they may not decide, so the click does not hang: nothing else is said
    and nothing changes. Other refused messages, and clicks over the rate limit, get no such
    answer."""
    if reason == RATE_LIMITED or not inbound.HasField("click") or parse(inbound.text) is None:
        return
    COMMANDS.labels(inbound.channel, "refused").inc()
    await publish_answer(rt, inbound, ANSWERS["not_allowed"])


async def publish_answer(
    rt: ServiceRuntime, inbound: messages_pb2.InboundMessage, text: str, decision: str = ""
) -> None:
    """``text`` to ``inbound``'s chat as one OUTBOUND part, once per inbound message."""
    account = inbound.account or "default"
    run_id = f"command:{inbound.channel}:{account}:{inbound.message_id}"
    part = messages_pb2.OutboundMessage(
        run_id=run_id,
        part=0,
        parts=1,
        channel=inbound.channel,
        account=account,
        chat=inbound.chat,
        thread_id=inbound.thread_id,
        text=text,
        message_ids=[inbound.message_id],
        reply_context=inbound.reply_context,
    )
    if inbound.HasField("click"):
        part.click.CopyFrom(inbound.click)
        part.click.decision = decision
    subject = rt.subjects.outbound(bus.subject_token(part.channel), bus.subject_token(account))
    msg_id = f"{run_id}:0" if inbound.message_id else None
    await bus.js_publish(rt.js, subject, part, msg_id=msg_id)
