"""Lifecycle hooks: async callables plugins register per event (:mod:`.host`).

Events, where they fire, and what a hook may return:

- ``before_model_call(ModelCall)``: before each model call of a run; may return a new
  :class:`~..providers.base.ModelRequest` (e.g. a longer system prompt, fewer tools) or None to
  leave it. Return a new request (``dataclasses.replace``): the request's messages are the
  run's transcript and must not be changed in place.
- ``before_tool_call(ToolCallEvent)``: for each tool call the tool policy allows, before
  approval rules and dispatch (agent-local tools too); may return :class:`Block` (the model
  gets ``Tool call blocked: <reason>`` as the call's tool error) or :class:`Rewrite` (the call
  runs, and is judged by the approval rules, with the new arguments); None lets it pass. With
  several hooks, each sees the arguments as the previous one left them; the first block wins.
- ``after_tool_call(ToolOutcome)``: each result (refusals included), before the model sees it.
- ``message_received(MessageEvent)``: each inbound message a run takes up.
- ``message_sent(MessageEvent)``: a run's reply, after its parts were published on OUTBOUND
  (channels whose replies go back on the request, like the HTTP API, send none).
- ``session_start(SessionEvent)`` / ``session_end(SessionEvent)``: this replica takes up a
  session's lane (its lease) / releases it once the lane is drained. A session that goes
  quiet and gets a message an hour later starts again; with several replicas each start has
  its end on the same replica.

Isolation: every call has a deadline (``SB_HOOK_TIMEOUT_S``). A hook that raises, times out
or returns something it may not is logged with its plugin, counted in
``sb_agent_hook_errors_total{plugin,hook}``, and the run goes on without it, except
``before_tool_call``, which fails closed: a guard that cannot give its answer blocks the call
(``Tool call blocked: the check of plugin <name> failed``), since letting it through would
make every check that crashes a way around it. Hooks of one event run one after the other in
the order the plugins were enabled (``SB_PLUGINS``)."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from switchboard.v1 import messages_pb2

from ..metrics import HOOK_ERRORS
from ..providers.base import ModelRequest
from ..tools.client import CallRequest, CallResult

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 5.0


class HookName(StrEnum):
    BEFORE_MODEL_CALL = "before_model_call"
    BEFORE_TOOL_CALL = "before_tool_call"
    AFTER_TOOL_CALL = "after_tool_call"
    MESSAGE_RECEIVED = "message_received"
    MESSAGE_SENT = "message_sent"
    SESSION_START = "session_start"
    SESSION_END = "session_end"


@dataclass(frozen=True)
class RunInfo:
    run_id: str
    session_key: str
    agent: str


@dataclass(frozen=True)
class ModelCall:
    run: RunInfo
    request: ModelRequest
    iteration: int


@dataclass(frozen=True)
class ToolCallEvent:
    run: RunInfo
    call_id: str
    name: str
    args: dict[str, Any]


@dataclass(frozen=True)
class ToolOutcome:
    run: RunInfo
    call_id: str
    name: str
    args: dict[str, Any]
    content: str
    is_error: bool


@dataclass(frozen=True)
class MessageEvent:
    session_key: str
    agent: str
    channel: str
    chat_id: str
    text: str
    message_id: str = ""  # received: the inbound message's id
    run_id: str = ""  # sent: the run that wrote the reply


@dataclass(frozen=True)
class SessionEvent:
    session_key: str


@dataclass(frozen=True)
class Block:
    reason: str


@dataclass(frozen=True)
class Rewrite:
    args: dict[str, Any]


Hook = Callable[[Any], Awaitable[Any]]


class _BadReturn(Exception):
    """A hook returned something its event does not allow."""


class Hooks:
    def __init__(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self._hooks: dict[HookName, list[tuple[str, Hook]]] = {name: [] for name in HookName}

    def register(self, plugin: str, event: str, hook: Hook) -> None:
        """Add ``hook`` (an async function of the event) for ``event``; raises ValueError
        for an unknown event or a function that is not async."""
        try:
            name = HookName(event)
        except ValueError:
            known = ", ".join(HookName)
            raise ValueError(f"unknown hook event {event!r} (events: {known})") from None
        if not inspect.iscoroutinefunction(hook) and not inspect.iscoroutinefunction(
            getattr(hook, "__call__", None)  # noqa: B004 (an async callable object)
        ):
            raise ValueError(f"the {event} hook of {plugin} is not an async function")
        self._hooks[name].append((plugin, hook))

    def registered(self, event: HookName) -> int:
        return len(self._hooks[event])

    async def before_model_call(self, run: RunInfo, request: ModelRequest, n: int) -> ModelRequest:
        for plugin, hook in self._hooks[HookName.BEFORE_MODEL_CALL]:
            ok, value = await self._call(
                plugin, HookName.BEFORE_MODEL_CALL, hook, ModelCall(run, request, n)
            )
            if ok and value is not None:
                if isinstance(value, ModelRequest):
                    request = value
                else:
                    self._failed(plugin, HookName.BEFORE_MODEL_CALL, _BadReturn(type(value)))
        return request

    async def before_tool_call(self, run: RunInfo, call: CallRequest) -> CallRequest | CallResult:
        """The call to run (its arguments perhaps rewritten), or the refusal to answer."""
        event = HookName.BEFORE_TOOL_CALL
        for plugin, hook in self._hooks[event]:
            ok, value = await self._call(
                plugin, event, hook, ToolCallEvent(run, call.call_id, call.name, dict(call.args))
            )
            if ok and isinstance(value, Rewrite) and isinstance(value.args, dict):
                call = replace(call, args=dict(value.args))
            elif ok and isinstance(value, Block):
                return _blocked(call, str(value.reason)[:500] or "no reason given", plugin)
            elif not ok or value is not None:
                if ok:
                    self._failed(plugin, event, _BadReturn(type(value)))
                return _blocked(call, f"the check of plugin {plugin} failed", plugin)
        return call

    async def after_tool_call(self, run: RunInfo, call: CallRequest, result: CallResult) -> None:
        outcome = ToolOutcome(
            run, call.call_id, call.name, dict(call.args), result.content, result.is_error
        )
        await self.observe(HookName.AFTER_TOOL_CALL, outcome)

    async def message_received(self, items: list[messages_pb2.LaneItem]) -> None:
        for item in items:
            m = item.message
            await self.observe(
                HookName.MESSAGE_RECEIVED,
                MessageEvent(
                    item.session_key, item.agent, m.channel, m.chat.id, m.text, m.message_id
                ),
            )

    async def message_sent(self, run_id: str, item: messages_pb2.LaneItem, text: str) -> None:
        m = item.message
        to = m.deliver_to if m.deliver_to.channel else None
        channel, chat_id = (to.channel, to.chat.id) if to else (m.channel, m.chat.id)
        await self.observe(
            HookName.MESSAGE_SENT,
            MessageEvent(item.session_key, item.agent, channel, chat_id, text, run_id=run_id),
        )

    async def session(self, event: HookName, session_key: str) -> None:
        await self.observe(event, SessionEvent(session_key))

    async def observe(self, event: HookName, payload: Any) -> None:
        """Tell every hook of an observing event; what they return is ignored."""
        for plugin, hook in self._hooks[event]:
            await self._call(plugin, event, hook, payload)

    async def _call(self, plugin: str, event: HookName, hook: Hook, arg: Any) -> tuple[bool, Any]:
        try:
            async with asyncio.timeout(self.timeout_s):
                return True, await hook(arg)
        except Exception as exc:  # isolated: logged and counted, the run goes on
            self._failed(plugin, event, exc)
            return False, None

    def _failed(self, plugin: str, event: HookName, exc: Exception) -> None:
        HOOK_ERRORS.labels(plugin, event.value).inc()
        if isinstance(exc, TimeoutError):
            log.warning("the %s hook of plugin %s timed out (%gs)", event, plugin, self.timeout_s)
        elif isinstance(exc, _BadReturn):
            log.warning("the %s hook of plugin %s returned %s", event, plugin, exc.args[0])
        else:
            log.error("the %s hook of plugin %s failed", event, plugin, exc_info=exc)


def _blocked(call: CallRequest, reason: str, plugin: str) -> CallResult:
    return CallResult(
        call.call_id, f"Tool call blocked: {reason}.", True, {"error": "blocked", "plugin": plugin}
    )
