"""The pairing store itself (docs/trust.md) on a real nats-server's KV bucket (one server for
the module, a bucket per test): the request a code stands for, one pending request per sender
even when two replicas see it at once, the pending limit per channel, expiry, the role an
approval gives, deny and revoke, and the errors an operator sees for a bad code or channel."""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid
from collections.abc import AsyncIterator

import nats
import pytest
from nats.aio.client import Client as NATS

from switchboard.v1 import messages_pb2
from switchboard_router.pairing import (
    ALPHABET,
    NotFound,
    PairingError,
    PairingStore,
    channel_token,
    group_sender,
    is_group,
    normalize_code,
)

# Generous: an expired request must be seen as gone once its TTL is over.
EXPIRY_BOUND_S = 30.0


@pytest.fixture
async def nc(module_nats_url: str) -> AsyncIterator[NATS]:
    conn = await nats.connect(module_nats_url)
    try:
        yield conn
    finally:
        await conn.close()


async def make_store(nc: NATS, ttl_s: float = 3600, max_pending: int = 3) -> PairingStore:
    kv = await nc.jetstream().create_key_value(bucket=f"pairing_{uuid.uuid4().hex[:12]}")
    return PairingStore(kv, ttl_s=ttl_s, max_pending=max_pending)


def message(
    channel: str, sender: str, text: str = "hello", chat: str = ""
) -> messages_pb2.InboundMessage:
    ref = messages_pb2.ChatRef(id=chat or sender, type="direct")
    return messages_pb2.InboundMessage(
        channel=channel, account="default", sender=sender, chat=ref, text=text
    )


def test_codes_and_channel_names_are_checked_for_the_operator() -> None:
    assert normalize_code(" abcd-efgh ") == "ABCDEFGH"
    for bad in ("ABCDEFG", "ABCDEFGHJ", "ABCDEFG0", "ABCDEFGI"):
        with pytest.raises(PairingError) as caught:
            normalize_code(bad)
        assert str(caught.value) == "a pairing code is 8 letters and digits"
    assert channel_token("my-chan_1") == "my-chan_1"
    for bad in ("Tele gram", "", "-x", "a" * 65):
        with pytest.raises(PairingError) as caught:
            channel_token(bad)
        assert str(caught.value) == f"not a channel name: {bad!r}"
    assert (group_sender("-5"), is_group("group:-5"), is_group("5")) == ("group:-5", True, False)


async def test_a_request_holds_what_the_operator_decides_on(nc: NATS) -> None:
    store = await make_store(nc, ttl_s=600)
    before_ms = int(time.time() * 1000)
    asked = await store.ask(message("telegram", "7", "x" * 300, chat="c7"), "7")
    request = asked.request
    assert request is not None and asked.new and not asked.limited
    assert (request.channel, request.account, request.sender, request.chat_id) == (
        "telegram",
        "default",
        "7",
        "c7",
    )
    assert request.text == "x" * 200
    assert len(request.code) == 8 and set(request.code) <= set(ALPHABET)
    assert before_ms <= request.created_at_ms <= int(time.time() * 1000)
    assert request.expires_at_ms == request.created_at_ms + 600_000
    again = await store.ask(message("telegram", "7"), "7")
    assert (again.new, again.request) == (False, request)
    assert await store.requests("telegram") == [request]
    assert await store.requests("discord") == []


async def test_two_replicas_seeing_a_sender_at_once_make_one_request(nc: NATS) -> None:
    store = await make_store(nc)
    other = PairingStore(store.kv, ttl_s=3600, max_pending=3)
    first, second = await asyncio.gather(
        store.ask(message("telegram", "7"), "7"), other.ask(message("telegram", "7"), "7")
    )
    assert sorted([first.new, second.new]) == [False, True]
    assert first.request is not None and second.request is not None
    assert first.request.code == second.request.code
    assert len(await store.requests()) == 1


async def test_a_sender_asking_again_at_the_limit_keeps_its_request(nc: NATS) -> None:
    store = await make_store(nc, max_pending=1)
    first = await store.ask(message("telegram", "7"), "7")
    again = await store.ask(message("telegram", "7"), "7")
    assert (again.request, again.new, again.limited) == (first.request, False, False)


