"""The inbound policy's decisions from the settings alone (no pairing store: a sender or group
that would need pairing is refused): DM policies, group policies, the in-group sender
allowlist, mention gating, owners, and the role each admitted sender gets (docs/trust.md)."""

from __future__ import annotations

import pytest

from switchboard.v1 import messages_pb2
from switchboard_router.config import RouterSettings
from switchboard_router.security import Admission, ChannelPolicy


def msg(
    channel: str, sender: str, kind: str = "direct", mention: bool = False, chat: str = "C1"
) -> messages_pb2.InboundMessage:
    ref = messages_pb2.ChatRef(id=chat if kind == "group" else sender, type=kind)
    return messages_pb2.InboundMessage(
        channel=channel, sender=sender, chat=ref, mentions_bot=mention
    )


async def decide(environ: dict[str, str], message: messages_pb2.InboundMessage) -> Admission:
    return await ChannelPolicy(RouterSettings.from_environ(environ)).admit(message)


DM_SETTINGS = {
    "SB_TELEGRAM_ALLOW_FROM": '["42"]',
    "SB_SLACK_DM_POLICY": "allowlist",
    "SB_DISCORD_DM_POLICY": "open",
    "SB_OWNERS": '["slack:BOSS"]',
}


@pytest.mark.parametrize(
    ("channel", "sender", "reason", "role"),
    [
        ("telegram", "42", "", "user"),  # allow-listed
        ("telegram", "1", "pairing_required", ""),  # pairing, no store: refused
        ("telegram", "", "pairing_required", ""),
        ("telegram", "group:C1", "pairing_required", ""),
        ("slack", "1", "not_allowed", ""),
        ("slack", "BOSS", "", "owner"),  # an owner passes every DM policy
        ("discord", "1", "", "user"),
        ("discord", "BOSS", "", "user"),  # an owner on Slack is nobody on Discord
    ],
)
async def test_direct_messages(channel: str, sender: str, reason: str, role: str) -> None:
    decision = await decide(DM_SETTINGS, msg(channel, sender))
    assert (decision.admitted, decision.reason, decision.role) == (not reason, reason, role)


GROUP_SETTINGS = {
    "SB_TELEGRAM_GROUPS": '["-100", "-200"]',  # allowlist, the default
    "SB_SLACK_GROUP_POLICY": "open",
    "SB_SLACK_GROUP_ALLOW_FROM": '["U1"]',
    "SB_DISCORD_GROUP_POLICY": "pairing",
    "SB_DISCORD_GROUPS": '["D1"]',
    "SB_DISCORD_GROUP_ACTIVATION": "always",
    "SB_OWNERS": '["telegram:BOSS", "slack:BOSS"]',
    "SB_APPROVERS": '["discord:OPS"]',
}


@pytest.mark.parametrize(
    ("channel", "sender", "chat", "mention", "reason", "role"),
    [
        ("telegram", "1", "-100", True, "", "member"),
        ("telegram", "1", "-100", False, "not_mentioned", ""),
        ("telegram", "1", "-999", True, "group_not_allowed", ""),
        ("telegram", "BOSS", "-999", True, "group_not_allowed", ""),  # owners too
        ("telegram", "BOSS", "-200", True, "", "owner"),  # an owner in a group
        ("telegram", "1", "", True, "group_not_allowed", ""),
        ("whatsapp", "1", "G", True, "group_not_allowed", ""),  # no settings: closed
        ("slack", "U1", "ANY", True, "", "member"),  # open: every group
        ("slack", "U2", "ANY", True, "sender_not_allowed", ""),
        ("slack", "U2", "ANY", False, "sender_not_allowed", ""),  # the allowlist comes first
        ("slack", "BOSS", "ANY", True, "", "owner"),  # owners pass the sender allowlist
        ("slack", "BOSS", "ANY", False, "not_mentioned", ""),  # but not mention gating
        ("discord", "1", "D1", False, "", "member"),  # listed, activation always
        ("discord", "1", "D2", True, "group_pairing_required", ""),  # no store: refused
        ("discord", "OPS", "D1", False, "", "owner"),  # SB_APPROVERS are owners
    ],
)
async def test_group_messages(
    channel: str, sender: str, chat: str, mention: bool, reason: str, role: str
) -> None:
    decision = await decide(GROUP_SETTINGS, msg(channel, sender, "group", mention, chat))
    assert (decision.admitted, decision.reason, decision.role) == (not reason, reason, role)


async def test_open_group_policy_is_the_old_behaviour() -> None:
    environ = {"SB_GROUP_POLICY": "open"}
    assert (await decide(environ, msg("telegram", "1", "group", True, "-1"))).admitted
    refused = await decide(environ, msg("telegram", "1", "group", False, "-1"))
    assert refused.reason == "not_mentioned"


@pytest.mark.parametrize(
    ("channel", "role"),
    [
        ("api", "owner"),
        ("openai", "owner"),
        ("webchat", "owner"),
        ("a2a", "owner"),
        ("hooks", "hook"),
        ("cron", "cron"),
    ],
)
@pytest.mark.parametrize("kind", ["direct", "group"])
async def test_first_party_channels_pass_with_their_role(
    channel: str, role: str, kind: str
) -> None:
    strict = {"SB_DM_POLICY": "allowlist", "SB_GROUP_POLICY": "allowlist"}
    decision = await decide(strict, msg(channel, "anyone", kind))
    assert (decision.admitted, decision.role) == (True, role)


async def test_the_rate_limit_applies_after_admission() -> None:
    policy = ChannelPolicy(
        RouterSettings.from_environ(
            {"SB_DM_POLICY": "open", "SB_RATE_LIMIT_PER_MINUTE": "0.01", "SB_RATE_LIMIT_BURST": "1"}
        )
    )
    first = await policy.admit(msg("telegram", "9"))
    second = await policy.admit(msg("telegram", "9"))
    assert (first.admitted, second.reason) == (True, "rate_limited")
