"""The methods a connected socket may call: ``send`` (a message, with attachments ingested by the
media service, into its session; a session command such as ``/status`` is answered by an agent
replica at once, as the router has them answered for chat channels), ``history``
(the session's transcript, from the agent's Sessions gRPC) and ``abort`` (an ``AbortRun`` on
``sb.runs.abort``: the agent replica running the session interrupts its run) and ``sessions``
(the WebChat conversations, from the agent's Sessions gRPC)."""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass

import grpc
import nats

from switchboard import bus, bus_request, session_commands, trust
from switchboard.media import MediaClient
from switchboard.sessions import direct_key
from switchboard.v1 import (
    approvals_pb2,
    approvals_pb2_grpc,
    messages_pb2,
    sessions_pb2,
    sessions_pb2_grpc,
)

from ..config import GatewaySettings
from ..conversations import BusUnavailable, Conversations, Outgoing
from ..errors import AGENT, ApiError, backend_error
from . import protocol
from .attachments import AttachmentError, ingest_attachments
from .protocol import AbortParams, DecideParams, HistoryParams, SendParams, SessionsParams

CHANNEL = "webchat"
OURS = {grpc.StatusCode.INVALID_ARGUMENT}  # the agent's own refusals (sessions_api)
COMMAND_TIMEOUT_S = 5.0  # what the router gives the agents too
LISTED = 1000  # the agent's sessions (of every channel) the WebChat ones are picked from
SESSION_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
CODES = {400: protocol.INVALID_REQUEST, 503: protocol.UNAVAILABLE, 504: protocol.TIMEOUT}


