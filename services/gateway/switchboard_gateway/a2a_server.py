"""The gateway as an A2A agent (a2a-sdk): its agent card, public, at the well-known path, and
the JSON-RPC endpoint at ``/a2a`` (A2A 1.0's ``SendMessage``, ``SendStreamingMessage``,
``GetTask``, ``CancelTask``..., and v0.3's ``message/send``, ``message/stream``, ``tasks/get``,
``tasks/cancel``...), behind the gateway token like every other route.

Each A2A context is one session, ``<agent>:a2a:<contextId>`` (a direct conversation on the
``a2a`` channel with the context as its peer): a second message in the same context sees the
first one's history. A task runs one message: submitted, working, then completed with the
answer as its ``answer`` artifact (streamed as appended chunks, replaced by the full text at the
end), failed (with a message saying why) or canceled (``tasks/cancel`` aborts the session's run,
as WebChat's abort does).

Tasks live in the SDK's in-memory store (the newest ``SB_A2A_MAX_TASKS``): per gateway replica
and lost on restart (docs/a2a.md)."""

from __future__ import annotations

import json
import logging
import re
import uuid

import nats.errors
from a2a.helpers import new_task, new_text_part
from a2a.server.agent_execution import (
    AgentExecutor,
    RequestContext,
    SimpleRequestContextBuilder,
)
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import (
    add_a2a_routes_to_fastapi,
    create_agent_card_routes,
    create_jsonrpc_routes,
)
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    Message,
    SecurityRequirement,
    SecurityScheme,
    SendMessageRequest,
    StringList,
    Task,
    TaskState,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH, PROTOCOL_VERSION_CURRENT
from a2a.utils.constants import TransportProtocol as Binding
from a2a.utils.errors import InvalidParamsError
from fastapi import FastAPI

from switchboard import bus
from switchboard.sessions import direct_key
from switchboard.v1 import messages_pb2

from .a2a_mount import CARD_PATH, RPC_PATH
from .a2a_store import BoundedTaskStore
from .config import GatewaySettings
from .conversations import BusUnavailable, Conversations, Outgoing, ReplyTimeout

log = logging.getLogger(__name__)

if CARD_PATH != AGENT_CARD_WELL_KNOWN_PATH:  # a2a_mount routes it before the SDK is loaded
    raise ImportError(f"a2a_mount.CARD_PATH is not the SDK's {AGENT_CARD_WELL_KNOWN_PATH}")
CHANNEL = "a2a"
ARTIFACT_NAME = "answer"
BEARER = "bearer"  # the card's security scheme: the gateway token
CONTEXT_ID = re.compile(r"[A-Za-z0-9_.@+-]{1,128}")  # fullmatch: it names a session
END_STATES = {"aborted": TaskState.TASK_STATE_CANCELED}


def session_key(agent: str, context_id: str) -> str:
    """``<agent>:a2a:<contextId>``: the session an A2A context is."""
    return direct_key(agent, CHANNEL, context_id)


def agent_card(settings: GatewaySettings) -> AgentCard:
    base = settings.a2a_public_url or f"http://127.0.0.1:{settings.http_port}"
    agent = settings.default_agent
    return AgentCard(
        name=f"Switchboard {agent}",
        description=f"The Switchboard assistant '{agent}': one session per A2A context.",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(
                url=base.rstrip("/") + RPC_PATH,
                protocol_binding=Binding.JSONRPC,
                protocol_version=PROTOCOL_VERSION_CURRENT,
            )
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        security_schemes={
            BEARER: SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="Bearer", description="The gateway token (SB_GATEWAY_TOKEN)."
                )
            )
        },
        security_requirements=[SecurityRequirement(schemes={BEARER: StringList()})],
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(
                id="chat",
                name="Chat",
                description="Answers a message the way the assistant answers its users.",
                tags=["assistant"],
            )
        ],
    )


class CheckedContextBuilder(SimpleRequestContextBuilder):
    """Refuses, as invalid params (a JSON-RPC error, before any task exists), a message
    without text or with more than ``max_chars`` of it, or a context id that cannot name a
    session."""

    def __init__(self, max_chars: int) -> None:
        super().__init__()
        self.max_chars = max_chars

    async def build(
        self,
        context: ServerCallContext,
        params: SendMessageRequest | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
        task: Task | None = None,
    ) -> RequestContext:
        if params is not None:
            given = context_id or params.message.context_id
            if given and not CONTEXT_ID.fullmatch(given):
                raise InvalidParamsError(
                    message="contextId must be 1-128 characters of letters, digits and _ . @ + -"
                )
            texts = [p.text for p in params.message.parts if p.HasField("text")]
            if not any(t.strip() for t in texts):
                raise InvalidParamsError(message="The message needs a non-empty text part.")
            chars = sum(len(t) for t in texts)
            if chars > self.max_chars:
                raise InvalidParamsError(
                    message=f"Too much text: {chars} characters, at most {self.max_chars} "
                    "(SB_MAX_BODY_CHARS)."
                )
        return await super().build(context, params, task_id, context_id, task)


