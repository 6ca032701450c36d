"""a2a_delegate: send a message to a remote A2A agent the operator configured and return its
answer (a2a-sdk's client: the agent card from the well-known path, then JSON-RPC
``message/send``; a task still running is polled with ``tasks/get``).

Who may be reached: the model names an agent, never a URL. The configured base URL is the
operator's choice and is not put through the SSRF guard (an internal agent is a legitimate
peer). The card, though, is the peer's word: a JSON-RPC endpoint on another host than the
configured one must pass the guard (public addresses only, or ``SB_WEB_FETCH_ALLOW_CIDRS``).
The bearer token goes only to the configured host."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any, ClassVar

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientError, A2AClientTimeoutError, AgentCardResolutionError
from a2a.helpers import get_artifact_text, get_message_text
from a2a.types.a2a_pb2 import (
    AgentCard,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)
from a2a.utils.constants import TransportProtocol
from a2a.utils.errors import A2AError

from switchboard.errors import causes
from switchboard.net.errors import FetchError
from switchboard.net.ssrf import Resolver, SsrfGuard
from switchboard.toolspec import ToolSpec
from switchboard_tools.a2a_settings import A2AAgent, A2ASettings
from switchboard_tools.errors import ToolError
from switchboard_tools.registry import Tool, ToolContext, ToolOutput

log = logging.getLogger(__name__)

MAX_MESSAGE_CHARS = 100_000
_SHOWN_ERROR = 300  # characters of a peer's error text shown to the model
_POLL_S = 1.0
_DONE = {
    TaskState.TASK_STATE_COMPLETED: "completed",
    TaskState.TASK_STATE_FAILED: "failed",
    TaskState.TASK_STATE_CANCELED: "canceled",
    TaskState.TASK_STATE_REJECTED: "rejected",
    TaskState.TASK_STATE_INPUT_REQUIRED: "input-required",
    TaskState.TASK_STATE_AUTH_REQUIRED: "auth-required",
}


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _SHOWN_ERROR else text[: _SHOWN_ERROR - 3] + "..."


def _origin(url: str) -> tuple[str, str, int | None]:
    parsed = httpx.URL(url)
    return parsed.scheme, parsed.host, parsed.port


class TooLarge(Exception):
    """A peer's response went past ``SB_A2A_MAX_RESPONSE_BYTES``."""


class _CappedStream(httpx.AsyncByteStream):
    def __init__(self, stream: httpx.AsyncByteStream, max_bytes: int) -> None:
        self._stream, self._max_bytes, self._seen = stream, max_bytes, 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._stream:
            self._seen += len(chunk)
            if self._seen > self._max_bytes:
                raise TooLarge
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


class CappedTransport(httpx.AsyncHTTPTransport):
    """Reads at most ``max_bytes`` of each response body (a peer cannot fill our memory)."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__()
        self._max_bytes = max_bytes

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        stream = response.stream
        assert isinstance(stream, httpx.AsyncByteStream)
        response.stream = _CappedStream(stream, self._max_bytes)
        return response


def _too_large(exc: BaseException) -> bool:
    """The cap's TooLarge reaches us wrapped by httpx and a2a-sdk, so the chain is searched."""
    return any(isinstance(e, TooLarge) for e in causes(exc))


def _card_problem(exc: AgentCardResolutionError, timeout_s: float) -> str:
    cause = exc.__cause__
    if isinstance(cause, httpx.TimeoutException):
        return f"no answer within {timeout_s:g}s"
    if isinstance(cause, httpx.RequestError):
        return "could not be reached (no connection to its host)"
    if exc.status_code is not None:
        return f"its agent card could not be read (HTTP {exc.status_code})"
    return "its agent card could not be read (not a valid agent card)"