class MethodError(Exception):
    """A request that failed: its error code and a message for the caller."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def session_key(agent: str, session: str) -> str:
    """``<agent>:webchat:<session>``: a direct conversation on the webchat channel."""
    return direct_key(agent, CHANNEL, session)


@dataclass
class Methods:
    settings: GatewaySettings
    conversations: Conversations
    sessions: sessions_pb2_grpc.SessionsStub
    session: str  # the connection's session (the one whose events it follows)
    approvals: approvals_pb2_grpc.ApprovalsStub | None = None
    media: MediaClient | None = None  # attachments of send go to the media service

    @property
    def agent(self) -> str:
        return self.settings.default_agent

    async def send(self, params: SendParams) -> protocol.SendResult:
        limit = self.settings.max_body_chars
        if len(params.text) > limit:
            raise MethodError(
                protocol.TOO_MUCH_TEXT,
                f"Too much text: {len(params.text)} characters, at most {limit} "
                "(SB_MAX_BODY_CHARS).",
            )
        session = params.session or self.session
        key = session_key(self.agent, session)
        command = None if params.attachments else session_commands.parse(params.text)
        if command is not None:
            answer = await self._command(command, session, key)
            return protocol.SendResult(
                message_id=uuid.uuid4().hex,
                session=session,
                session_key=key,
                status="answered",
                answer=answer,
            )
        try:
            refs = await ingest_attachments(self.media, params.attachments)
        except AttachmentError as exc:
            raise MethodError(exc.code, exc.message) from exc
        out = Outgoing(CHANNEL, params.text, key, self.agent, sender=session, media=refs)
        try:
            await self.conversations.post(out)
        except BusUnavailable as exc:
            raise MethodError(
                protocol.UNAVAILABLE, "The message bus is not available; try again shortly."
            ) from exc
        return protocol.SendResult(message_id=out.message_id, session=session, session_key=key)

    async def _command(self, command: tuple[str, str], session: str, key: str) -> str:
        """A session command's answer from an agent replica (as the router asks for chat
        channels): the WebChat user holds the gateway token, the session is theirs, and the
        gateway stamps them ``owner`` (docs/trust.md; the router stamps chat senders)."""
        name, args = command
        request = sessions_pb2.SessionCommand(
            command=name,
            args=args,
            sender=f"{CHANNEL}:{session}",
            session_key=key,
            role=trust.Role.OWNER,
        )
        try:
            result = await bus_request.request(
                self.conversations.nc,
                self.conversations.subjects.sessions_command(),
                request,
                sessions_pb2.SessionCommandResult,
                COMMAND_TIMEOUT_S,
            )
        except bus_request.NoAnswer as exc:
            raise MethodError(
                protocol.UNAVAILABLE, "No agent answered the command; try again shortly."
            ) from exc
        return result.text or "Done."

    async def history(self, params: HistoryParams) -> protocol.HistoryResult:
        session = params.session or self.session
        key = session_key(self.agent, session)
        try:
            reply = await self.sessions.History(
                sessions_pb2.HistoryRequest(session_key=key, limit=params.limit), timeout=5.0
            )
        except grpc.aio.AioRpcError as exc:
            raise _method_error(backend_error(exc, AGENT, "Sessions.History", OURS)) from exc
        return protocol.HistoryResult(
            session=session,
            session_key=key,
            messages=[
                protocol.HistoryMessage(
                    role=m.role,
                    content=json.loads(m.content_json) if m.content_json else [],
                    run_id=m.run_id,
                    created_at_ms=m.created_at_ms,
                )
                for m in reply.messages
            ],
        )

    async def sessions_list(self, params: SessionsParams) -> protocol.SessionsResult:
        """The default agent's WebChat sessions, newest first: picked from its
        :data:`LISTED` most recent sessions of every channel (Sessions.List has no filter by
        channel)."""
        prefix = f"{self.agent}:{CHANNEL}:"
        try:
            reply = await self.sessions.List(
                sessions_pb2.ListSessionsRequest(agent=self.agent, limit=LISTED), timeout=5.0
            )
        except grpc.aio.AioRpcError as exc:
            raise _method_error(backend_error(exc, AGENT, "Sessions.List", OURS)) from exc
        found = [
            protocol.SessionSummary(
                session=s.session_key[len(prefix) :],
                session_key=s.session_key,
                updated_at_ms=s.updated_at_ms,
                message_count=s.message_count,
            )
            for s in reply.sessions
            if s.session_key.startswith(prefix) and SESSION_ID.match(s.session_key[len(prefix) :])
        ]
        found.sort(key=lambda s: s.updated_at_ms, reverse=True)
        return protocol.SessionsResult(sessions=found[: params.limit])

    async def abort(self, params: AbortParams) -> protocol.AbortResult:
        session = params.session or self.session
        key = session_key(self.agent, session)
        request = messages_pb2.AbortRun(session_key=key, requested_by=CHANNEL)
        try:
            await bus.core_publish(
                self.conversations.nc, self.conversations.subjects.runs_abort(), request
            )
        except (nats.errors.Error, TimeoutError) as exc:
            raise MethodError(
                protocol.UNAVAILABLE, "The message bus is not available; try again shortly."
            ) from exc
        return protocol.AbortResult(session=session, session_key=key)

    async def decide(self, params: DecideParams) -> protocol.DecideResult:
        if self.approvals is None:
            raise MethodError(protocol.UNAVAILABLE, "Approvals are not available here.")
        return await _decide(self.approvals, params)


async def _decide(
    approvals: approvals_pb2_grpc.ApprovalsStub, params: DecideParams
) -> protocol.DecideResult:
    """A WebChat user holds the gateway token: an operator, who may decide any approval (as
    with ``POST /api/approvals/{id}``)."""
    try:
        row = await approvals.Decide(
            approvals_pb2.DecideApprovalRequest(
                approval_id=params.approval_id,
                approve=params.decision == "approve",
                decided_by=CHANNEL,
                reason=params.reason,
            ),
            timeout=5.0,
        )
    except grpc.aio.AioRpcError as exc:
        if exc.code() == grpc.StatusCode.NOT_FOUND:
            raise MethodError(protocol.NOT_FOUND, f"No approval {params.approval_id!r}.") from exc
        if exc.code() == grpc.StatusCode.FAILED_PRECONDITION:
            raise MethodError(protocol.ALREADY_DECIDED, "That call was decided already.") from exc
        raise _method_error(backend_error(exc, AGENT, "Approvals.Decide")) from exc
    return protocol.DecideResult(approval_id=row.approval_id, status=row.status, tool=row.tool)


def _method_error(exc: ApiError) -> MethodError:
    return MethodError(exc.code or CODES.get(exc.status, protocol.UNAVAILABLE), exc.message)
