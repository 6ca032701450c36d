"""Bearer tokens and shared secrets: refuse weak ones at start, make strong ones.

``weakness(value)`` says why a secret is weak (``None`` when it is not); ``require_strong(name,
value)`` raises :class:`WeakToken` naming the setting (never echoing the value) so that a
service refuses to start with it; ``generate()`` makes one that passes. Any credential a person
may set by hand goes through ``require_strong``: the gateway token, internal service tokens,
passwords.
"""

from __future__ import annotations

import re
import secrets

MIN_LENGTH = 24
# Placeholders and defaults found in examples, manifests and tutorials: refused whole (compared
# in lower case without separators, trailing digits ignored: "Change_Me-123" is "changeme").
KNOWN_DEFAULTS = frozenset(
    {
        "admin",
        "changeme",
        "changeit",
        "default",
        "dev",
        "example",
        "letmein",
        "pass",
        "passw0rd",
        "password",
        "qwerty",
        "secret",
        "switchboard",
        "test",
        "token",
    }
)
# Placeholder words that make a secret weak wherever they appear ("please-change-me-...").
PLACEHOLDERS = ("changeme", "replaceme", "placeholder", "yourtoken", "yoursecret", "xxxxxx")
MIN_DISTINCT = 6  # characters; a random 24-character token has far more
_SEPARATORS = re.compile(r"[\s_.:-]+")
HOW_TO_MAKE_ONE = "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"


class WeakToken(ValueError):
    """A secret is too weak to use; the message names the setting and says why."""


def generate() -> str:
    """A new strong token: 32 random bytes, URL-safe base64 (43 characters)."""
    return secrets.token_urlsafe(32)


_RUNS = ("0123456789", "abcdefghijklmnopqrstuvwxyz", "qwertyuiop", "asdfghjkl", "zxcvbnm")


def _is_run(value: str) -> bool:
    """``abcdef...``, ``1234567890123...``, ``zyx...``, ``qwerty...``: a stretch of a
    sequence (cycled), forwards or backwards."""
    folded = value.lower()
    for run in _RUNS:
        cycle = run * (len(folded) // len(run) + 2)
        if folded in cycle or folded in cycle[::-1]:
            return True
    return False


def _is_repetition(value: str) -> bool:
    """A short piece repeated: ``abcabcabc...``, ``changemechangeme...``."""
    return (value + value).find(value, 1) < len(value)


def weakness(value: str, *, min_length: int = MIN_LENGTH) -> str | None:
    """Why ``value`` is a weak secret, in a few words; ``None`` when it is not."""
    if not value:
        return "it is empty"
    if value != value.strip():
        return "it begins or ends with whitespace"
    folded = _SEPARATORS.sub("", value.lower())
    if folded.rstrip("0123456789") in KNOWN_DEFAULTS or folded in KNOWN_DEFAULTS:
        return "it is a well-known default"
    if len(set(value)) == 1:
        return "it is one character repeated"
    if any(word in folded for word in PLACEHOLDERS):
        return "it is a placeholder"
    if len(value) < min_length:
        return f"it is shorter than {min_length} characters"
    if _is_repetition(value):
        return "it is a short sequence repeated"
    if _is_run(value):
        return "it is a run of consecutive characters"
    if len(set(value)) < MIN_DISTINCT:
        return f"it uses fewer than {MIN_DISTINCT} different characters"
    return None


def require_strong(name: str, value: str, *, min_length: int = MIN_LENGTH) -> str:
    """``value`` if it is strong; else :class:`WeakToken` naming ``name`` (e.g.
    ``SB_GATEWAY_TOKEN``), saying why and how to make a good one. The value never appears in
    the message, so it cannot reach a log."""
    problem = weakness(value, min_length=min_length)
    if problem is not None:
        raise WeakToken(
            f"{name} is too weak ({problem}): use at least {min_length} random characters, "
            f"e.g. the output of {HOW_TO_MAKE_ONE}"
        )
    return value
