"""Compaction with a memory flush (docs/compaction.md: memory that survives compaction).

When a request would fill ``SB_COMPACTION_THRESHOLD`` of the model's context window
(compaction/config.py; the size from context_view.ContextMeter), when the provider says the
context is too long, or on demand (``Sessions.Compact``), a session's older turns are
compacted:

1. **flush** (compaction/memory_flush.py): one model call with the older turns and ``memory_store``,
   asked to store the durable facts; its calls pass the tool gate (policy applies);
2. **summary**: one model call summarising the older turns (and the previous summary);
3. the summary is stored as a compaction of the transcript up to its last older message
   (sessions/compactions.py); the history loader returns it first, then the kept tail: the last
   ``SB_COMPACTION_KEEP_TURNS`` user turns (fewer when they alone fill 40% of the window;
   none on an overflow). The compacted messages stay in the database.

Each compaction is a ``lifecycle``/``compaction`` event, a log line and
``sb_agent_compactions_total{reason}`` (threshold | overflow | manual); its model calls count
in the usage and budgets. A compaction that fails (the model errs, the conversation was reset
meanwhile) changes nothing and never fails the run. Tool results older than
``SB_PRUNE_TOOL_RESULTS_AFTER`` user turns are pruned from every request, compacted or not.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from nats.aio.client import Client as NATS
from opentelemetry import trace
from opentelemetry.trace import SpanKind

from switchboard import bus
from switchboard.sessions import session_token
from switchboard.toolspec import ToolSpec
from switchboard.trust import Standing
from switchboard.v1 import messages_pb2

from ..approvals.toolgate import ToolRules
from ..memory.scope import ScopeMode, reads_memory_files
from ..metrics import COMPACTIONS, FLUSHED_FACTS, LLM_TOKENS
from ..outbound.events import RunEvents
from ..providers.base import Model, ModelRequest, ModelResponse, Usage
from ..providers.errors import ModelError
from ..providers.failover import ModelRouter, RoutedModel
from ..providers.genai import describe_request, describe_response
from ..providers.overflow import compact_for_retry
from ..runs.budget import Accounting
from ..runs.turn import Turn, text_message
from ..sessions.compactions import Compaction, CompactionStore, summary_message
from ..sessions.models import SessionModels
from ..sessions.standing import session_standing
from ..sessions.store import Message, RunRecord
from ..tools.local import LocalContext, LocalTools
from ..tools.policy import Policy
from .config import CompactionSettings
from .context_view import (
    ContextMeter,
    choose_cut,
    message_chars,
    prune_tool_results,
    render,
    request_chars,
)
from .memory_flush import STORE, FlushResult, MemoryFileStore, flush_request, store_facts

__all__ = ["Compactor", "Outcome", "RunCompaction"]
log = logging.getLogger(__name__)
tracer = trace.get_tracer("switchboard.agent")

TAIL_SHARE = 0.4  # of the window the kept turns may fill
RENDER_SHARE = 0.5  # of the window the older turns may fill in the flush and summary calls
SUMMARY_SYSTEM = (
    "Summarise the conversation below for your own later use: the summary replaces these "
    "turns in your context, so keep what is needed to go on: the user's goals and requests, "
    "facts and preferences they stated (names, numbers and dates exactly), decisions and "
    "why, what tools did and found, open questions and tasks. If it starts with an earlier "
    "summary, fold that in. At most about 300 words, plain text, no preamble."
)


@dataclass(frozen=True)
class Outcome:
    compacted: bool
    note: str = ""  # why nothing was compacted
    messages: int = 0  # messages the summary replaced
    summary: str = ""
    flush: FlushResult = field(default_factory=FlushResult)
    tokens_before: int = 0  # the transcript, estimated
    tokens_after: int = 0
    view: list[Message] = field(default_factory=list)  # the transcript the model sees now


@dataclass
class Job:
    """One compaction: whose, with which model, why, and where its usage and event go."""

    session_key: str
    agent: str
    model: Model
    policy: Policy
    reason: str  # threshold | overflow | manual
    keep_turns: int  # 0: everything
    events: RunEvents
    record: RunRecord  # the run its model calls count in
    origin: messages_pb2.LaneItem = field(default_factory=messages_pb2.LaneItem)
    standing: Standing = Standing.PERSONAL  # the run's: where the flush stores facts


class Compactor:
    def __init__(
        self,
        settings: CompactionSettings,
        store: CompactionStore,
        rules: ToolRules,
        local: LocalTools,
        scope: ScopeMode,
        workspace_root: Path,
        zone: Callable[[str], ZoneInfo],
        max_tokens: int,
        accounting: Accounting | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.rules = rules
        self.local = local
        self.scope = scope
        self.files = LocalTools([MemoryFileStore(workspace_root, zone)])
        self.max_tokens = max_tokens
        self.accounting = accounting
        self.meter = ContextMeter()
        self._busy: set[str] = set()

    def begin(
        self, turn: Turn, model: Model, history: list[Message], system: str, specs: list[ToolSpec]
    ) -> RunCompaction:
        """The compaction state of one run. A context overflow of ``model`` (the agent's
        chain) compacts the session for real before its one retry."""
        run = RunCompaction(self, turn, model, history, system, specs)
        if isinstance(model, RoutedModel):
            model.on_overflow = run.on_overflow
        return run

    async def compact(self, job: Job) -> Outcome:
        key = job.session_key
        if key in self._busy:
            return Outcome(False, "a compaction of this conversation is already running")
        self._busy.add(key)
        try:
            return await self._compact(job)
        except ModelError as exc:
            log.warning("compaction failed: %s", exc.message, extra={"session": key})
            return Outcome(False, "the model call for the summary failed; try again later")
        finally:
            self._busy.discard(key)

    async def _compact(self, job: Job) -> Outcome:
        live = await self.store.live(job.session_key)
        if live is None:
            return Outcome(False, "there is no such conversation")
        window = self.settings.window_of(f"{job.model.provider}:{job.model.model}")
        cut = choose_cut(live.messages, job.keep_turns, int(window * 4 * TAIL_SHARE))
        if cut == 0:
            return Outcome(False, "nothing is older than the turns kept")
        older = live.messages[:cut]
        limit = int(window * 4 * RENDER_SHARE)
        flushed = FlushResult()
        if self.settings.compaction_flush:
            flushed = await self._flush(job, render(older, limit))
        head = [summary_message(live.summary)] if live.summary else []
        summary = (await self._summarise(job, render(head + older, limit))).strip()
        if not summary:
            return Outcome(False, "the model gave no summary", flush=flushed)
        view = [summary_message(summary), *live.messages[cut:]]
        before = request_chars("", live.view(), []) // 4
        after = request_chars("", view, []) // 4
        saved = await self.store.save(
            Compaction(
                job.session_key,
                live.epoch,
                live.ids[cut - 1],
                summary,
                job.reason,
                cut,
                before,
                after,
                flushed.stored,
            )
        )
        if not saved:
            return Outcome(False, "the conversation was reset meanwhile", flush=flushed)
        outcome = Outcome(True, "", cut, summary, flushed, before, after, view)
        COMPACTIONS.labels(job.reason).inc()
        data = {
            "reason": job.reason,
            "messages": cut,
            "kept": len(live.messages) - cut,
            "tokens_before": before,
            "tokens_after": after,
            "window": window,
            "facts_flushed": flushed.stored,
            "flushed_to": flushed.to,
        }
        log.info("transcript compacted", extra={"session": job.session_key, **data})
        await job.events.emit("lifecycle", "compaction", data=data)
        return outcome

    def _store_tools(self, job: Job) -> tuple[LocalTools | None, str]:
        """Where the flush stores facts: the memory service (in the scope of the run's
        standing), else the agent's memory files (only from the owner's standing, whose scope
        they are in), else nowhere: a session of anyone else never writes the agent's files."""
        if STORE in self.local:
            return self.local, "memory"
        if reads_memory_files(job.session_key, self.scope, job.standing):
            return self.files, "file"
        return None, "none"

    async def _flush(self, job: Job, rendered: str) -> FlushResult:
        tools, to = self._store_tools(job)
        if tools is None:
            return FlushResult()
        # Judged by the groups of the store the facts go to (the memory service's memory_store
        # or the memory files'), which the run may not have been offered.
        policy = job.policy.knowing(tools.specs())
        if not policy.allows(STORE).allowed:
            return FlushResult()
        request = flush_request(rendered, min(self.max_tokens, 2048))
        response = await self._complete(job, request, "flush")
        ctx = LocalContext(job.record.run_id, job.session_key, job.agent, job.origin, job.standing)
        stored, refused = await store_facts(response.tool_uses, tools, self.rules, ctx, policy)
        if stored:
            FLUSHED_FACTS.labels(to).inc(stored)
        return FlushResult(stored, refused, to if stored else "none")

    async def _summarise(self, job: Job, rendered: str) -> str:
        request = ModelRequest(
            system=SUMMARY_SYSTEM,
            messages=[text_message("user", f"The conversation to summarise:\n\n{rendered}")],
            max_tokens=min(self.max_tokens, 1024),
        )
        return (await self._complete(job, request, "summary")).text

    async def _complete(self, job: Job, request: ModelRequest, step: str) -> ModelResponse:
        """One compaction call (nothing of it streams to the user); its usage is counted."""
        model = job.model
        with tracer.start_as_current_span("llm.call", kind=SpanKind.CLIENT) as span:
            describe_request(span, model, request)
            span.set_attribute("sb.compaction.step", step)
            response: ModelResponse | None = None
            async for item in model.stream(request):
                if isinstance(item, ModelResponse):
                    response = item
            if response is None:
                raise ModelError("the model stream ended without a response")
            describe_response(span, response)
        usage: Usage = response.usage
        LLM_TOKENS.labels(model.provider, model.model, "input").inc(usage.input_tokens)
        LLM_TOKENS.labels(model.provider, model.model, "output").inc(usage.output_tokens)
        job.record.input_tokens += usage.input_tokens
        job.record.output_tokens += usage.output_tokens
        if self.accounting is not None:
            await self.accounting.add(job.record, f"{model.provider}:{model.model}", usage)
        return response

    async def compact_now(
        self,
        session_key: str,
        keep_turns: int,
        models: SessionModels,
        nc: NATS,
        subjects: bus.Subjects,
    ) -> Outcome | None:
        """Sessions.Compact: compact the session now (None: there is no such session)."""
        live = await self.store.live(session_key)
        if live is None:
            return None
        run_id = f"compact_{uuid.uuid4().hex}"
        subject = subjects.events(session_token(session_key))
        events = RunEvents(nc, subject, run_id, session_key, "", [])
        model = await models.get(live.model)
        if model is None:
            return Outcome(False, "no model is configured")
        if isinstance(model, ModelRouter):
            model = model.bind(live.agent, events)
        record = RunRecord(run_id, session_key, live.agent, "", 0, datetime.now(UTC))
        # No run's standing here: the one the session gives what is not its own person's.
        standing = session_standing(session_key, live.root_standing)
        policy = self.rules.policy(live.agent, session_key, live.tool_policy, standing=standing)
        keep = keep_turns or self.settings.compaction_keep_turns
        job = Job(session_key, live.agent, model, policy, "manual", keep, events, record)
        job.standing = standing
        return await self.compact(job)


