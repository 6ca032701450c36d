"""Session commands typed in a chat, answered without the lane and without the model:
``/new``, ``/reset`` (a fresh transcript), ``/stop`` (interrupt the run in progress),
``/status``, ``/model [provider:model]`` and ``/compact`` (summarise the older turns now).

The agent holds everything they read or change (transcripts, runs, the session's model), so
the router only recognises them (first word of the text, any case, Telegram's
``/cmd@BotName`` form too, after any leading ``@mentions``), resolves the session the
sender's messages in this chat route to, and sends a ``SessionCommand`` request on
``sb.sessions.command`` with the sender's stamped role (``inbound.role``); an agent replica
checks who may use it (``trust.may_use_session_commands``), carries it out and answers with the
text, which goes back to the chat as an OUTBOUND part (see :mod:`chat_commands`)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from opentelemetry import trace
from prometheus_client import Counter

from switchboard import bus_request
from switchboard.runtime import ServiceRuntime
from switchboard.session_commands import parse
from switchboard.v1 import messages_pb2, sessions_pb2

from .config import RouterSettings
from .routing import RouteError, resolve

log = logging.getLogger(__name__)
tracer = trace.get_tracer("switchboard.router")

SESSION_COMMANDS = Counter(
    "sb_router_session_commands_total",
    "Session commands (/new, /reset, /stop, /status, /model, /compact) passed to the agents",
    ["channel", "command", "outcome"],
)
UNAVAILABLE = "That cannot be done right now (no agent answered); try again shortly."
UNROUTABLE = "Session commands cannot be used from this chat."

Reply = Callable[[messages_pb2.InboundMessage, str], Awaitable[None]]


class SessionCommands:
    def __init__(
        self, rt: ServiceRuntime, settings: RouterSettings, reply: Reply, timeout_s: float
    ) -> None:
        self.rt = rt
        self.settings = settings
        self.reply = reply
        self.timeout_s = timeout_s

    async def handle(self, inbound: messages_pb2.InboundMessage) -> bool:
        """Answer ``inbound`` if it is a session command (True), else False."""
        parsed = parse(inbound.text)
        if parsed is None:
            return False
        command, args = parsed
        with tracer.start_as_current_span("router.command") as span:
            span.set_attribute("sb.command", command)
            text, outcome = await self._ask(inbound, command, args)
            span.set_attribute("sb.command.outcome", outcome)
            SESSION_COMMANDS.labels(inbound.channel, command, outcome).inc()
            log.info(
                "session command %s: %s",
                command,
                outcome,
                extra={"channel": inbound.channel, "outcome": outcome},
            )
            await self.reply(inbound, text)
        return True

    async def _ask(
        self, inbound: messages_pb2.InboundMessage, command: str, args: str
    ) -> tuple[str, str]:
        sender = inbound.sender or inbound.chat.id
        try:
            route = resolve(inbound, self.settings.agent_for)
        except RouteError:
            route = None
        if not sender or route is None:
            return UNROUTABLE, "unroutable"
        request = sessions_pb2.SessionCommand(
            command=command,
            args=args,
            sender=f"{inbound.channel}:{sender}",
            session_key=route.session_key,
            role=inbound.role,  # stamped by the pipeline from the admission
        )
        try:
            result = await bus_request.request(
                self.rt.nc,
                self.rt.subjects.sessions_command(),
                request,
                sessions_pb2.SessionCommandResult,
                self.timeout_s,
            )
        except bus_request.NoAnswer as exc:
            log.warning("no answer to a session command: %s", exc)
            return UNAVAILABLE, "unavailable"
        return result.text or UNAVAILABLE, result.outcome or "error"
