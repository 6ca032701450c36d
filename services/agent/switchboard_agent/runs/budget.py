"""Budgets: limits checked before each model call, and the usage recorded after it.

``SB_BUDGET`` (JSON; every key optional)::

    {"session_tokens": 20000,       # a session's input + output tokens, in all
     "session_usd": 1.0,            # a session's cost, in all
     "agent_daily_tokens": 500000,  # an agent's tokens per UTC day
     "agent_daily_usd": 5,          # an agent's cost per UTC day
     "run_tokens": 50000,           # one run (one answer, all its model calls)
     "run_iterations": 6,           # model calls of one run
     "agents": {"main": {...}}}     # per-agent limits, replacing the ones above for that agent

(``max_tokens_per_session`` is accepted for ``session_tokens``.) A limit is reached when the
usage so far is at or over it; the check runs before every model call, so one call may overshoot
a limit by its own size, and the next one is refused. The refusal is the run's reply: which
limit, the usage, and how to raise it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from switchboard.settings import Settings

from ..metrics import BUDGET_STOPS, LLM_COST, LLM_UNPRICED
from ..providers.base import Usage
from ..sessions.store import RunRecord
from ..usage.store import CallUsage, Price, UsageStore, cost_usd, price_for
from ..usage.writer import UsageWriter

__all__ = ["Accounting", "Budget", "BudgetSettings", "BudgetStop"]
log = logging.getLogger(__name__)


class Limits(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    session_tokens: int | None = Field(
        default=None,
        ge=1,
        validation_alias=AliasChoices("session_tokens", "max_tokens_per_session"),
    )
    session_usd: float | None = Field(default=None, gt=0)
    agent_daily_tokens: int | None = Field(default=None, ge=1)
    agent_daily_usd: float | None = Field(default=None, gt=0)
    run_tokens: int | None = Field(default=None, ge=1)
    run_iterations: int | None = Field(default=None, ge=1)

    @property
    def needs_database(self) -> bool:
        return any(
            v is not None
            for v in (
                self.session_tokens,
                self.session_usd,
                self.agent_daily_tokens,
                self.agent_daily_usd,
            )
        )


class Budget(Limits):
    agents: dict[str, Limits] = Field(default_factory=dict)

    def for_agent(self, agent: str) -> Limits:
        return self.agents.get(agent, self)


class BudgetSettings(Settings):
    # JSON limits, each optional: session_tokens, session_usd, agent_daily_tokens, agent_daily_usd
    # (UTC day), run_tokens, run_iterations, and agents: {"<agent>": {...}} for one agent.
    budget: Budget | None = None
    # {"provider:model" | "model": {"input": usd, "output": usd}} per million tokens.
    prices: dict[str, Price] = Field(default_factory=dict)


@dataclass(frozen=True)
class BudgetStop:
    limit: str  # the SB_BUDGET key
    message: str  # the run's reply


def _tokens(n: float) -> str:
    return f"{int(n):,} tokens"


def _usd(n: float) -> str:
    return f"${n:,.2f}"


def _stop(limit: str, what: str, used: str, cap: str, then: str) -> BudgetStop:
    return BudgetStop(
        limit,
        f"Budget limit reached: {what} has used {used} of its {cap} "
        f"(SB_BUDGET {limit}), so I stopped before calling the model again. {then}",
    )


_RAISE = "To go on, an operator can raise {limit} in SB_BUDGET and restart the agent"


class Accounting:
    """Records each call's usage and cost; refuses the next call once a limit is reached.

    A call's usage row is written in the background (usage/writer.py: off the turn's critical
    path, the next model call or the commit does not wait for it); a budget check first waits
    for the session's pending writes, so a session's own usage is always counted, while
    another session of the same agent may see it a few milliseconds late."""

    def __init__(
        self, usage: UsageStore, budget: Budget | None, prices: Mapping[str, Price]
    ) -> None:
        self.usage = usage
        self.budget = budget
        self.prices = prices
        self.writer = UsageWriter(usage)
        self._pending: dict[str, asyncio.Future[None]] = {}  # per session: its last write

    async def close(self) -> None:
        """Write the usage still queued."""
        await self.writer.close()

    async def check(self, record: RunRecord) -> BudgetStop | None:
        """The limit that stops the run's next model call, or None."""
        if self.budget is None:
            return None
        limits = self.budget.for_agent(record.agent)
        stop = self._run_stop(limits, record)
        if stop is None and limits.needs_database:
            await self.settled(record.session_key)
            stop = await self._stored_stop(limits, record)
        if stop is not None:
            BUDGET_STOPS.labels(stop.limit, record.agent).inc()
            log.warning("budget limit reached: %s", stop.limit, extra={"run_id": record.run_id})
        return stop

    def _run_stop(self, limits: Limits, record: RunRecord) -> BudgetStop | None:
        done = record.iterations  # model calls made so far (the check precedes the next)
        if limits.run_iterations is not None and done >= limits.run_iterations:
            return _stop(
                "run_iterations",
                "this answer",
                f"{done} model calls",
                f"{limits.run_iterations}",
                _RAISE.format(limit="run_iterations") + ".",
            )
        used = record.input_tokens + record.output_tokens
        if limits.run_tokens is not None and used >= limits.run_tokens:
            return _stop(
                "run_tokens",
                "this answer",
                _tokens(used),
                _tokens(limits.run_tokens),
                _RAISE.format(limit="run_tokens") + ".",
            )
        return None

    async def _stored_stop(self, limits: Limits, record: RunRecord) -> BudgetStop | None:
        spent = await self.usage.spent(record.session_key, record.agent)
        new_session = "; or start a new conversation (a new session has its own budget)."
        daily = "; the daily budget starts over at midnight UTC."
        checks: list[tuple[str, float | None, float, str, str, str]] = [
            ("session_tokens", limits.session_tokens, spent.session_tokens, "this conversation",
             "t", new_session),
            ("session_usd", limits.session_usd, spent.session_usd, "this conversation", "$",
             new_session),
            ("agent_daily_tokens", limits.agent_daily_tokens, spent.agent_day_tokens,
             f"agent {record.agent!r} today", "t", daily),
            ("agent_daily_usd", limits.agent_daily_usd, spent.agent_day_usd,
             f"agent {record.agent!r} today", "$", daily),
        ]  # fmt: skip
        for limit, cap, used, what, unit, then in checks:
            if cap is not None and used >= cap:
                show = _tokens if unit == "t" else _usd
                return _stop(limit, what, show(used), show(cap), _RAISE.format(limit=limit) + then)
        return None

    async def add(self, record: RunRecord, model: str, usage: Usage) -> None:
        """Record one call's usage (``model`` = ``provider:model`` that answered)."""
        price = price_for(self.prices, model)
        cost = cost_usd(price, usage)
        if price is None:
            LLM_UNPRICED.labels(model).inc()
        else:
            LLM_COST.labels(model, record.agent).inc(cost)
        key = record.session_key
        written = self.writer.add(
            CallUsage(
                record.run_id,
                key,
                record.agent,
                model,
                usage.input_tokens,
                usage.output_tokens,
                cost,
            )
        )
        self._pending[key] = written
        written.add_done_callback(lambda f: self._done(key, f))

    async def settled(self, session_key: str) -> None:
        """Wait for the session's usage writes (a failed one was logged and counted)."""
        task = self._pending.get(session_key)
        if task is not None:
            await asyncio.wait([task])

    def _done(self, key: str, written: asyncio.Future[None]) -> None:
        if self._pending.get(key) is written:
            del self._pending[key]
