"""Provider-neutral model errors.

Both providers translate their SDK's exceptions into these, so the agent's failover logic
(auth error -> next profile, rate limit -> fallback model, context overflow -> compact) never
imports an SDK. ``message`` is safe to show to a user and to log: it never contains the API key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import ClassVar

__all__ = [
    "ModelAuthError",
    "ModelContextOverflowError",
    "ModelError",
    "ModelRateLimitError",
    "ModelUnavailableError",
    "error_for_status",
    "retry_after_s",
    "safe_detail",
]


class ModelError(Exception):
    """A model call failed. ``message`` is user-safe (no secrets)."""

    retryable: ClassVar[bool] = False

    def __init__(
        self,
        message: str,
        *,
        provider: str = "",
        status_code: int | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.provider = provider
        self.status_code = status_code
        self.retry_after_s = retry_after_s  # the provider's retry-after(-ms), when it sent one

    def __str__(self) -> str:
        return self.message


class ModelAuthError(ModelError):
    """The provider rejected the credentials (HTTP 401/403)."""


class ModelRateLimitError(ModelError):
    """The provider is rate-limiting us or the quota is exhausted (HTTP 429)."""

    retryable = True


class ModelUnavailableError(ModelError):
    """The provider could not be reached, timed out, or failed on its side (5xx, 529)."""

    retryable = True


class ModelContextOverflowError(ModelError):
    """The request does not fit the model's context window (compact and retry)."""


_KEY_LIKE = re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_\-*.]{6,}")
_MAX_DETAIL = 300


def safe_detail(text: object, secret: str | None = None) -> str:
    """``text`` as a short single-line string with the secret and key-like tokens masked."""
    s = str(text) if text is not None else ""
    if secret and len(secret) >= 4:
        s = s.replace(secret, "***")
    s = _KEY_LIKE.sub("***", s)
    s = " ".join(s.split())
    if len(s) > _MAX_DETAIL:
        s = s[: _MAX_DETAIL - 3] + "..."
    return s


_OVERFLOW_HINTS = (
    "prompt is too long",
    "context_length_exceeded",
    "maximum context length",
    "context window",
    "too many tokens",
)


_MAX_RETRY_AFTER_S = 7 * 24 * 3600.0


def retry_after_s(headers: Mapping[str, str] | None) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date); None when
    absent or unreadable. Clamped to [0, a week]."""
    if not headers:
        return None
    value: float | None = None
    raw_ms = headers.get("retry-after-ms")
    raw = headers.get("retry-after")
    try:
        if raw_ms is not None:
            value = float(raw_ms) / 1000
        elif raw is not None:
            value = float(raw)
    except ValueError:
        value = None
    if value is None and raw:
        try:
            when = parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        value = (when - datetime.now(UTC)).total_seconds()
    if value is None or value != value:  # NaN
        return None
    return min(max(value, 0.0), _MAX_RETRY_AFTER_S)


def error_for_status(
    *,
    provider: str,
    label: str,
    key_env: str,
    status: int,
    detail: str,
    code: str | None = None,
    retry_after: float | None = None,
) -> ModelError:
    """Map an HTTP error status (plus the provider's error text/code) onto a ModelError.

    ``detail`` must already be scrubbed with :func:`safe_detail`; ``retry_after`` is the
    response's retry-after in seconds (see :func:`retry_after_s`).
    """
    if status in (401, 403):
        # Never echo the provider's text here: OpenAI's 401 message quotes a masked key.
        return ModelAuthError(
            f"{label} rejected the API key (HTTP {status}). Check {key_env} and restart.",
            provider=provider,
            status_code=status,
        )
    if status == 429:
        suffix = f": {detail}" if detail else ""
        return ModelRateLimitError(
            f"{label} is rate-limiting requests (HTTP 429); try again in a moment{suffix}",
            provider=provider,
            status_code=status,
            retry_after_s=retry_after,
        )
    if status >= 500 or status == 408:
        return ModelUnavailableError(
            f"{label} is unavailable right now (HTTP {status}); try again later.",
            provider=provider,
            status_code=status,
            retry_after_s=retry_after,
        )
    low = f"{code or ''} {detail}".lower()
    if status == 413 or any(h in low for h in _OVERFLOW_HINTS):
        return ModelContextOverflowError(
            f"The conversation is too long for the model ({label}, HTTP {status}): {detail}",
            provider=provider,
            status_code=status,
        )
    return ModelError(
        f"{label} request failed (HTTP {status}): {detail or 'no details'}",
        provider=provider,
        status_code=status,
    )
