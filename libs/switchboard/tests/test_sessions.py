from __future__ import annotations

import pytest

from switchboard.errors import InvalidSessionKey
from switchboard.sessions import session_key_from_token, session_token, validate_session_key


@pytest.mark.parametrize(
    "key", ["main:telegram:12345", "main:slack:group:C01", "hook:gmail", "a:b:sub:ü/é.*>"]
)
def test_tokens_are_nats_safe_and_reversible(key: str) -> None:
    token = session_token(key)
    assert not set(token) & set(".*> \t")
    assert session_key_from_token(token) == key


@pytest.mark.parametrize("key", ["", "a b", "x\n", "k" * 257])
def test_invalid_keys_are_refused(key: str) -> None:
    with pytest.raises(InvalidSessionKey):
        validate_session_key(key)
