"""The inbound policy with a pairing store (docs/trust.md): an unknown sender or group gets one
code and no run, an approved one runs with the role it was approved with, a sender named like a
group never pairs, chatter that would not run asks nothing, and the store is asked at most once
per message (never for a DM that the policy admits without it). A real PairingStore on a real
nats-server's KV bucket (one server for the module, a bucket per test); no router."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import nats
import pytest
from nats.aio.client import Client as NATS

from switchboard.v1 import messages_pb2, router_pb2
from switchboard_router.config import RouterSettings
from switchboard_router.pairing import PairingStore
from switchboard_router.security import Admission, ChannelPolicy


class CountingStore(PairingStore):
    """The real store, counting the lookups of paired senders (one KV get each)."""

    lookups = 0

    async def paired_sender(
        self, channel: str, sender: str, account: str = ""
    ) -> router_pb2.PairedSender | None:
        self.lookups += 1
        return await super().paired_sender(channel, sender, account)


class Notes:
    """The codes the policy sends (its ``notify``)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, router_pb2.PairingRequest]] = []

    async def __call__(
        self, msg: messages_pb2.InboundMessage, request: router_pb2.PairingRequest
    ) -> None:
        self.sent.append((msg.chat.id, request))


@pytest.fixture
async def nc(module_nats_url: str) -> AsyncIterator[NATS]:
    conn = await nats.connect(module_nats_url)
    try:
        yield conn
    finally:
        await conn.close()


@pytest.fixture
async def store(nc: NATS) -> CountingStore:
    kv = await nc.jetstream().create_key_value(bucket=f"pairing_{uuid.uuid4().hex[:12]}")
    return CountingStore(kv, ttl_s=3600, max_pending=3)


def policy(store: PairingStore, notes: Notes, **environ: str) -> ChannelPolicy:
    return ChannelPolicy(RouterSettings.from_environ(environ), store, notes)


def dm(channel: str, sender: str) -> messages_pb2.InboundMessage:
    chat = messages_pb2.ChatRef(id=sender, type="direct")
    return messages_pb2.InboundMessage(channel=channel, sender=sender, chat=chat, text="hello")


def group(channel: str, sender: str, chat: str, mention: bool) -> messages_pb2.InboundMessage:
    ref = messages_pb2.ChatRef(id=chat, type="group")
    return messages_pb2.InboundMessage(
        channel=channel, sender=sender, chat=ref, mentions_bot=mention, text="hi all"
    )


def verdict(a: Admission) -> tuple[bool, str, str]:
    return (a.admitted, a.reason, a.role)


async def test_an_unknown_sender_gets_one_code_then_runs_once_approved(
    store: CountingStore,
) -> None:
    notes = Notes()
    p = policy(store, notes)
    assert verdict(await p.admit(dm("telegram", "7"))) == (False, "pairing_required", "")
    assert verdict(await p.admit(dm("telegram", "7"))) == (False, "pairing_required", "")
    [(chat, request)] = notes.sent  # one code, in the sender's chat
    assert (chat, request.channel, request.sender, request.chat_id) == ("7", "telegram", "7", "7")
    await store.approve("telegram", request.code, by="op")
    assert verdict(await p.admit(dm("telegram", "7"))) == (True, "", "user")
    assert verdict(await p.admit(dm("discord", "7"))) == (False, "pairing_required", "")


async def test_a_sender_paired_as_owner_is_an_owner_in_dms_and_groups(
    store: CountingStore,
) -> None:
    notes = Notes()
    environ = {"SB_SLACK_GROUP_POLICY": "open", "SB_SLACK_GROUP_ALLOW_FROM": '["U1"]'}
    p = policy(store, notes, **environ)
    await p.admit(dm("slack", "U9"))
    [(_, request)] = notes.sent
    await store.approve("slack", request.code, by="op", owner=True)
    assert verdict(await p.admit(dm("slack", "U9"))) == (True, "", "owner")
    # Not on the group's allowlist, but an owner: heard when it mentions the bot (one lookup).
    before = store.lookups
    assert verdict(await p.admit(group("slack", "U9", "C1", True))) == (True, "", "owner")
    assert store.lookups == before + 1
    assert verdict(await p.admit(group("slack", "U9", "C1", False))) == (
        False,
        "sender_not_allowed",
        "",
    )
    assert verdict(await p.admit(group("slack", "U1", "C1", True))) == (True, "", "member")
    assert verdict(await p.admit(group("slack", "U2", "C1", True))) == (
        False,
        "sender_not_allowed",
        "",
    )


async def test_the_store_is_asked_at_most_once_and_only_where_needed(
    store: CountingStore,
) -> None:
    notes = Notes()
    environ = {
        "SB_DISCORD_DM_POLICY": "open",
        "SB_TELEGRAM_ALLOW_FROM": '["42"]',
        "SB_TELEGRAM_GROUPS": '["-100"]',
    }
    p = policy(store, notes, **environ)
    await p.admit(dm("discord", "1"))  # open: admitted without a lookup
    await p.admit(dm("telegram", "42"))  # allow-listed
    await p.admit(group("telegram", "1", "-100", False))  # chatter: does not run
    assert store.lookups == 0
    await p.admit(dm("telegram", "5"))  # pairing: one lookup
    assert store.lookups == 1
    await p.admit(group("telegram", "1", "-100", True))  # runs: one lookup for the role
    assert store.lookups == 2


async def test_a_sender_named_like_a_group_never_pairs(store: CountingStore) -> None:
    notes = Notes()
    p = policy(store, notes)
    for sender in ("group:C1", ""):
        message = dm("telegram", sender)
        assert verdict(await p.admit(message)) == (False, "pairing_required", "")
    assert notes.sent == []
    assert await store.requests() == []
    assert store.lookups == 0


async def test_an_unknown_group_gets_a_code_when_a_message_would_run(
    store: CountingStore,
) -> None:
    notes = Notes()
    p = policy(store, notes, SB_TELEGRAM_GROUP_POLICY="pairing")
    chatter = group("telegram", "1", "-5", False)
    assert verdict(await p.admit(chatter)) == (False, "group_pairing_required", "")
    assert notes.sent == []
    assert await store.requests() == []
    asked = group("telegram", "1", "-5", True)
    assert verdict(await p.admit(asked)) == (False, "group_pairing_required", "")
    [(chat, request)] = notes.sent
    assert (chat, request.sender, request.chat_id) == ("-5", "group:-5", "-5")
    await store.approve("telegram", request.code, by="op")
    assert verdict(await p.admit(asked)) == (True, "", "member")
    other = group("telegram", "1", "-6", True)
    assert verdict(await p.admit(other)) == (False, "group_pairing_required", "")


async def test_past_the_pending_limit_no_code_is_sent(store: CountingStore) -> None:
    notes = Notes()
    p = policy(store, notes)
    for sender in ("1", "2", "3"):
        assert (await p.admit(dm("telegram", sender))).reason == "pairing_required"
    assert verdict(await p.admit(dm("telegram", "4"))) == (False, "pairing_limit", "")
    assert len(notes.sent) == 3


async def test_rate_limits_are_per_channel_and_sender(store: CountingStore) -> None:
    environ = {"SB_DM_POLICY": "open", "SB_RATE_LIMIT_PER_MINUTE": "0.01"}
    p = policy(store, Notes(), SB_RATE_LIMIT_BURST="1", **environ)
    for message in (dm("telegram", "9"), dm("telegram", "8"), dm("discord", "9")):
        assert (await p.admit(message)).admitted
    assert (await p.admit(dm("telegram", "9"))).reason == "rate_limited"
