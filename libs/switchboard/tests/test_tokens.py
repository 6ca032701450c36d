"""Weak tokens are named as such (and why), strong ones pass, and the refusal never carries the
value."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr

from switchboard import tokens
from switchboard.cli.home import TOKEN_ENV, Home, HomeError, gateway_token

WEAK = {
    "": "empty",
    " " + "k3Jd9sLq0PzXw7VbN2mR5tYu": "whitespace",
    "k3Jd9sLq0PzXw7VbN2mR5tYu\n": "whitespace",
    "change-me": "well-known default",
    "CHANGE_ME": "well-known default",
    "changeme": "well-known default",
    "Change.Me-2024": "well-known default",
    "secret": "well-known default",
    "password": "well-known default",
    "Password1": "well-known default",
    "token": "well-known default",
    "admin": "well-known default",
    "test": "well-known default",
    "please-change-me-before-going-live": "placeholder",
    "replace-me-with-a-real-token-here": "placeholder",
    "a": "one character repeated",
    "x" * 64: "one character repeated",
    "k3Jd9sLq0PzXw7VbN2mR5tY": "shorter than 24",
    "gw-token-91b7e3": "shorter than 24",
    "abcabcabcabcabcabcabcabcabc": "sequence repeated",
    "s3cr3t-s3cr3t-s3cr3t-s3cr3t-": "sequence repeated",
    "abcdefghijklmnopqrstuvwxyz": "run of consecutive",
    "1234567890123456789012345": "run of consecutive",
    "zyxwvutsrqponmlkjihgfedcb": "run of consecutive",
    "qwertyuiopasdfghjklzxcvbnm"[:10] * 3: "sequence repeated",
    "aabbaabbaabbaabbaabbaabbab": "fewer than 6 different",
}
STRONG = [
    tokens.generate(),
    "test-token-" + "0f3a9c7d1e5b8246",  # the shape the test suites use
    "k3Jd9sLq0PzXw7VbN2mR5tYu",  # exactly 24 random characters
    "correct horse battery staple ferry",
]


@pytest.mark.parametrize(("value", "why"), WEAK.items(), ids=range(len(WEAK)))
def test_weak_tokens_are_named_with_the_reason(value: str, why: str) -> None:
    problem = tokens.weakness(value)
    assert problem is not None and why in problem, (value, problem)


@pytest.mark.parametrize(
    "value", STRONG, ids=["generated", "test-suites", "24-random", "passphrase"]
)
def test_strong_tokens_pass(value: str) -> None:
    assert tokens.weakness(value) is None
    assert tokens.require_strong("SB_SOME_TOKEN", value) == value


def test_generated_tokens_are_strong_and_new_each_time() -> None:
    made = {tokens.generate() for _ in range(50)}
    assert len(made) == 50
    assert all(tokens.weakness(t) is None and len(t) >= tokens.MIN_LENGTH for t in made)


def test_the_minimum_length_is_a_parameter() -> None:
    value = tokens.generate()[:16]
    assert tokens.weakness(value) is not None
    assert tokens.weakness(value, min_length=16) is None
    with pytest.raises(tokens.WeakToken, match="at least 40 random characters"):
        tokens.require_strong("SB_X", tokens.generate()[:39], min_length=40)


@pytest.mark.parametrize("value", ["change-me", "hunter2-but-short", ""])
def test_the_refusal_names_the_setting_and_never_the_value(value: str) -> None:
    with pytest.raises(tokens.WeakToken) as raised:
        tokens.require_strong("SB_INTERNAL_TOKEN", value)
    message = str(raised.value)
    assert isinstance(raised.value, ValueError)
    assert message.startswith("SB_INTERNAL_TOKEN is too weak (")
    assert "secrets.token_urlsafe" in message  # says how to make a good one
    assert "\n" not in message
    if value:
        assert value not in message


def test_the_launcher_refuses_a_weak_sb_gateway_token(tmp_path: Path) -> None:
    """``switchboard up`` with SB_GATEWAY_TOKEN=change-me stops with the reason (HomeError is
    what the launcher prints in one line); a strong one is used as it is."""
    home = Home(tmp_path)
    with pytest.raises(HomeError, match=f"^{TOKEN_ENV} is too weak \\(it is a well-known"):
        gateway_token(home, SecretStr("change-me"))
    strong = tokens.generate()
    token = gateway_token(home, SecretStr(strong))
    assert (token.value, token.source, token.generated) == (strong, TOKEN_ENV, False)
    assert not home.token_file.exists()