class RunCompaction:
    """One run's view of its transcript: pruned, measured, compacted when it must be."""

    def __init__(
        self,
        compactor: Compactor,
        turn: Turn,
        model: Model,
        history: list[Message],
        system: str,
        specs: list[ToolSpec],
    ) -> None:
        self.compactor = compactor
        self.turn = turn
        self.model = model
        self.history = history
        self.fixed = request_chars(system, [], specs)  # the same for every call of the run
        self.chars = 0
        self.tried = False  # at most one threshold compaction per run

    def _job(self, reason: str, keep_turns: int) -> Job:
        r = self.turn.record
        return Job(
            r.session_key,
            r.agent,
            self.model,
            self.turn.policy,
            reason,
            keep_turns,
            self.turn.events,
            r,
            self.turn.origin,
            self.turn.standing,
        )

    def _view(self) -> list[Message]:
        keep = self.compactor.settings.prune_tool_results_after
        view = prune_tool_results(self.history + self.turn.record.messages, keep)
        self.chars = self.fixed + sum(message_chars(m) for m in view)
        return view

    async def messages(self) -> list[Message]:
        """The messages of the run's next request; compacts first when they would fill the
        threshold of the model's window."""
        settings = self.compactor.settings
        view = self._view()
        if not settings.compaction or self.tried:
            return view
        key = self.turn.record.session_key
        window = settings.window_of(f"{self.model.provider}:{self.model.model}")
        if self.compactor.meter.estimate(key, self.chars) < settings.compaction_threshold * window:
            return view
        self.tried = True
        outcome = await self.compactor.compact(
            self._job("threshold", settings.compaction_keep_turns)
        )
        if not outcome.compacted:
            log.info("no compaction: %s", outcome.note, extra={"session": key})
            return view
        self.history = outcome.view
        return self._view()

    def observe(self, usage: Usage) -> None:
        """The provider's count of the request just made: the base of the next estimate."""
        self.compactor.meter.observe(self.turn.record.session_key, self.chars, usage.input_tokens)

    async def on_overflow(self, request: ModelRequest) -> ModelRequest:
        """The provider said the context is too long: compact every turn before this run,
        then retry once; the recent tail only (providers/overflow.py) when there is nothing to
        compact or the compaction fails."""
        if not self.compactor.settings.compaction:
            return compact_for_retry(request)
        outcome = await self.compactor.compact(self._job("overflow", 0))
        if not outcome.compacted:
            log.info("overflow without compaction: %s", outcome.note)
            return compact_for_retry(request)
        self.history = outcome.view
        return replace(request, messages=self._view())
