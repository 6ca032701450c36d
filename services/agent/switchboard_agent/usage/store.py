"""Token and cost usage: one row per model call in ``agent.usage`` (run, session, agent, UTC
day, model), written right after the call where a budget reads stored usage (so it sees it at
once on every replica), else with the run's commit (usage/writer.py, runs/commit.py), and summed
per run, session, agent and day for ``Sessions.Usage`` and the budget checks.

Cost = the provider's usage fields x ``SB_PRICES`` (US dollars per million input/output tokens,
keyed ``provider:model`` or the bare model name); a model without a price costs 0 and counts in
``sb_llm_unpriced_calls_total``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date

import asyncpg
from pydantic import BaseModel, ConfigDict, Field

from ..providers.base import Usage

__all__ = ["CallUsage", "Price", "Totals", "UsageRow", "UsageStore", "cost_usd", "price_for"]


class Price(BaseModel):
    """US dollars per million tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0)
    output: float = Field(ge=0)


def price_for(prices: Mapping[str, Price], ref: str) -> Price | None:
    """The price of ``provider:model``: its own entry, else the bare model name's."""
    return prices.get(ref) or prices.get(ref.partition(":")[2])


def cost_usd(price: Price | None, usage: Usage) -> float:
    if price is None:
        return 0.0
    return (usage.input_tokens * price.input + usage.output_tokens * price.output) / 1_000_000


@dataclass(frozen=True)
class Totals:
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    calls: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class UsageRow:
    """A report's row: the totals of one agent, day and model."""

    agent: str
    day: date
    model: str
    totals: Totals


def _totals(row: asyncpg.Record | None, prefix: str = "") -> Totals:
    if row is None:
        return Totals()
    return Totals(
        int(row[f"{prefix}input"] or 0),
        int(row[f"{prefix}output"] or 0),
        float(row[f"{prefix}cost"] or 0.0),
        int(row[f"{prefix}calls"] or 0),
    )


_SUMS = (
    "coalesce(sum(input_tokens), 0) AS input, coalesce(sum(output_tokens), 0) AS output,"
    " coalesce(sum(cost_usd), 0) AS cost, count(*) AS calls"
)
_FILTER = (
    " WHERE ($1 = '' OR agent = $1) AND ($2::date IS NULL OR day = $2)"
    " AND ($3 = '' OR session_key = $3) AND ($4 = '' OR run_id = $4)"
)
_TODAY = "(now() AT TIME ZONE 'UTC')::date"  # the database's clock, as the day column's default
# A session's usage is its conversation's: the root session and all its sub-agents (the
# generated column root_key, migration 6), so a child's calls count toward its parent's budget.
_ROOT = "root_key = split_part($1, ':sub:', 1)"
_SPENT = (
    "SELECT"
    f" coalesce(sum(input_tokens + output_tokens) FILTER (WHERE {_ROOT}), 0) AS st,"
    f" coalesce(sum(cost_usd) FILTER (WHERE {_ROOT}), 0) AS sc,"
    f" coalesce(sum(input_tokens + output_tokens) FILTER (WHERE agent = $2 AND day = {_TODAY}),"
    f" 0) AS at, coalesce(sum(cost_usd) FILTER (WHERE agent = $2 AND day = {_TODAY}), 0) AS ac"
    f" FROM agent.usage WHERE {_ROOT} OR (agent = $2 AND day = {_TODAY})"
)


@dataclass(frozen=True)
class Spent:
    """What a session used in all, and what its agent used today (UTC)."""

    session_tokens: int
    session_usd: float
    agent_day_tokens: int
    agent_day_usd: float


@dataclass(frozen=True)
class CallUsage:
    """One model call's usage, as recorded."""

    run_id: str
    session_key: str
    agent: str
    model: str  # provider:model that answered
    input_tokens: int
    output_tokens: int
    cost_usd: float


class UsageStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def add_many(self, calls: Sequence[CallUsage]) -> None:
        """Record calls in one round trip and transaction (usage/writer.py), in their order."""
        await self.pool.executemany(
            "INSERT INTO agent.usage (run_id, session_key, agent, model, input_tokens,"
            " output_tokens, cost_usd) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            [
                (c.run_id, c.session_key, c.agent, c.model, c.input_tokens, c.output_tokens,
                 c.cost_usd)
                for c in calls
            ],
        )  # fmt: skip

    async def add(
        self, run_id: str, session_key: str, agent: str, model: str, usage: Usage, cost: float
    ) -> None:
        await self.add_many(
            [
                CallUsage(
                    run_id,
                    session_key,
                    agent,
                    model,
                    usage.input_tokens,
                    usage.output_tokens,
                    cost,
                )
            ]
        )

    async def spent(self, session_key: str, agent: str) -> Spent:
        """The session's usage in all (with its root's and every sub-agent's of that root) and
        its agent's today (UTC, by the database's clock)."""
        row = await self.pool.fetchrow(_SPENT, session_key, agent)
        return Spent(int(row["st"]), float(row["sc"]), int(row["at"]), float(row["ac"]))

    async def report(
        self, agent: str = "", day: date | None = None, session_key: str = "", run_id: str = ""
    ) -> tuple[Totals, list[UsageRow]]:
        """The total and the rows per (agent, day, model) of the calls that match."""
        async with self.pool.acquire() as conn:
            args = (agent, day, session_key, run_id)
            total = await conn.fetchrow(f"SELECT {_SUMS} FROM agent.usage{_FILTER}", *args)
            rows = await conn.fetch(
                f"SELECT agent, day, model, {_SUMS} FROM agent.usage{_FILTER}"
                " GROUP BY agent, day, model ORDER BY day DESC, agent, model LIMIT 1000",
                *args,
            )
        return _totals(total), [
            UsageRow(r["agent"], r["day"], r["model"], _totals(r)) for r in rows
        ]

    async def by_session(self, keys: Sequence[str]) -> dict[str, Totals]:
        rows = await self.pool.fetch(
            f"SELECT session_key, {_SUMS} FROM agent.usage WHERE session_key = ANY($1::text[])"
            " GROUP BY session_key",
            list(keys),
        )
        return {r["session_key"]: _totals(r) for r in rows}
