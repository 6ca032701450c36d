from __future__ import annotations

from collections.abc import Callable

import pytest
from pydantic import BaseModel, ValidationError

from switchboard.errors import InvalidAgentId, InvalidSessionKey
from switchboard.sessions import (
    AgentId,
    SessionKey,
    cron_key,
    direct_key,
    group_key,
    hook_key,
    inbound_msg_id,
    is_agent_id,
    is_subagent,
    parse_session_key,
    session_key_from_token,
    session_token,
    subagent_key,
    validate_agent_id,
    validate_session_key,
)


class _Body(BaseModel):
    agent: AgentId


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


def test_direct_key_round_trips() -> None:
    key = direct_key("main", "telegram", "12345")
    assert key == "main:telegram:12345"
    parsed = parse_session_key(key)
    assert parsed == SessionKey(key, "direct", agent="main", channel="telegram", peer="12345")
    assert parsed.root == parsed
    assert not is_subagent(key)


def test_direct_peer_may_hold_colons() -> None:
    parsed = parse_session_key(direct_key("main", "slack", "U1:thread"))
    assert (parsed.kind, parsed.peer) == ("direct", "U1:thread")


def test_group_key_round_trips() -> None:
    key = group_key("ops-bot", "slack", "C01:x")
    assert key == "ops-bot:slack:group:C01:x"
    parsed = parse_session_key(key)
    assert parsed == SessionKey(key, "group", agent="ops-bot", channel="slack", peer="C01:x")


@pytest.mark.parametrize(
    ("build", "kind", "name"),
    [(hook_key, "hook", "gmail"), (cron_key, "cron", "daily-digest"), (hook_key, "hook", "a:b")],
)
def test_hook_and_cron_keys_round_trip(build: Callable[[str], str], kind: str, name: str) -> None:
    key = build(name)
    assert key == f"{kind}:{name}"
    assert parse_session_key(key) == SessionKey(key, kind, name=name)


def test_subagent_key_of_a_direct_session() -> None:
    parent = direct_key("main", "telegram", "42")
    key = subagent_key(parent, "research")
    assert key == "main:telegram:42:sub:research"
    assert is_subagent(key)
    parsed = parse_session_key(key)
    assert parsed == SessionKey(key, "sub", agent="main", channel="telegram", parent=parent)
    assert parsed.root == parse_session_key(parent)


def test_nested_subagents_point_to_their_parent_and_the_root() -> None:
    root = group_key("main", "discord", "g1")
    child = subagent_key(root, "a")
    grandchild = subagent_key(child, "b")
    parsed = parse_session_key(grandchild)
    assert parsed.kind == "sub"
    assert parsed.parent == child
    assert parse_session_key(parsed.parent).parent == root
    assert parsed.root == SessionKey(root, "group", agent="main", channel="discord", peer="g1")
    assert (parsed.agent, parsed.channel) == ("main", "discord")


def test_subagent_of_a_hook_session_has_the_hook_as_root() -> None:
    key = subagent_key(subagent_key(hook_key("gmail"), "x"), "y")
    parsed = parse_session_key(key)
    assert parsed.parent == "hook:gmail:sub:x"
    assert parsed.root == SessionKey("hook:gmail", "hook", name="gmail")
    assert parsed.agent == ""


@pytest.mark.parametrize(
    "key", ["my-api-key", "Main:api:x", "main:api", "main::x", "hook:", "cron:", "a:b:"]
)
def test_other_valid_keys_are_custom(key: str) -> None:
    assert parse_session_key(key) == SessionKey(key, "custom")


def test_parse_refuses_invalid_keys() -> None:
    with pytest.raises(InvalidSessionKey):
        parse_session_key("main:telegram:a b")


@pytest.mark.parametrize("agent", ["", "Main", "a b", "a.b", "ü", "x" * 65, "main:x"])
def test_invalid_agent_ids_are_refused(agent: str) -> None:
    assert not is_agent_id(agent)
    for build in (
        lambda: validate_agent_id(agent),
        lambda: direct_key(agent, "telegram", "1"),
        lambda: group_key(agent, "slack", "C1"),
    ):
        with pytest.raises(InvalidAgentId, match="invalid agent id") as raised:
            build()
        assert isinstance(raised.value, ValueError)


@pytest.mark.parametrize("agent", ["main", "a", "x" * 64, "ops_bot-2"])
def test_valid_agent_ids_are_accepted(agent: str) -> None:
    assert validate_agent_id(agent) == agent
    assert _Body(agent=agent).agent == agent


def test_agent_id_field_type_rejects_bad_ids() -> None:
    with pytest.raises(ValidationError):
        _Body(agent="Not Valid")


def test_builders_refuse_keys_that_are_not_keys() -> None:
    with pytest.raises(InvalidSessionKey):
        direct_key("main", "telegram", "has space")
    with pytest.raises(InvalidSessionKey):
        subagent_key("k" * 250, "child-id")


def test_inbound_msg_id_includes_the_account() -> None:
    assert inbound_msg_id("telegram", "bot1", "42") == "telegram:bot1:42"
    assert inbound_msg_id("telegram", "bot1", "42") != inbound_msg_id("telegram", "bot2", "42")
    assert inbound_msg_id("telegram", "", "42") == "telegram:default:42"
    assert inbound_msg_id("telegram", "", "42") == inbound_msg_id("telegram", "default", "42")