class SessionExecutor(AgentExecutor):
    """Runs a task's message in its context's session and reports what the run does."""

    def __init__(self, conversations: Conversations, settings: GatewaySettings) -> None:
        self.conversations = conversations
        self.agent = settings.default_agent
        self.timeout_s = settings.reply_timeout_s

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = str(context.task_id), str(context.context_id)
        updater = TaskUpdater(event_queue, task_id, context_id)
        if context.current_task is None:
            history = [context.message] if context.message is not None else []
            await event_queue.enqueue_event(
                new_task(task_id, context_id, TaskState.TASK_STATE_SUBMITTED, history=history)
            )
        text = context.get_user_input()
        key = session_key(self.agent, context_id)
        out = Outgoing(CHANNEL, text, key, self.agent, sender=context_id)
        artifact_id = uuid.uuid4().hex
        await updater.start_work()
        chunks = 0
        try:
            async for event in self.conversations.converse(out, self.timeout_s):
                if event.stream == "assistant" and event.text:
                    await updater.add_artifact(
                        [new_text_part(event.text)],
                        artifact_id=artifact_id,
                        name=ARTIFACT_NAME,
                        append=chunks > 0,
                        last_chunk=False,
                    )
                    chunks += 1
                elif event.stream == "lifecycle" and event.phase == "end":
                    await self._finish(updater, event, artifact_id)
                    return
        except ReplyTimeout:
            message = "The assistant did not answer in time; the message is queued."
            await updater.failed(self._say(updater, message))
        except BusUnavailable:
            message = "The message bus is not available; try again shortly."
            await updater.failed(self._say(updater, message))

    async def _finish(
        self, updater: TaskUpdater, end: messages_pb2.AgentEvent, artifact_id: str
    ) -> None:
        """The full answer replaces the streamed chunks; the run's status sets the task's."""
        data = json.loads(end.data_json) if end.data_json else {}
        status = data.get("status", "completed") if isinstance(data, dict) else "completed"
        if end.text:
            await updater.add_artifact(
                [new_text_part(end.text)],
                artifact_id=artifact_id,
                name=ARTIFACT_NAME,
                append=False,
                last_chunk=True,
            )
        if status == "completed":
            await updater.complete()
        elif status in END_STATES:
            await updater.update_status(END_STATES[status])
        else:
            reason = end.text or f"The run ended without an answer ({status})."
            await updater.failed(self._say(updater, reason))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Abort the context's session run (the agent replica running it interrupts it)."""
        updater = TaskUpdater(event_queue, str(context.task_id), str(context.context_id))
        key = session_key(self.agent, str(context.context_id))
        request = messages_pb2.AbortRun(session_key=key, requested_by=CHANNEL)
        try:
            await bus.core_publish(
                self.conversations.nc, self.conversations.subjects.runs_abort(), request
            )
        except (nats.errors.Error, TimeoutError):
            # The task is canceled all the same (no more updates); the run may still finish.
            log.warning("a2a: abort not published", extra={"session": key}, exc_info=True)
        await updater.cancel()

    @staticmethod
    def _say(updater: TaskUpdater, text: str) -> Message:
        return updater.new_agent_message([new_text_part(text)])


def mount(app: FastAPI, settings: GatewaySettings, conversations: Conversations) -> None:
    """The agent card at :data:`CARD_PATH` and the JSON-RPC endpoint at :data:`RPC_PATH`."""
    card = agent_card(settings)
    handler = DefaultRequestHandler(
        agent_executor=SessionExecutor(conversations, settings),
        task_store=BoundedTaskStore(settings.a2a_max_tasks),
        agent_card=card,
        request_context_builder=CheckedContextBuilder(settings.max_body_chars),
    )
    add_a2a_routes_to_fastapi(  # in the gateway's OpenAPI too (behind the token)
        app,
        agent_card_routes=create_agent_card_routes(card, card_url=CARD_PATH),
        # v0.3 clients too: their method names (message/send, tasks/get...) on the same endpoint.
        jsonrpc_routes=create_jsonrpc_routes(handler, rpc_url=RPC_PATH, enable_v0_3_compat=True),
    )
