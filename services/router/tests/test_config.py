"""Inbound security settings (public contract names) and the policy's decisions."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from switchboard.settings import describe, scoped_environ
from switchboard.v1 import messages_pb2
from switchboard_router.config import DmPolicy, GroupActivation, RouterSettings
from switchboard_router.security import ChannelPolicy


def test_defaults_are_pairing_and_mention() -> None:
    s = RouterSettings.from_environ({})
    assert (s.dm_policy, s.group_activation, s.channel_security) == (
        DmPolicy.PAIRING,
        GroupActivation.MENTION,
        {},
    )
    assert s.dm_policy_for("telegram") is DmPolicy.PAIRING
    assert s.channel("telegram").allow_from == frozenset()


def test_per_channel_variables() -> None:
    s = RouterSettings.from_environ(
        {
            "SB_DM_POLICY": "allowlist",
            "SB_TELEGRAM_DM_POLICY": "Open",
            "SB_TELEGRAM_GROUP_ACTIVATION": "always",
            "SB_SLACK_ALLOW_FROM": '["U1", 42]',
        }
    )
    assert s.dm_policy_for("telegram") is DmPolicy.OPEN
    assert s.group_activation_for("telegram") is GroupActivation.ALWAYS
    assert s.dm_policy_for("slack") is DmPolicy.ALLOWLIST
    assert s.group_activation_for("slack") is GroupActivation.MENTION
    assert s.channel("slack").allow_from == {"U1", "42"}


def test_json_map_with_variables_winning() -> None:
    s = RouterSettings.from_environ(
        {
            "SB_CHANNEL_SECURITY": '{"discord": {"dm_policy": "open"},'
            ' "telegram": {"dm_policy": "allowlist", "allow_from": ["9"]}}',
            "SB_TELEGRAM_DM_POLICY": "pairing",
        }
    )
    assert s.dm_policy_for("discord") is DmPolicy.OPEN
    assert s.dm_policy_for("telegram") is DmPolicy.PAIRING
    assert s.channel("telegram").allow_from == {"9"}


@pytest.mark.parametrize(
    ("environ", "variable"),
    [
        ({"SB_DM_POLICY": "bogus"}, "SB_DM_POLICY"),
        ({"SB_GROUP_ACTIVATION": "sometimes"}, "SB_GROUP_ACTIVATION"),
        ({"SB_TELEGRAM_DM_POLICY": "bogus"}, "SB_TELEGRAM_DM_POLICY"),
        ({"SB_SLACK_GROUP_ACTIVATION": "x"}, "SB_SLACK_GROUP_ACTIVATION"),
        ({"SB_TELEGRAM_ALLOW_FROM": "42"}, "SB_TELEGRAM_ALLOW_FROM"),
        ({"SB_TELEGRAM_ALLOW_FROM": '{"42": true}'}, "SB_TELEGRAM_ALLOW_FROM"),
        ({"SB_TELEGRAM_ALLOW_FROM": "[true]"}, "SB_TELEGRAM_ALLOW_FROM"),
        ({"SB_TELEGRAM_ALLOW_FROM": "[not json"}, "SB_TELEGRAM_ALLOW_FROM"),
        ({"SB_CHANNEL_SECURITY": '{"telegram": 3}'}, "SB_CHANNEL_SECURITY"),
    ],
)
def test_bad_values_name_the_variable(environ: dict[str, str], variable: str) -> None:
    with pytest.raises(ValidationError) as caught:
        RouterSettings.from_environ(environ)
    assert variable in describe(caught.value)


def msg(
    channel: str, sender: str, kind: str = "direct", mention: bool = False
) -> messages_pb2.InboundMessage:
    chat = messages_pb2.ChatRef(id="C1" if kind == "group" else sender, type=kind)
    return messages_pb2.InboundMessage(
        channel=channel, sender=sender, chat=chat, mentions_bot=mention
    )


@pytest.mark.parametrize(
    ("channel", "sender", "kind", "mention", "reason"),
    [
        ("telegram", "42", "direct", False, ""),
        ("telegram", "1", "direct", False, "pairing_required"),
        ("telegram", "", "direct", False, "pairing_required"),
        ("slack", "1", "direct", False, "not_allowed"),
        ("discord", "1", "direct", False, ""),
        ("telegram", "1", "group", False, "not_mentioned"),
        ("telegram", "1", "group", True, ""),
        ("discord", "1", "group", False, ""),
        ("webchat", "1", "direct", False, ""),
        ("hooks", "", "group", False, ""),
    ],
)
def test_decisions(channel: str, sender: str, kind: str, mention: bool, reason: str) -> None:
    settings = RouterSettings.from_environ(
        {
            "SB_TELEGRAM_ALLOW_FROM": '["42"]',
            "SB_SLACK_DM_POLICY": "allowlist",
            "SB_DISCORD_DM_POLICY": "open",
            "SB_DISCORD_GROUP_ACTIVATION": "always",
        }
    )
    decision = ChannelPolicy(settings).decide(msg(channel, sender, kind, mention))
    assert (decision.admitted, decision.reason) == (not reason, reason)


def test_the_launcher_passes_the_per_channel_variables_to_the_router() -> None:
    """``switchboard up`` gives a service only the SB_* variables its settings read; the
    per-channel ones have names of their own and are kept by pattern, others' secrets not."""
    environ = {
        "SB_TELEGRAM_DM_POLICY": "open",
        "SB_TELEGRAM_ALLOW_FROM": '["42"]',
        "SB_SLACK_GROUP_ACTIVATION": "always",
        "SB_DM_POLICY": "allowlist",
        "SB_GATEWAY_TOKEN": "not-for-the-router-5f0c2e9a7b1d",
        "SB_TELEGRAM_BOT_TOKEN": "not-for-the-router-either-77aa",
    }
    scoped = scoped_environ(RouterSettings, environ)
    assert set(scoped) == {
        "SB_TELEGRAM_DM_POLICY",
        "SB_TELEGRAM_ALLOW_FROM",
        "SB_SLACK_GROUP_ACTIVATION",
        "SB_DM_POLICY",
    }
    settings = RouterSettings.from_environ(scoped)
    assert settings.channel_security["telegram"].allow_from == frozenset({"42"})
