"""The router's policy takes new settings while running (the configuration file changed,
docs/config-file.md): a sender the old allowlist refused is admitted, an owner by the new
SB_OWNERS is one, without building the policy again."""

from __future__ import annotations

from switchboard.v1 import messages_pb2
from switchboard_router.config import RouterSettings
from switchboard_router.security import ChannelPolicy


def dm(channel: str, sender: str) -> messages_pb2.InboundMessage:
    chat = messages_pb2.ChatRef(id=sender, type="direct")
    return messages_pb2.InboundMessage(channel=channel, sender=sender, chat=chat)


async def test_a_reloaded_allowlist_and_owners_apply_to_the_next_message() -> None:
    before = {"SB_DM_POLICY": "allowlist", "SB_TELEGRAM_ALLOW_FROM": '["42"]'}
    policy = ChannelPolicy(RouterSettings.from_environ(before))
    refused = await policy.admit(dm("telegram", "43"))
    assert (refused.admitted, refused.reason) == (False, "not_allowed")
    assert (await policy.admit(dm("slack", "BOSS"))).admitted is False

    after = {
        "SB_DM_POLICY": "allowlist",
        "SB_CHANNEL_SECURITY": '{"telegram": {"allow_from": ["42", "43"]}}',
        "SB_OWNERS": '["slack:BOSS"]',
    }
    policy.reload(RouterSettings.from_environ(after))
    admitted = await policy.admit(dm("telegram", "43"))
    assert (admitted.admitted, admitted.role) == (True, "user")
    owner = await policy.admit(dm("slack", "BOSS"))
    assert (owner.admitted, owner.role) == (True, "owner")
