"""Inbound security against a real nats-server: a router runs in-process, messages are
published on INBOUND as the gateway would, and what reached the LANES stream is read back."""

from __future__ import annotations

import pytest

from .router_harness import dm, group, refused, route, router


@pytest.mark.parametrize(
    ("environ", "reason"),
    [
        ({"SB_DM_POLICY": "open"}, ""),
        ({"SB_DM_POLICY": "open", "SB_TELEGRAM_DM_POLICY": "allowlist"}, "not_allowed"),
        ({}, "pairing_required"),  # pairing, the default: the allow list, or a code
    ],
    ids=["open", "allowlist", "pairing"],
)
async def test_dm_policy_admits_allowed_senders_only(
    nats_url: str, environ: dict[str, str], reason: str
) -> None:
    before = refused("telegram", reason)
    allow = {"SB_TELEGRAM_ALLOW_FROM": '["42", 7]'}
    async with router(nats_url, **environ, **allow) as r:
        reached = await route(
            r.js, dm("telegram", "42", "m-allowed"), dm("telegram", "666", "m-unknown")
        )
    if not reason:
        assert reached == {"m-allowed", "m-unknown"}
        return
    assert reached == {"m-allowed"}
    assert refused("telegram", reason) == before + 1


@pytest.mark.parametrize("channel", ["api", "openai", "webchat", "hooks", "cron"])
async def test_authenticated_channels_always_pass(nats_url: str, channel: str) -> None:
    async with router(nats_url, SB_DM_POLICY="allowlist") as r:
        reached = await route(r.js, dm(channel, "anyone", "m-1"), group(channel, "m-2", False))
    assert reached == {"m-1", "m-2"}


async def test_group_without_mention_is_refused_under_mention(nats_url: str) -> None:
    before = refused("slack", "not_mentioned")
    # mention, the default; the DM policy is not asked
    async with router(nats_url, SB_SLACK_GROUPS='["C9"]') as r:
        reached = await route(r.js, group("slack", "g-plain", False), group("slack", "g-at", True))
    assert reached == {"g-at"}
    assert refused("slack", "not_mentioned") == before + 1


async def test_every_group_message_passes_under_always(nats_url: str) -> None:
    before = refused("slack", "not_mentioned")
    async with router(nats_url, SB_SLACK_GROUP_ACTIVATION="always", SB_GROUP_POLICY="open") as r:
        reached = await route(r.js, group("slack", "g-plain", False), group("slack", "g-at", True))
    assert reached == {"g-plain", "g-at"}
    assert refused("slack", "not_mentioned") == before
