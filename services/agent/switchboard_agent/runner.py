"""One agent run: load the session, call the model, run tools in a loop, persist, publish."""

from __future__ import annotations

import logging
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from nats.aio.client import Client as NATS
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from switchboard import bus
from switchboard.sessions import session_token
from switchboard.v1 import messages_pb2

from .events import RunEvents
from .metrics import LLM_SECONDS, LLM_TOKENS, RUN_SECONDS, RUNS, TOOL_CALLS
from .prompt import system_prompt
from .providers.base import Model, ModelRequest, ModelResponse, TextDelta
from .providers.errors import ModelError
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

    async def run(
        self, item: messages_pb2.LaneItem, lane_seq: int, parent: otel_context.Context
    ) -> None:
        inbound = item.message
        key = item.session_key
        if await self.store.run_exists(key, inbound.message_id):
            log.info("skipping replayed lane item", extra={"session": key, "seq": lane_seq})
            return
        run_id = f"run_{uuid.uuid4().hex}"
        events = RunEvents(
            self.nc, self.subjects.events(session_token(key)), run_id, key, inbound.message_id
        )
        record = RunRecord(
            run_id=run_id,
            session_key=key,
            agent=item.agent,
            inbound_id=inbound.message_id,
            lane_seq=lane_seq,
            started_at=datetime.now(UTC),
        )
        start = time.perf_counter()
        with tracer.start_as_current_span(
            "agent.run", context=parent, kind=SpanKind.CONSUMER
        ) as span:
            span.set_attribute("sb.session", key)
            span.set_attribute("sb.run_id", run_id)
            await events.emit("lifecycle", "start")
            reply = await self._execute(item, record, events)
            await self.store.commit_run(record)
            if record.status != "completed":
                span.set_status(Status(StatusCode.ERROR, record.status))
            await events.emit(
                "lifecycle",
                "end",
                text=reply,
                stop_reason=record.stop_reason,
                model=record.model,
                usage=messages_pb2.Usage(
                    input_tokens=record.input_tokens, output_tokens=record.output_tokens
                ),
                data={"status": record.status} if record.status != "completed" else None,
            )
        RUNS.labels(record.status).inc()
        RUN_SECONDS.observe(time.perf_counter() - start)

    async def _execute(
        self, item: messages_pb2.LaneItem, record: RunRecord, events: RunEvents
    ) -> str:
        """Run the tool loop; fill ``record``; return the reply text as streamed."""
        inbound = item.message
        history = await self.store.transcript(item.session_key)
        system_extra: list[str] = []
        if not history:
            for c in inbound.context:
                if c.role == "system":
                    system_extra.append(c.text)
                elif c.role in ("user", "assistant"):
                    record.messages.append(_text_message(c.role, c.text))
        record.messages.append(_text_message("user", inbound.text))
        if self.model is None:
            record.stop_reason = "no_model"
            record.messages.append(_text_message("assistant", self.no_model_reply))
            await events.delta(self.no_model_reply)
            return self.no_model_reply

        workspace = self.workspace_root / item.agent
        direct = inbound.chat.type != "group"
        system = "\n\n".join([system_prompt(workspace, item.session_key, direct), *system_extra])
        specs = await self.tools.specs()
        reply: list[str] = []
        record.model = f"{self.model.provider}:{self.model.model}"
        try:
            for iteration in range(self.max_iterations):
                record.iterations = iteration + 1
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
        return "".join(reply)

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