class A2ADelegateTool(Tool):
    name: ClassVar[str] = "a2a_delegate"
    description: ClassVar[str] = (
        "Delegate to a remote A2A agent the operator configured: send it a message and get its "
        "answer. Pass `context_id` from an earlier answer to continue that conversation."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "agent": {"type": "string", "minLength": 1, "maxLength": 64},
            "message": {"type": "string", "minLength": 1, "maxLength": MAX_MESSAGE_CHARS},
            "context_id": {
                "type": "string",
                "minLength": 1,
                "maxLength": 128,
                "description": "The conversation to continue (from an earlier answer).",
            },
        },
        "required": ["agent", "message"],
        "additionalProperties": False,
    }
    groups: ClassVar[tuple[str, ...]] = ("a2a",)

    def __init__(
        self,
        settings: A2ASettings,
        allow_cidrs: list[str] | None = None,
        *,
        resolver: Resolver | None = None,
    ) -> None:
        self._agents: dict[str, A2AAgent] = dict(settings.a2a_agents)
        self._timeout_s = settings.a2a_timeout_s
        self._max_chars = settings.a2a_max_answer_chars
        self._max_bytes = settings.a2a_max_response_bytes
        self._guard = SsrfGuard(allow_cidrs or (), resolver)

    def spec(self) -> ToolSpec:
        spec = super().spec()
        names = sorted(self._agents)
        listed = ", ".join(
            f"{n} ({self._agents[n].description})" if self._agents[n].description else n
            for n in names
        )
        spec.parameters["properties"]["agent"]["enum"] = names  # a copy: Tool.spec's
        return replace(spec, description=f"{spec.description} Agents: {listed}")

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        name = str(args["agent"])
        agent = self._agents.get(name)
        if agent is None:
            known = ", ".join(sorted(self._agents)) or "none"
            raise ToolError(f"unknown A2A agent {name!r}; configured agents: {known}")
        timeout_s = min(self._timeout_s, ctx.timeout_s)
        try:
            task_or_message = await self._delegate_checked(name, agent, args, timeout_s)
        except (ToolError, TooLarge) as exc:  # a cap hit under whatever the SDK made of it
            if not _too_large(exc):
                raise
            limit = self._max_bytes
            raise ToolError(f"agent {name!r} answered more than {limit} bytes") from exc
        return self._render(name, task_or_message)

    async def _delegate_checked(
        self, name: str, agent: A2AAgent, args: dict[str, Any], timeout_s: float
    ) -> Task | Message:
        """:meth:`_delegate` with the SDK's and the network's failures as tool errors."""
        deadline = asyncio.timeout(timeout_s)
        try:
            async with deadline:
                return await self._delegate(agent, args)
        except TimeoutError as exc:
            if not deadline.expired():
                raise
            raise ToolError(f"agent {name!r} did not answer within {timeout_s:g}s") from exc
        except A2AClientTimeoutError as exc:
            raise ToolError(f"agent {name!r} did not answer within {timeout_s:g}s") from exc
        except AgentCardResolutionError as exc:
            raise ToolError(f"agent {name!r}: {_card_problem(exc, timeout_s)}") from exc
        except A2AClientError as exc:
            if isinstance(exc.__cause__, httpx.TransportError):
                problem = f"could not be reached: {_short(str(exc))}"
            else:
                problem = f"answered something that is not valid A2A: {_short(str(exc))}"
            raise ToolError(f"agent {name!r} {problem}") from exc
        except A2AError as exc:  # a JSON-RPC error the peer answered
            raise ToolError(f"agent {name!r} refused the message: {_short(str(exc))}") from exc
        except (ToolError, asyncio.CancelledError):
            raise
        except Exception as exc:  # garbage: not A2A (bad JSON-RPC, unparsable protobuf JSON...)
            if _too_large(exc):
                raise
            log.info("a2a peer %s answered garbage", name, exc_info=True)
            raise ToolError(f"agent {name!r} answered something that is not valid A2A") from exc

    async def _delegate(self, agent: A2AAgent, args: dict[str, Any]) -> Task | Message:
        headers = {}
        if agent.token is not None:
            headers["Authorization"] = f"Bearer {agent.token.get_secret_value()}"
        async with httpx.AsyncClient(
            headers=headers,
            timeout=self._timeout_s,
            follow_redirects=False,
            transport=CappedTransport(self._max_bytes),
        ) as http:
            card = await A2ACardResolver(http, agent.url).get_agent_card()
            await self._vet(agent, card)
            config = ClientConfig(httpx_client=http, streaming=False)
            client = ClientFactory(config).create(card)
            request = SendMessageRequest(
                message=Message(
                    role=Role.ROLE_USER,
                    message_id=uuid.uuid4().hex,
                    context_id=str(args.get("context_id", "")),
                    parts=[Part(text=str(args["message"]))],
                )
            )
            last: StreamResponse | None = None
            async for response in client.send_message(request):
                last = response
            if last is None or not (last.HasField("task") or last.HasField("message")):
                raise ValueError("no task and no message in the answer")
            if last.HasField("message"):
                return last.message
            task = last.task
            while task.status.state not in _DONE:  # still running: poll until the deadline
                await asyncio.sleep(_POLL_S)
                task = await client.get_task(GetTaskRequest(id=task.id))
            return task

    async def _vet(self, agent: A2AAgent, card: AgentCard) -> None:
        """The card's JSON-RPC endpoint: the configured host, or a public one (the guard)."""
        urls = [
            i.url
            for i in card.supported_interfaces
            if i.protocol_binding == TransportProtocol.JSONRPC
        ]
        if not urls:
            raise ToolError("the agent's card offers no JSON-RPC endpoint")
        for url in urls:
            if _origin(url) == _origin(agent.url):
                continue
            if agent.token is not None:
                raise ToolError(
                    f"refused: the agent's card sends requests to {httpx.URL(url).host}, not "
                    "the configured host (its token goes only there)"
                )
            try:
                await self._guard.check(url)
            except FetchError as exc:
                raise ToolError(f"the agent's card endpoint is {exc}") from exc

    def _render(self, name: str, answer: Task | Message) -> ToolOutput:
        if isinstance(answer, Message):
            text, state, context_id = get_message_text(answer), "completed", answer.context_id
        else:
            texts = [get_artifact_text(a) for a in answer.artifacts]
            if answer.status.HasField("message"):
                texts.append(get_message_text(answer.status.message))
            text = "\n\n".join(t for t in texts if t)
            state, context_id = _DONE[answer.status.state], answer.context_id
        text = text.strip() or "(no text in the answer)"
        truncated = len(text) > self._max_chars
        shown = text[: self._max_chars] + ("\n[answer truncated]" if truncated else "")
        head = f"Agent {name} ({state}, context_id {context_id}):"
        details = {"agent": name, "state": state, "context_id": context_id, "truncated": truncated}
        return ToolOutput(f"{head}\n{shown}", is_error=state != "completed", details=details)
