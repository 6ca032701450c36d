"""A remote A2A agent for the ``a2a_delegate`` tool: a2a-sdk's own server (its card and JSON-RPC
routes, an in-memory task store) around a tiny executor that answers ``echo: <text>`` as a
completed task's artifact, served by uvicorn on a free port. It records what it received."""

from __future__ import annotations

from dataclasses import dataclass, field

from a2a.helpers import new_task, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    TaskState,
)
from a2a.utils.constants import PROTOCOL_VERSION_CURRENT, TransportProtocol
from starlette.applications import Starlette

from tests.fakes.server_thread import ServerThread


@dataclass(frozen=True)
class Received:
    text: str
    context_id: str
    authorization: str


@dataclass
class EchoExecutor(AgentExecutor):
    received: list[Received] = field(default_factory=list)

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = str(context.task_id), str(context.context_id)
        headers = context.call_context.state.get("headers", {})
        text = context.get_user_input()
        self.received.append(Received(text, context_id, headers.get("authorization", "")))
        if context.current_task is None:
            await event_queue.enqueue_event(
                new_task(task_id, context_id, TaskState.TASK_STATE_SUBMITTED)
            )
        updater = TaskUpdater(event_queue, task_id, context_id)
        await updater.add_artifact([new_text_part(f"echo: {text}")], name="echo")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, str(context.task_id), str(context.context_id)).cancel()


class EchoPeer:
    """``with EchoPeer() as peer``: ``peer.url`` (base URL), ``peer.received``."""

    def __init__(self) -> None:
        self.executor = EchoExecutor()
        self.port = 0
        card = AgentCard(
            name="echo",
            description="Echoes what it is told.",
            version="1.0.0",
            capabilities=AgentCapabilities(streaming=True),
            default_input_modes=["text/plain"],
            default_output_modes=["text/plain"],
            skills=[AgentSkill(id="echo", name="Echo", description="Echoes", tags=["echo"])],
        )

        async def with_url(card: AgentCard) -> AgentCard:  # the port is known once started
            served = AgentCard()
            served.CopyFrom(card)
            served.supported_interfaces.append(
                AgentInterface(
                    url=f"{self.url}/rpc",
                    protocol_binding=TransportProtocol.JSONRPC,
                    protocol_version=PROTOCOL_VERSION_CURRENT,
                )
            )
            return served

        handler = DefaultRequestHandler(
            agent_executor=self.executor, task_store=InMemoryTaskStore(), agent_card=card
        )
        app = Starlette(
            routes=[
                *create_agent_card_routes(card, card_modifier=with_url),
                *create_jsonrpc_routes(handler, rpc_url="/rpc"),
            ]
        )
        self._server = ServerThread(app, "a2a-echo-peer")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def received(self) -> list[Received]:
        return list(self.executor.received)

    def __enter__(self) -> EchoPeer:
        self.port = self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop()
