"""One agent run: load the session, call the model, run tools in a loop, persist, publish."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from nats.aio.client import Client as NATS
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from switchboard import bus
from switchboard.queue_modes import QueueMode
from switchboard.sessions import session_token
from switchboard.telemetry import extract_context
from switchboard.v1 import messages_pb2

from ..approvals.store import Checkpoint
from ..approvals.toolgate import ToolGate, ToolRules
from ..compaction.compactor import Compactor
from ..media.attachments import AgentMedia, note
from ..memory.handle import AgentMemory
from ..metrics import RUN_SECONDS, RUNS, STEERED
from ..outbound.events import RunEvents
from ..outbound.publisher import OutboundPublisher
from ..plugins.hooks import Hooks, RunInfo
from ..providers.base import Model, ModelRequest
from ..providers.errors import ModelError
from ..providers.failover import ModelRouter
from ..sessions.models import SessionModels
from ..sessions.standing import settle
from ..sessions.store import Message, RunRecord, SessionStore
from ..tools.client import ToolDispatcher
from ..tools.local import LocalTools
from ..workspace.files import WorkspaceFiles, session_kind
from .aborts import close_interrupted
from .budget import Accounting
from .commit import commit_run, hold_usage
from .heartbeat import is_heartbeat, silent_heartbeat
from .model_call import call_model, stop_if_interrupted, stream_text
from .prompt import PromptBuilder, RunFacts
from .queueing import Batch, PendingItem, RunControl
from .replies import committed_reply, reply_text
from .toolphase import run_tools
from .turn import Turn, pending_tool_uses, restore, text_message, user_turn

log = logging.getLogger(__name__)
tracer = trace.get_tracer("switchboard.agent")


AfterCommit = Callable[[messages_pb2.LaneItem, str | None, str], Awaitable[None]]


def iteration_limit_note(limit: int) -> str:
    """The runner's closing note when a run reached the iteration limit (SB_MAX_ITERATIONS)."""
    return f"[stopped after {limit} model calls]"


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
        gate: ToolGate | None = None,
        outbound: OutboundPublisher | None = None,
        local: LocalTools | None = None,
        memory: AgentMemory | None = None,
        media: AgentMedia | None = None,
        prompts: PromptBuilder | None = None,
        models: SessionModels | None = None,
        accounting: Accounting | None = None,
        hooks: Hooks | None = None,
        compaction: Compactor | None = None,
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
        self.gate = gate or ToolGate(ToolRules(), None, None, 0)
        self.outbound = outbound
        self.local = local or LocalTools()  # tools the agent runs itself (message, memory_*)
        self.memory = memory
        self.media = media
        self.prompts = prompts or PromptBuilder(WorkspaceFiles(workspace_root, seed=False))
        self.models = models  # a session's own model (/model); None: always self.model
        self.accounting = accounting  # usage per call and SB_BUDGET limits (runs/budget.py)
        self.hooks = hooks or Hooks()  # plugins' lifecycle hooks (plugins/hooks.py)
        # Called after a run committed (its item, reply text, status), and for a replayed
        # item whose run was committed before (text None): sub-agent results
        # (subagents/children.py).
        self.after_commit: AfterCommit | None = None
        self.compaction = compaction  # pruning, compaction, memory flush (compaction/compactor.py)

    async def run(
        self,
        batch: Batch,
        expected_cursor: int,
        control: RunControl,
        session_policy: dict[str, Any] | None = None,
        mode: QueueMode = QueueMode.QUEUE,
        model_ref: str = "",
        stored_standing: str = "",
    ) -> None:
        """Answer ``batch``; commit the transcript and move the cursor over it, atomically.
        A run that was waiting for an approval when its owner died resumes from its
        checkpoint. ``stored_standing``: the one the session remembers (sessions/standing.py)."""
        item = batch.primary.item
        key = item.session_key
        start_state = await self.store.run_start(key, item.message.message_id)
        done, saved = start_state.done, start_state.checkpoint
        if done:
            log.info("skipping replayed lane item", extra={"session": key})
            await self.republish(item, mode)
            await self.store.advance_cursor(key, item.agent, batch.cover_seq, expected_cursor)
            return
        checkpoint = Checkpoint(*saved) if saved else None
        run_id = checkpoint.run_id if checkpoint else f"run_{uuid.uuid4().hex}"
        ids = [p.item.message.message_id for p in batch.items]
        if checkpoint:
            ids = list(dict.fromkeys([*checkpoint.state["message_ids"], *ids]))
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
        hold_usage(self.accounting, run_id)  # written with the commit (runs/commit.py)
        standing = await settle(self.store, [p.item for p in batch.items], stored_standing)
        policy = self.gate.rules.policy(item.agent, key, session_policy, standing=standing)
        resumed = checkpoint is not None
        turn = Turn(record, events, control, policy, resumed, origin=item, standing=standing)
        reply = turn.reply
        if checkpoint:
            restore(turn, checkpoint.state, batch)
        start = time.perf_counter()
        parent = extract_context(batch.primary.headers)
        with tracer.start_as_current_span(
            "agent.run", context=parent, kind=SpanKind.CONSUMER
        ) as span:
            span.set_attribute("sb.session", key)
            span.set_attribute("sb.run_id", run_id)
            span.set_attribute("sb.standing", str(standing))
            try:
                # Inside: an abort can land while the start event goes out (the client saw it
                # and asked); outside, that run ended unrecorded and its message ran again.
                await events.emit(
                    "lifecycle", "start", data={"resumed": True} if checkpoint else None
                )
                record.epoch = start_state.epoch
                await self._execute(batch, turn, start_state.history, model_ref)
            except asyncio.CancelledError:
                if not control.interrupted:
                    raise
                current = asyncio.current_task()
                if current is not None:
                    current.uncancel()
                await close_interrupted(record, self.nc, self.subjects, self.gate.store)
            record.lane_seq = batch.cover_seq
            await commit_run(self.store, self.accounting, record, expected_cursor)
            text = reply_text(record.messages, record.status, record.stop_reason)
            if silent_heartbeat(item.message, text):
                span.set_attribute("sb.heartbeat_ok", True)  # nothing to tell anyone
            elif self.outbound is not None and self.outbound.delivers_reply(item.message):
                ids = list(events.message_ids)
                await self.outbound.publish(run_id, item, text, ids, mode.threads_replies)
                await self.hooks.message_sent(run_id, item, text)
            if self.memory is not None and record.status == "completed":
                asked = "\n".join(p.item.message.text for p in batch.items)
                self.memory.after_commit(item.agent, key, run_id, asked, text, standing)
            if self.after_commit is not None:
                await self.after_commit(item, text, record.status)
            if record.status != "completed":
                span.set_status(Status(StatusCode.ERROR, record.status))
            log.info(
                "run %s",
                record.status,
                extra={
                    "session": key,
                    "run_id": run_id,
                    "stop_reason": record.stop_reason,
                    "iterations": record.iterations,
                    "resumed": checkpoint is not None,
                },
            )
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

    async def republish(self, item: messages_pb2.LaneItem, mode: QueueMode) -> None:
        """A replayed item whose run is committed: publish its reply parts again; the OUTBOUND
        stream drops the ones that went out before (``Nats-Msg-Id = <run id>:<part>``), so a
        reply lost by an owner that died after its commit is delivered exactly once."""
        if self.after_commit is not None:
            await self.after_commit(item, None, "")
        if self.outbound is None or not self.outbound.delivers_reply(item.message):
            return
        found = await committed_reply(
            self.store.pool,
            item.session_key,
            item.message.message_id,
            self.outbound.republish_window_s,
        )
        if found is not None and not silent_heartbeat(item.message, found.text):
            await self.outbound.publish(
                found.run_id, item, found.text, found.message_ids, mode.threads_replies
            )

    async def _execute(
        self, batch: Batch, turn: Turn, history: list[Message], model_ref: str = ""
    ) -> None:
        """Run the tool loop; fill ``turn.record`` and ``turn.reply`` (the text as streamed).
        ``history``: the transcript the run starts from (read with the run state, in one round
        trip); ``model_ref``: the session's own model ("" : the configured one)."""
        record, events, control, reply = turn.record, turn.events, turn.control, turn.reply
        item = batch.primary.item
        inbound = item.message
        system_extra: list[str] = []
        if not history:
            for c in inbound.context:
                if c.role == "system":
                    system_extra.append(c.text)
                elif c.role in ("user", "assistant") and not turn.resumed:
                    record.messages.append(text_message(c.role, c.text))
        if not turn.resumed:
            record.messages.append(await self._user_turn(batch.items))
            await self.hooks.message_received([p.item for p in batch.items])
        model = await self.models.get(model_ref) if self.models else self.model
        if model is None:
            record.stop_reason = "no_model"
            record.messages.append(text_message("assistant", self.no_model_reply))
            await stream_text(self.no_model_reply, events, reply)
            return

        record.model = f"{model.provider}:{model.model}"
        facts = RunFacts(
            agent=item.agent,
            session_key=item.session_key,
            kind=session_kind(item.session_key, inbound.chat.type),
            channel=inbound.channel,
            model=record.model,
            heartbeat=is_heartbeat(inbound),
            standing=turn.standing,
        )
        prompt = self.prompts.build(facts)
        system = "\n\n".join([prompt.text, *system_extra])
        if self.memory is not None:
            self.memory.before_run(item.agent)
            asked = "\n".join(p.item.message.text for p in batch.items)
            recalled = await self.memory.recall(item.agent, item.session_key, asked, turn.standing)
            if recalled:
                system = f"{system}\n\n{recalled}"
        offered = self.local.offered(await self.tools.specs(item.agent), item.agent)
        # The groups the policy matches are those the offered tools declare: a call of any
        # other tool is judged as unknown (fail closed, see tools/policy.py).
        turn.policy = turn.policy.knowing(offered)
        specs = [s for s in offered if turn.policy.allows(s.name).allowed]
        # The agent's chain of models (providers/failover.py) unless the session picked its own
        # (/model): provider/model name the one that answered.
        if isinstance(model, ModelRouter):
            model = model.bind(item.agent, events)
        record.model = f"{model.provider}:{model.model}"
        compaction = (
            self.compaction.begin(turn, model, history, system, specs) if self.compaction else None
        )
        uses = pending_tool_uses(record.messages) if turn.resumed else []
        try:
            while True:
                if uses:
                    ran = await run_tools(self.gate, self.tools, turn, uses, self.local)
                    record.messages.append(ran)
                if turn.late:  # resumed with items the checkpoint did not hold
                    record.messages.append(await self._user_turn(turn.late))
                    turn.late = []
                if record.iterations >= self.max_iterations:
                    record.stop_reason = "max_iterations"
                    note = iteration_limit_note(self.max_iterations)
                    await stream_text(note, events, reply)
                    record.messages.append(text_message("assistant", note))
                    break
                if self.accounting and (stop := await self.accounting.check(record)):
                    record.stop_reason = "budget"
                    await events.emit("lifecycle", "budget", data={"limit": stop.limit})
                    await stream_text(("\n\n" if reply else "") + stop.message, events, reply)
                    record.messages.append(text_message("assistant", stop.message))
                    break
                stop_if_interrupted(control)
                record.iterations += 1
                if record.iterations > 1:
                    steered = await control.take_new()
                    if steered:
                        STEERED.inc(len(steered))
                        events.message_ids.extend(p.item.message.message_id for p in steered)
                        record.messages.append(await self._user_turn(steered))
                        await self.hooks.message_received([p.item for p in steered])
                request = ModelRequest(
                    system=system,
                    messages=await compaction.messages()
                    if compaction
                    else history + record.messages,
                    tools=specs,
                    max_tokens=self.max_tokens,
                    cache_prefix_chars=prompt.stable_chars,
                )
                run = RunInfo(record.run_id, record.session_key, record.agent)
                request = await self.hooks.before_model_call(run, request, record.iterations)
                response = await call_model(request, events, reply, model, control)
                record.model = f"{model.provider}:{model.model}"
                if compaction is not None:
                    compaction.observe(response.usage)
                if self.accounting is not None:
                    await self.accounting.add(record, record.model, response.usage)
                record.input_tokens += response.usage.input_tokens
                record.output_tokens += response.usage.output_tokens
                record.messages.append({"role": "assistant", "content": response.content})
                record.stop_reason = response.stop_reason
                uses = [b for b in response.content if b.get("type") == "tool_use"]
                if not uses:
                    break
        except ModelError as exc:
            record.status = "error"
            record.error = exc.message
            text = f"Sorry, the model call failed: {exc.message}"
            await events.emit("error", "error", text=exc.message)
            await stream_text(text, events, reply)
            record.messages.append(text_message("assistant", text))

    async def _user_turn(self, items: list[PendingItem]) -> dict[str, Any]:
        """The user turn of ``items``, their attachments as image blocks or transcripts."""
        attachments: list[list[dict[str, Any]]] = []
        for p in items:
            refs = list(p.item.message.media)
            if not refs:
                attachments.append([])
            elif self.media is None:
                attachments.append([note("[an attachment was sent; media is not configured]")])
            else:
                attachments.append(await self.media.blocks(refs))
        return user_turn(items, attachments)