async def test_the_pending_limit_is_per_channel(nc: NATS) -> None:
    store = await make_store(nc, max_pending=2)
    for sender in ("1", "2"):
        assert (await store.ask(message("telegram", sender), sender)).new
    limited = await store.ask(message("telegram", "3"), "3")
    assert (limited.request, limited.new, limited.limited) == (None, False, True)
    assert (await store.ask(message("discord", "3"), "3")).new
    listed = await store.requests()
    assert [r.sender for r in listed] == ["1", "2", "3"]  # oldest first, every channel


async def test_an_expired_request_is_gone_and_the_sender_gets_a_new_code(nc: NATS) -> None:
    store = await make_store(nc, ttl_s=0.5)
    old = (await store.ask(message("telegram", "7"), "7")).request
    assert old is not None
    deadline = time.monotonic() + EXPIRY_BOUND_S
    while await store.requests("telegram"):
        assert time.monotonic() < deadline, "the request never expired"
        await asyncio.sleep(0.1)
    with pytest.raises(NotFound):
        await store.approve("telegram", old.code, by="op")
    fresh = await store.ask(message("telegram", "7"), "7")
    assert fresh.new and fresh.request is not None and fresh.request.code != old.code


async def test_approval_gives_the_role_and_ends_the_request(nc: NATS) -> None:
    store = await make_store(nc)
    codes = {}
    for who in ("7", "8", group_sender("-5")):
        request = (await store.ask(message("telegram", who), who)).request
        assert request is not None
        codes[who] = request.code
    with pytest.raises(PairingError) as caught:
        await store.approve("telegram", codes["group:-5"], by="op", owner=True)
    assert str(caught.value) == ("a group cannot be approved as an owner: approve it without owner")
    approved_from = int(time.time() * 1000)
    user = await store.approve("telegram", codes["7"], by="op")
    owner = await store.approve("telegram", codes["8"].lower(), by="boss", owner=True)
    member = await store.approve("telegram", codes["group:-5"], by="op")
    assert [(p.sender, p.role, p.approved_by) for p in (user, owner, member)] == [
        ("7", "user", "op"),
        ("8", "owner", "boss"),
        ("group:-5", "member", "op"),
    ]
    assert {p.channel for p in (user, owner, member)} == {"telegram"}
    assert approved_from <= user.approved_at_ms <= owner.approved_at_ms <= int(time.time() * 1000)
    assert await store.requests() == []
    assert [p.sender for p in await store.paired("telegram")] == ["7", "8", "group:-5"]
    # Approvals are kept under a hash of the sender id: the same key across versions.
    digest = hashlib.sha256(b"7").hexdigest()[:32]
    assert (await store.kv.get(f"paired.telegram.{digest}")).value == user.SerializeToString()
    assert await store.paired("discord") == []
    other = (await store.ask(message("discord", "9"), "9")).request
    assert other is not None
    await store.approve("discord", other.code, by="op")
    assert [p.sender for p in await store.paired()] == ["7", "8", "group:-5", "9"]
    assert await store.paired_sender("telegram", "8") == owner
    assert await store.is_paired("telegram", "7")
    assert not await store.is_paired("discord", "7")
    with pytest.raises(NotFound) as missing:
        await store.approve("telegram", codes["7"], by="op")
    assert str(missing.value) == f"no pending pairing request {codes['7']!r} on telegram"


async def test_deny_drops_the_request_and_revoke_the_approval(nc: NATS) -> None:
    store = await make_store(nc)
    request = (await store.ask(message("slack", "a.b c"), "a.b c")).request
    assert request is not None
    assert await store.deny("slack", request.code) == request
    assert await store.requests() == []
    with pytest.raises(NotFound) as denied:
        await store.deny("slack", request.code)
    assert str(denied.value) == f"no pending pairing request {request.code!r} on slack"
    again = (await store.ask(message("slack", "a.b c"), "a.b c")).request
    assert again is not None and again.code != request.code  # denied: a new request, new code
    paired = await store.approve("slack", again.code, by="op")
    assert await store.revoke("slack", "a.b c") == paired
    assert not await store.is_paired("slack", "a.b c")
    with pytest.raises(NotFound) as gone:
        await store.revoke("slack", "a.b c")
    assert str(gone.value) == "'a.b c' is not paired on slack"
