"""Session keys and the NATS-safe tokens that stand for them in subjects."""

from __future__ import annotations

import base64

from .errors import InvalidSessionKey

MAX_KEY_LENGTH = 256


def validate_session_key(key: str) -> str:
    """Return ``key`` if it can name a session, else raise :class:`InvalidSessionKey`."""
    if not key:
        raise InvalidSessionKey("session key must not be empty")
    if len(key) > MAX_KEY_LENGTH:
        raise InvalidSessionKey(f"session key must be at most {MAX_KEY_LENGTH} characters")
    if any(c.isspace() or not c.isprintable() for c in key):
        raise InvalidSessionKey("session key must not contain whitespace or control characters")
    return key


def session_token(key: str) -> str:
    """Encode a session key as one NATS subject token (base64url, no padding)."""
    return base64.urlsafe_b64encode(key.encode()).decode().rstrip("=")


def session_key_from_token(token: str) -> str:
    padding = "=" * (-len(token) % 4)
    return base64.urlsafe_b64decode(token + padding).decode()
