"""Session commands typed in a chat: the router turns ``/new``, ``/reset``, ``/stop``,
``/status`` and ``/model [provider:model]`` from an admitted sender into a ``SessionCommand``
request on ``sb.sessions.command`` (never onto the lane: they must not wait behind the run they
may be about, and never reach the model); an agent replica (queue group: any one) carries it
out here, because the agent holds what they change, and answers with the text for the chat.

- ``/new``, ``/reset``: a fresh transcript (:meth:`SessionAdmin.reset`);
- ``/stop``: interrupt the run in progress (:meth:`SessionAdmin.abort`);
- ``/status``: the session, its model, queue mode, transcript size and usage since the reset;
- ``/model``: show the model and the choices; ``/model provider:model`` picks one for this
  session (checked against what is configured); ``/model default`` goes back;
- ``/compact``: compact the conversation now (memory flush, summary: :mod:`..compaction.compactor`);
  it
  runs in the background (two model calls) and the answer says it started.

Who may (:func:`switchboard.trust.may_use_session_commands`, docs/trust.md): an owner anywhere;
in a direct conversation, its person; in a group, which has no single owner, nobody else. The
request's role is the router's stamp (chat channels: it admitted and identified the sender, and
folds ``SB_APPROVERS`` into the owners) or the gateway's (WebChat: its user holds the gateway
token); they are the only ones that may publish on ``sb.sessions.command``
(:mod:`switchboard.natsauth`), so the request is trusted here."""

from __future__ import annotations

import logging

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from switchboard import bus, trust
from switchboard.errors import InvalidPayload, InvalidSessionKey
from switchboard.queue_modes import QueueMode
from switchboard.sessions import parse_session_key
from switchboard.v1 import sessions_pb2

from ..metrics import SESSION_COMMANDS
from ..sessions.admin import SessionAdmin
from ..sessions.models import ModelChoiceError, SessionModels
from .compaction_commands import CompactCommand

log = logging.getLogger(__name__)

QUEUE_GROUP = "agent-session-commands"
COMMANDS = ("new", "reset", "stop", "status", "model", "compact")
DEFAULT = "default"
RESET_TEXT = "Started a fresh conversation: earlier messages of this chat are forgotten."
NOT_ALLOWED_GROUP = "Only the owners of this assistant may use session commands in a group."
NOT_ALLOWED = (
    "Only the person of this conversation or the owners of this assistant may use session"
    " commands here."
)


def result(outcome: str, text: str) -> sessions_pb2.SessionCommandResult:
    SESSION_COMMANDS.labels(outcome).inc()
    return sessions_pb2.SessionCommandResult(outcome=outcome, text=text)


class SessionCommands:
    def __init__(
        self,
        admin: SessionAdmin,
        models: SessionModels,
        default_mode: QueueMode,
        compact: CompactCommand | None = None,
    ) -> None:
        self.admin = admin
        self.compact = compact
        self.models = models
        self.default_mode = default_mode

    async def subscribe(self, nc: NATS, subjects: bus.Subjects) -> Subscription:
        return await nc.subscribe(
            subjects.sessions_command(), queue=QUEUE_GROUP, cb=self._on_request
        )

    def may_use(self, request: sessions_pb2.SessionCommand) -> bool:
        return trust.may_use_session_commands(request.role, request.session_key)

    async def answer(
        self, request: sessions_pb2.SessionCommand
    ) -> sessions_pb2.SessionCommandResult:
        try:
            key = parse_session_key(request.session_key)
        except InvalidSessionKey:
            return result("invalid", "This chat has no session.")
        if request.command not in COMMANDS or not request.sender:
            return result("invalid", f"Unknown command; try /{', /'.join(COMMANDS)}.")
        if not self.may_use(request):
            log.info(
                "a session command was refused",
                extra={"session": key.key, "sender": request.sender, "role": request.role},
            )
            group = key.root.kind == "group"
            return result("not_allowed", NOT_ALLOWED_GROUP if group else NOT_ALLOWED)
        log.info("session command /%s", request.command, extra={"session": key.key})
        if request.command in ("new", "reset"):
            await self.admin.reset(key.key)
            return result("done", RESET_TEXT)
        if request.command == "stop":
            stopped = await self.admin.abort(key.key, request.sender)
            return result("done", "Stopped." if stopped else "Nothing is running.")
        if request.command == "status":
            return result("done", await self.status(key.key))
        if request.command == "compact":
            if self.compact is None:
                return result("invalid", "Compaction is not available here.")
            return result("done", self.compact.start(key.key))
        return await self.model(key.key, key.root.agent or "main", request.args.strip())

    async def status(self, session_key: str) -> str:
        st = await self.admin.status(session_key)
        model = st.model or self.models.default_ref or "none configured"
        whose = "chosen for this chat" if st.model else "the default"
        mode = st.queue_mode or f"{self.default_mode.value} (the default)"
        lines = [
            f"Session: {session_key}",
            f"Model: {model} ({whose})",
            f"Queue mode: {mode}",
            f"Transcript: {st.messages} messages",
            f"Since {'the last reset' if st.reset_at else 'the start'}: runs {st.runs}, "
            f"tokens in {st.input_tokens}, out {st.output_tokens}",
        ]
        return "\n".join(lines)

    async def model(
        self, session_key: str, agent: str, wanted: str
    ) -> sessions_pb2.SessionCommandResult:
        if not wanted:
            current = (await self.admin.status(session_key)).model
            choices = ", ".join(self.models.choices()) or "none configured"
            using = current or f"{self.models.default_ref or 'none'} (the default)"
            return result(
                "done",
                f"Model: {using}. Choices: {choices}. "
                "Pick one with /model provider:model, or /model default.",
            )
        if wanted.lower() == DEFAULT:
            await self.admin.set_model(session_key, agent, "")
            return result("done", f"This chat uses the default model ({self.models.default_ref}).")
        try:
            ref = self.models.check(wanted)
        except ModelChoiceError as exc:
            return result("invalid", str(exc))
        await self.admin.set_model(session_key, agent, ref)
        return result("done", f"This chat now uses {ref}.")

    async def _on_request(self, msg: Msg) -> None:
        if not msg.reply:
            return
        try:
            request = bus.decode(sessions_pb2.SessionCommand, msg.data)
        except InvalidPayload:
            await msg.respond(result("invalid", "Unreadable command.").SerializeToString())
            return
        try:
            answer = await self.answer(request)
        except Exception:
            log.exception("a session command failed")
            answer = result("error", "That did not work; try again shortly.")
        await msg.respond(answer.SerializeToString())
