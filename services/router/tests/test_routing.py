from __future__ import annotations

import pytest

from switchboard.v1 import messages_pb2
from switchboard_router.routing import RouteError, resolve


def msg(**kw: object) -> messages_pb2.InboundMessage:
    return messages_pb2.InboundMessage(**kw)  # type: ignore[arg-type]


def test_direct_message_routes_to_agent_channel_peer() -> None:
    r = resolve(msg(channel="telegram", sender="42", chat=messages_pb2.ChatRef(id="42")), "main")
    assert (r.agent, r.session_key) == ("main", "main:telegram:42")


def test_group_message_routes_to_group_session() -> None:
    m = msg(channel="slack", sender="U1", chat=messages_pb2.ChatRef(id="C9", type="group"))
    assert resolve(m, "main").session_key == "main:slack:group:C9"


def test_explicit_session_and_agent_win() -> None:
    r = resolve(msg(channel="api", session_key="hook:mail", agent="ops"), "main")
    assert (r.agent, r.session_key) == ("ops", "hook:mail")


@pytest.mark.parametrize(
    "m",
    [
        msg(channel="api"),
        msg(channel="slack", chat=messages_pb2.ChatRef(type="group")),
        msg(channel="api", session_key="has space"),
        msg(channel="api", sender="x", agent="Bad.Agent"),
    ],
)
def test_unroutable_messages_raise(m: messages_pb2.InboundMessage) -> None:
    with pytest.raises(RouteError):
        resolve(m, "main")


def test_a_named_account_has_its_own_sessions() -> None:
    """Two bots (or Slack workspaces) of one channel: a named account's chats are sessions of
    their own; the account ``default`` (or none) keeps the bare channel, as before accounts."""
    dm = messages_pb2.ChatRef(id="42")
    room = messages_pb2.ChatRef(id="C9", type="group")
    for account in ("", "default"):
        m = msg(channel="telegram", account=account, sender="42", chat=dm)
        assert resolve(m, "main").session_key == "main:telegram:42"
    m = msg(channel="telegram", account="family", sender="42", chat=dm)
    assert resolve(m, "main").session_key == "main:telegram@family:42"
    m = msg(channel="slack", account="acme", sender="U1", chat=room)
    assert resolve(m, "main").session_key == "main:slack@acme:group:C9"
