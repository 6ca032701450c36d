"""Authentication and request parsing of the webhook endpoints (:mod:`.hooks_api`): bearer
tokens compared in constant time, GitHub-style body signatures, no token in the query string,
JSON bodies into models with safe 400s, and idempotency keys into message ids."""

from __future__ import annotations

import hashlib
import hmac
import re
import uuid
from typing import Any, TypeVar

from fastapi import Request
from pydantic import BaseModel, ValidationError

from switchboard import jsonsafe

from .errors import ApiError
from .hooks_config import Signature

# Query parameters a token would be sent in: refused, whatever their value.
QUERY_TOKENS = frozenset({"token", "access_token", "hooks_token", "key", "api_key"})
_IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e]{1,200}")  # printable ASCII, no spaces
M = TypeVar("M", bound=BaseModel)


def same_token(given: str, expected: str) -> bool:
    """Constant time, whatever the lengths (digests are compared, not the tokens)."""
    a = hashlib.sha256(given.encode()).digest()
    b = hashlib.sha256(expected.encode()).digest()
    return hmac.compare_digest(a, b) and bool(expected)


def refuse_query_token(request: Request) -> None:
    if QUERY_TOKENS & {k.lower() for k in request.query_params}:
        raise ApiError(
            400,
            "Tokens are not accepted in the query string (URLs end up in logs): send "
            "'Authorization: Bearer <token>'.",
            code="token_in_query",
        )


def authenticate(request: Request, expected: str) -> None:
    refuse_query_token(request)
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        raise ApiError(401, "Missing bearer token: send 'Authorization: Bearer <hooks token>'.")
    if not same_token(given.strip(), expected):
        raise ApiError(401, "Invalid bearer token.", code="invalid_api_key")


def verify_signature(request: Request, sig: Signature, body: bytes) -> None:
    """``sig.header`` must be ``sig.prefix`` + the hex HMAC-SHA256 of the raw ``body``."""
    refuse_query_token(request)
    digest = hmac.new(sig.secret.get_secret_value().encode(), body, hashlib.sha256).hexdigest()
    given = request.headers.get(sig.header, "")
    if not hmac.compare_digest(given.encode(), (sig.prefix + digest).encode()):
        raise ApiError(401, f"Missing or invalid signature ({sig.header}).")


def parse_json(body: bytes) -> Any:
    """The body's JSON, bounded (``switchboard.jsonsafe``): a body nested deeper than any
    sender's payload is a 400 before a template or a model walks it."""
    try:
        return jsonsafe.loads(body)
    except jsonsafe.JsonRefused as exc:
        raise ApiError(400, f"The body is refused: {exc}.", code="invalid_json") from None


def parse_model(model: type[M], body: bytes) -> M:
    data = parse_json(body)
    if not isinstance(data, dict):
        raise ApiError(400, "The body must be a JSON object.", code="invalid_request")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        parts = [
            f"{'.'.join(str(x) for x in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors()[:5]
        ]
        raise ApiError(400, "Invalid request: " + "; ".join(parts), "invalid_request") from None


def message_id_for(request: Request, scope: str, fallback: str = "") -> str:
    """``<scope>:<Idempotency-Key>`` (else the mapping's rendered id), or a new uuid."""
    key = request.headers.get("idempotency-key") or fallback
    if not key:
        return uuid.uuid4().hex
    if _IDEMPOTENCY_KEY.fullmatch(key) is None:
        raise ApiError(
            400,
            "Idempotency key: 1-200 printable ASCII characters without spaces.",
            param="Idempotency-Key",
        )
    return f"{scope}:{key}"
