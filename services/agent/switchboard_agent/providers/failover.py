"""Model failover: one model call tried along the agent's chain of models and auth profiles.

- 401/403: the profile rests ``auth_cooldown_s``; the next profile of the provider is tried
  (then the next model, when every profile of this one rests).
- 429, 5xx, 529 overloaded, timeouts: the model rests for the provider's ``retry-after`` (or
  ``cooldown_s``) and the next model of the chain answers at once. The resting model is not
  called again before its retry-after; when every model rests, the call waits for the first
  one to wake if that is at most ``max_wait_s`` away, and fails with the provider's message
  otherwise (a 429 saying "retry in 3 days" never parks a run).
- A failure moves the run on even when its rest is over at once (``Retry-After: 0``, a
  retry-after shorter than a call, ``cooldown_s`` 0): a model or profile that failed in this run
  is called again only once every other one not resting has been tried, the one that failed
  longest ago first. Otherwise the primary, free again at once, would take every attempt.
- Context overflow: the request is shrunk once (``RoutedModel.on_overflow``: a run compacts its
  session for real, compaction/compactor.py; else :func:`.overflow.compact_for_retry`) and tried
  again on the same model.
- Nothing fails over once text has streamed to the user (it cannot be taken back).

Each failover is a ``lifecycle``/``failover`` agent event, an ``sb.failover.*`` attribute and
span event on the ``llm.call`` span, a log line and ``sb_agent_failovers_total{from,to,reason}``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from opentelemetry import trace

from ..metrics import FAILOVERS
from ..outbound.events import RunEvents
from .base import Model, ModelRequest, ModelResponse, TextDelta
from .chain import ModelChain
from .errors import (
    ModelAuthError,
    ModelContextOverflowError,
    ModelError,
    ModelRateLimitError,
    ModelUnavailableError,
)
from .overflow import compact_for_retry
from .plugin import PluginProvider
from .profiles import AuthProfile, Cooldowns
from .select import ModelConfig, build_model

__all__ = ["Failover", "ModelRouter", "RouterTuning", "failover_reason"]
log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]
Shrink = Callable[[ModelRequest], Awaitable[ModelRequest]]


async def tail_only(request: ModelRequest) -> ModelRequest:
    return compact_for_retry(request)


@dataclass(frozen=True)
class RouterTuning:
    sdk_retries: int = 0
    timeout_s: float = 120.0
    cooldown_s: float = 5.0
    auth_cooldown_s: float = 3600.0
    max_wait_s: float = 30.0
    max_attempts: int = 6


@dataclass(frozen=True)
class Failover:
    """One move from a failed (model, profile) to the next one tried."""

    from_ref: str
    to_ref: str
    reason: str  # auth | rate_limit | overloaded | unavailable | context_overflow
    from_profile: str
    to_profile: str
    status: int | None
    retry_after_s: float | None
    waited_s: float

    def data(self) -> dict[str, object]:
        return {
            "from": self.from_ref,
            "to": self.to_ref,
            "reason": self.reason,
            "from_profile": self.from_profile,
            "to_profile": self.to_profile,
            "status": self.status,
            "retry_after_s": self.retry_after_s,
            "waited_s": round(self.waited_s, 3),
        }


def failover_reason(exc: ModelError) -> str | None:
    """Why ``exc`` moves the call on; None when it does not (a bad request stays an error)."""
    if isinstance(exc, ModelAuthError):
        return "auth"
    if isinstance(exc, ModelRateLimitError):
        return "rate_limit"
    if isinstance(exc, ModelUnavailableError):
        return "overloaded" if exc.status_code in (503, 529) else "unavailable"
    if isinstance(exc, ModelContextOverflowError):
        return "context_overflow"
    return None


class ModelRouter:
    """The agents' model chains behind one object; also a :class:`Model` (the default chain,
    without events) for callers that have no run, such as the ``image`` tool."""

    def __init__(
        self,
        chain: ModelChain,
        profiles: Mapping[str, Sequence[AuthProfile]],
        tuning: RouterTuning,
        cooldowns: Cooldowns,
        sleep: Sleep = asyncio.sleep,
        plugins: Mapping[str, PluginProvider] | None = None,
    ) -> None:
        self.chain = chain
        self.plugins = dict(plugins or {})  # provider name -> a plugin's provider
        # Plugin models whose factory failed at start: plugin -> why (for /readyz).
        self.unbuilt: dict[str, str] = {}
        self.profiles = profiles
        self.tuning = tuning
        self.cooldowns = cooldowns
        self.sleep = sleep
        self._models: dict[tuple[str, str], Model] = {}
        first = chain.default[0]
        self.provider, _, self.model = first.partition(":")

    def warm(self) -> None:
        """Build the plugins' models now (run it off the event loop): one that cannot be built
        is noted in ``unbuilt`` (for /readyz); its calls fail over. The SDK clients (anthropic,
        openai) are built on first use instead (:meth:`ainstance`): importing an SDK costs
        12-40 MiB and up to a second of start-up, which an idle agent need not pay."""
        refs = {r for c in [self.chain.default, *self.chain.per_agent.values()] for r in c}
        for ref in sorted(refs):
            if ref.partition(":")[0] not in self.plugins:
                continue
            for profile in self.profiles[ref.partition(":")[0]]:
                try:
                    self.instance(ref, profile)
                except ModelError as exc:
                    plugin = self.plugins[ref.partition(":")[0]].plugin
                    self.unbuilt[plugin] = exc.message

    async def ainstance(self, ref: str, profile: AuthProfile) -> Model:
        """:meth:`instance`; a first build (an SDK's import) runs in a thread, so the event
        loop keeps serving the other runs meanwhile."""
        model = self._models.get((ref, profile.name))
        if model is None:
            model = await asyncio.to_thread(self.instance, ref, profile)
        return model

    def instance(self, ref: str, profile: AuthProfile) -> Model:
        key = (ref, profile.name)
        model = self._models.get(key)
        if model is None:
            provider, _, name = ref.partition(":")
            plugin = self.plugins.get(provider)
            if plugin is not None:
                # ModelUnavailableError: this call fails over.
                model = plugin.build(name, self.tuning.timeout_s)
            else:
                config = ModelConfig(provider, name, profile.api_key, profile.base_url)
                model = build_model(
                    config, timeout_s=self.tuning.timeout_s, max_retries=self.tuning.sdk_retries
                )
            self._models[key] = model
        return model

    def primary(self, agent: str) -> str:
        return self.chain.refs(agent)[0]

    def bind(self, agent: str, events: RunEvents | None = None) -> RoutedModel:
        return RoutedModel(self, self.chain.refs(agent), events)

    def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | ModelResponse]:
        return self.bind("").stream(request)

    def pick(
        self,
        refs: Sequence[str],
        failed: Mapping[str, int] | None = None,
        tried: Collection[tuple[str, str]] = (),
    ) -> tuple[str, AuthProfile] | None:
        """The (model, profile) to call next: of those not resting, the first in chain order
        that has not failed in this run; else the one whose last failure is oldest, a pair not
        called yet first (a refused key fails for every model of its provider).

        ``failed`` maps the cooldown keys (``model:<ref>``, ``profile:<provider/name>``) of the
        run's failures to when they failed (a number that grows); ``tried``: the (ref, profile
        key) pairs whose call failed."""
        failed = failed or {}
        best: tuple[tuple[int, bool], str, AuthProfile] | None = None
        for ref in refs:
            if self.cooldowns.remaining(f"model:{ref}") > 0:
                continue
            for profile in self.profiles[ref.partition(":")[0]]:
                if self.cooldowns.remaining(f"profile:{profile.key}") > 0:
                    continue
                last = max(failed.get(f"model:{ref}", 0), failed.get(f"profile:{profile.key}", 0))
                if last == 0:
                    return ref, profile
                rank = (last, (ref, profile.key) in tried)
                if best is None or rank < best[0]:
                    best = (rank, ref, profile)
        return None if best is None else (best[1], best[2])

    def next_free_s(self, refs: Sequence[str]) -> float:
        """Seconds until some (model, profile) of the chain stops resting."""
        waits = []
        for ref in refs:
            model_wait = self.cooldowns.remaining(f"model:{ref}")
            profiles = self.profiles[ref.partition(":")[0]]
            profile_wait = min(self.cooldowns.remaining(f"profile:{p.key}") for p in profiles)
            waits.append(max(model_wait, profile_wait))
        return min(waits)

    def rest(self, ref: str, profile: AuthProfile, exc: ModelError) -> str | None:
        """Rest what ``exc`` says failed; its cooldown key (None: nothing rests)."""
        if isinstance(exc, ModelAuthError):
            key = f"profile:{profile.key}"
            self.cooldowns.cool(key, self.tuning.auth_cooldown_s)
            return key
        if isinstance(exc, ModelRateLimitError | ModelUnavailableError):
            after = exc.retry_after_s
            key = f"model:{ref}"
            self.cooldowns.cool(key, self.tuning.cooldown_s if after is None else after)
            return key
        return None


class RoutedModel:
    """One agent's chain as a :class:`Model`; ``provider``/``model`` name the model that
    answered last (the primary until then). A run binds one and makes all its model calls
    through it, so a model that failed in the run yields to the others for the rest of it."""

    def __init__(self, router: ModelRouter, refs: Sequence[str], events: RunEvents | None):
        self.router = router
        self.refs = refs
        self.events = events
        self.ref = refs[0]
        self.provider, _, self.model = self.ref.partition(":")
        self.failovers: list[Failover] = []
        # The run's failures: cooldown key ("model:<ref>", "profile:<key>") -> failure number.
        self.failed: dict[str, int] = {}
        self.tried: set[tuple[str, str]] = set()
        self._failures = 0
        # What a context overflow does to the request before its one retry.
        self.on_overflow: Shrink = tail_only

    async def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | ModelResponse]:
        router, tuning = self.router, self.router.tuning
        failed: tuple[str, AuthProfile, ModelError] | None = None
        shrunk = False
        for _ in range(tuning.max_attempts):
            waited = 0.0
            pick = router.pick(self.refs, self.failed, self.tried)
            while pick is None:
                # Wait until a model is free, up to max_wait_s in all: another run's failure
                # may extend the rest while this one sleeps (it gave up then, though the model
                # was free again a moment later: the fault campaign caught it).
                left = max(router.next_free_s(self.refs), 0.001)
                if waited + left > tuning.max_wait_s:
                    raise _exhausted(failed[2] if failed else None, left)
                await router.sleep(left)
                waited += left
                pick = router.pick(self.refs, self.failed, self.tried)
            ref, profile = pick
            if failed is not None:
                await self._moved(failed, ref, profile, waited)
            streamed = False
            try:
                model = await router.ainstance(ref, profile)
                self.ref, self.provider, self.model = ref, model.provider, model.model
                async for item in model.stream(request):
                    streamed = streamed or isinstance(item, TextDelta)
                    yield item
                return
            except ModelError as exc:
                reason = failover_reason(exc)
                if streamed or reason is None or (reason == "context_overflow" and shrunk):
                    raise
                if reason == "context_overflow":
                    shrunk = True
                    request = await self.on_overflow(request)
                rested = router.rest(ref, profile, exc)
                if rested is not None:
                    self._failures += 1
                    self.failed[rested] = self._failures
                    self.tried.add((ref, profile.key))
                failed = (ref, profile, exc)
        assert failed is not None
        raise failed[2]

    async def _moved(
        self,
        failed: tuple[str, AuthProfile, ModelError],
        ref: str,
        profile: AuthProfile,
        waited: float,
    ) -> None:
        from_ref, from_profile, exc = failed
        move = Failover(
            from_ref,
            ref,
            failover_reason(exc) or "error",
            from_profile.name,
            profile.name,
            exc.status_code,
            exc.retry_after_s,
            waited,
        )
        self.failovers.append(move)
        FAILOVERS.labels(move.from_ref, move.to_ref, move.reason).inc()
        span = trace.get_current_span()
        span.set_attribute("sb.failover.count", len(self.failovers))
        span.set_attribute("sb.failover.from", move.from_ref)
        span.set_attribute("sb.failover.to", move.to_ref)
        span.set_attribute("sb.failover.reason", move.reason)
        span.add_event(
            "failover",
            {k: v for k, v in move.data().items() if isinstance(v, str | int | float)},
        )
        log.warning("model failover %s -> %s (%s)", from_ref, ref, move.reason, extra=move.data())
        if self.events is not None:
            await self.events.emit("lifecycle", "failover", data=move.data(), model=ref)


def _exhausted(exc: ModelError | None, wait_s: float) -> ModelError:
    """The error of a call no model can answer now (``exc``: the last failure)."""
    if exc is None:
        return ModelUnavailableError(
            f"Every configured model is resting after earlier failures; the first is free "
            f"again in {wait_s:.0f} s."
        )
    note = (
        f" Every configured model is resting; the first is free again in {wait_s:.0f} s."
        if wait_s > 0
        else ""
    )
    return type(exc)(
        exc.message + note,
        provider=exc.provider,
        status_code=exc.status_code,
        retry_after_s=exc.retry_after_s,
    )
