"""One agent run: load the session, call the model, run tools in a loop, persist, publish."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from nats.aio.client import Client as NATS
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from switchboard import bus
from switchboard.sessions import session_token
from switchboard.telemetry import extract_context
from switchboard.v1 import messages_pb2

from .events import RunEvents
from .metrics import LLM_SECONDS, LLM_TOKENS, RUN_SECONDS, RUNS, STEERED, TOOL_CALLS
from .prompt import system_prompt
from .providers.base import Model, ModelRequest, ModelResponse, TextDelta
from .providers.errors import ModelError
from .queueing import Batch, PendingItem, RunControl
from .store import Message, RunRecord, SessionStore
from .tools_client import CallRequest, ToolDispatcher

log = logging.getLogger(__name__)
tracer = trace.get_tracer("switchboard.agent")


class Runner:
    def __init__(
        self,
        nc: NATS,
        subjects: bus.Subjects,
        store: SessionStore,
        tools: ToolDispatcher,
        model: Model | None,
        no_model_reply: str,
        workspace_root: Path,
        max_iterations: int,
        max_tokens: int,
    ) -> None:
        self.nc = nc
        self.subjects = subjects
        self.store = store
        self.tools = tools
        self.model = model
        self.no_model_reply = no_model_reply
        self.workspace_root = workspace_root
        self.max_iterations = max_iterations
        self.max_tokens = max_tokens

    async def run(self, batch: Batch, expected_cursor: int, control: RunControl) -> None:
        """Answer ``batch``; commit the transcript and move the cursor over it, atomically."""
        item = batch.primary.item
        key = item.session_key
        if await self.store.run_exists(key, item.message.message_id):
            log.info("skipping replayed lane item", extra={"session": key})
            await self.store.advance_cursor(key, item.agent, batch.cover_seq, expected_cursor)
            return
        run_id = f"run_{uuid.uuid4().hex}"
        ids = [p.item.message.message_id for p in batch.items]
        events = RunEvents(
            self.nc, self.subjects.events(session_token(key)), run_id, key, ids[-1], ids
        )
        record = RunRecord(
            run_id=run_id,
            session_key=key,
            agent=item.agent,
            inbound_id=item.message.message_id,
            lane_seq=batch.cover_seq,
            started_at=datetime.now(UTC),
        )
        reply: list[str] = []
        start = time.perf_counter()
        parent = extract_context(batch.primary.headers)
        with tracer.start_as_current_span(
            "agent.run", context=parent, kind=SpanKind.CONSUMER
        ) as span:
            span.set_attribute("sb.session", key)
            span.set_attribute("sb.run_id", run_id)
            await events.emit("lifecycle", "start")
            try:
                await self._execute(batch, record, events, control, reply)
            except asyncio.CancelledError:
                if not control.interrupted:
                    raise
                current = asyncio.current_task()
                if current is not None:
                    current.uncancel()
                await self._interrupted(record)
            record.lane_seq = batch.cover_seq
            await self.store.commit_run(record, expected_cursor)
            if record.status != "completed":
                span.set_status(Status(StatusCode.ERROR, record.status))
            await events.emit(
                "lifecycle",
                "end",
                text="".join(reply),
                stop_reason=record.stop_reason,
                model=record.model,
                usage=messages_pb2.Usage(
                    input_tokens=record.input_tokens, output_tokens=record.output_tokens
                ),
                data={"status": record.status} if record.status != "completed" else None,
            )
        RUNS.labels(record.status).inc()
        RUN_SECONDS.observe(time.perf_counter() - start)

    async def _interrupted(self, record: RunRecord) -> None:
        """A newer message aborted the run: stop its tool calls and close its transcript so a
        dangling tool_use never reaches the model."""
        record.status = "interrupted"
        record.stop_reason = "interrupted"
        await bus.core_publish(
            self.nc,
            self.subjects.tools_cancel(record.run_id),
            messages_pb2.ToolCancel(run_id=record.run_id, reason="interrupted"),
        )
        last = record.messages[-1] if record.messages else None
        if last and last["role"] == "assistant":
            uses = [b for b in last["content"] if b.get("type") == "tool_use"]
            if uses:
                record.messages.append(
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": u["id"],
                                "content": "interrupted by a newer message",
                                "is_error": True,
                            }
                            for u in uses
                        ],
                    }
                )

    async def _execute(
        self,
        batch: Batch,
        record: RunRecord,
        events: RunEvents,
        control: RunControl,
        reply: list[str],
    ) -> None:
        """Run the tool loop; fill ``record`` and ``reply`` (the text as streamed)."""
        item = batch.primary.item
        inbound = item.message
        history = await self.store.transcript(item.session_key)
        system_extra: list[str] = []
        if not history:
            for c in inbound.context:
                if c.role == "system":
                    system_extra.append(c.text)
                elif c.role in ("user", "assistant"):
                    record.messages.append(_text_message(c.role, c.text))
        record.messages.append(_user_turn(batch.items))
        if self.model is None:
            record.stop_reason = "no_model"
            record.messages.append(_text_message("assistant", self.no_model_reply))
            await self._stream_text(self.no_model_reply, events, reply)
            return

        workspace = self.workspace_root / item.agent
        direct = inbound.chat.type != "group"
        system = "\n\n".join([system_prompt(workspace, item.session_key, direct), *system_extra])
        specs = await self.tools.specs()
        record.model = f"{self.model.provider}:{self.model.model}"
        try:
            for iteration in range(self.max_iterations):
                record.iterations = iteration + 1
                if iteration:
                    steered = await control.take_new()
                    if steered:
                        STEERED.inc(len(steered))
                        events.message_ids.extend(p.item.message.message_id for p in steered)
                        record.messages.append(_user_turn(steered))
                request = ModelRequest(
                    system=system,
                    messages=history + record.messages,
                    tools=specs,
                    max_tokens=self.max_tokens,
                )
                response = await self._call_model(request, events, reply)
                record.input_tokens += response.usage.input_tokens
                record.output_tokens += response.usage.output_tokens
                record.messages.append({"role": "assistant", "content": response.content})
                record.stop_reason = response.stop_reason
                uses = [b for b in response.content if b.get("type") == "tool_use"]
                if not uses:
                    break
                record.messages.append(await self._run_tools(record, uses, events))
            else:
                record.stop_reason = "max_iterations"
                note = f"[stopped after {self.max_iterations} model calls]"
                await self._stream_text(note, events, reply)
                record.messages.append(_text_message("assistant", note))
        except ModelError as exc:
            record.status = "error"
            record.error = exc.message
            text = f"Sorry, the model call failed: {exc.message}"
            await events.emit("error", "error", text=exc.message)
            await self._stream_text(text, events, reply)
            record.messages.append(_text_message("assistant", text))

    async def _call_model(
        self, request: ModelRequest, events: RunEvents, reply: list[str]
    ) -> ModelResponse:
        assert self.model is not None
        model = self.model
        start = time.perf_counter()
        with tracer.start_as_current_span("llm.call", kind=SpanKind.CLIENT) as span:
            span.set_attribute("gen_ai.system", model.provider)
            span.set_attribute("gen_ai.request.model", model.model)
            span.set_attribute("gen_ai.operation.name", "chat")
            first = True
            response: ModelResponse | None = None
            async for event in model.stream(request):
                if isinstance(event, TextDelta):
                    if first and reply:
                        await self._stream_text("\n\n", events, reply)
                    first = False
                    await self._stream_text(event.text, events, reply)
                else:
                    response = event
            if response is None:
                raise ModelError("the model stream ended without a response")
            span.set_attribute("gen_ai.response.model", response.model)
            span.set_attribute("gen_ai.usage.input_tokens", response.usage.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", response.usage.output_tokens)
            span.set_attribute("gen_ai.response.finish_reasons", [response.stop_reason])
        LLM_SECONDS.labels(model.provider, model.model).observe(time.perf_counter() - start)
        LLM_TOKENS.labels(model.provider, model.model, "input").inc(response.usage.input_tokens)
        LLM_TOKENS.labels(model.provider, model.model, "output").inc(response.usage.output_tokens)
        return response

    async def _stream_text(self, text: str, events: RunEvents, reply: list[str]) -> None:
        reply.append(text)
        await events.delta(text)

    async def _run_tools(
        self, record: RunRecord, uses: list[dict[str, Any]], events: RunEvents
    ) -> Message:
        calls = [CallRequest(u["id"], u["name"], u.get("input") or {}) for u in uses]
        for c in calls:
            await events.emit(
                "tool", "start", tool=c.name, call_id=c.call_id, data={"args": c.args}
            )
        results = await self.tools.run_all(record.run_id, record.session_key, record.agent, calls)
        blocks = []
        for call, result in zip(calls, results, strict=True):
            TOOL_CALLS.labels(call.name, "error" if result.is_error else "ok").inc()
            await events.emit(
                "tool",
                "result",
                tool=call.name,
                call_id=call.call_id,
                text=result.content,
                data={"is_error": result.is_error, **result.details},
            )
            blocks.append(
                {
                    "type": "tool_result",
                    "tool_use_id": call.call_id,
                    "content": result.content,
                    "is_error": result.is_error,
                }
            )
        return {"role": "user", "content": blocks}


def _text_message(role: str, text: str) -> Message:
    return {"role": role, "content": [{"type": "text", "text": text}]}


def _user_turn(items: list[PendingItem]) -> Message:
    """One user turn: a text block per lane item (several when collected or steered)."""
    return {
        "role": "user",
        "content": [{"type": "text", "text": p.item.message.text} for p in items],
    }
