"""Bearer-token authentication for every endpoint but health, readiness and metrics."""

from __future__ import annotations

import hmac

from fastapi import Request

from .errors import ApiError


def require_token(request: Request) -> None:
    expected: str = request.app.state.settings.gateway_token.get_secret_value()
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise ApiError(401, "Missing bearer token: send 'Authorization: Bearer <gateway token>'.")
    if not hmac.compare_digest(token.strip().encode(), expected.encode()):
        raise ApiError(401, "Invalid bearer token.", code="invalid_api_key")
