"""Groups are closed by default (docs/trust.md), against a real nats-server with the router
in-process: the group policies and the in-group sender allowlist, each refusal counted; group
pairing end to end through the router's own gRPC RouterAdmin (a code posted into the group
once, only for a message that would run; approval admits the group; revoke closes it)."""

from __future__ import annotations

import grpc
import pytest
from nats.js import JetStreamContext

from switchboard import bus
from switchboard.v1 import messages_pb2, router_pb2
from tests.support.streams import stored as stream_messages

from .router_harness import dm, group, refused, route, router

SUBJECTS = bus.Subjects()


async def codes_sent(js: JetStreamContext) -> list[messages_pb2.OutboundMessage]:
    """Every part on OUTBOUND (the router publishes nothing else there)."""
    found = await stream_messages(js, SUBJECTS.stream("OUTBOUND"), messages_pb2.OutboundMessage)
    return [s.message for s in found]


async def test_by_default_only_listed_groups_reach_the_agent(nats_url: str) -> None:
    before = refused("telegram", "group_not_allowed")
    async with router(nats_url, SB_TELEGRAM_GROUPS='["-100"]') as r:
        reached = await route(
            r.js,
            group("telegram", "listed", True, chat="-100"),
            group("telegram", "stranger", True, chat="-666"),
            group("slack", "other-channel", True, chat="-100"),  # the list is per channel
        )
        assert await codes_sent(r.js) == []  # allowlist: no pairing code for anyone
    assert reached == {"listed"}
    assert refused("telegram", "group_not_allowed") == before + 1


async def test_open_admits_every_group_and_the_sender_allowlist_still_applies(
    nats_url: str,
) -> None:
    before = refused("discord", "sender_not_allowed")
    env = {
        "SB_DISCORD_GROUP_POLICY": "open",
        "SB_DISCORD_GROUP_ALLOW_FROM": '["7"]',
        "SB_OWNERS": '["discord:1"]',
    }
    async with router(nats_url, **env) as r:
        reached = await route(
            r.js,
            group("discord", "allowed", True, sender="7", chat="G1"),
            group("discord", "other-member", True, sender="8", chat="G1"),
            group("discord", "owner", True, sender="1", chat="G2"),  # owners always may
        )
    assert reached == {"allowed", "owner"}
    assert refused("discord", "sender_not_allowed") == before + 1


async def test_a_group_pairs_like_a_dm_and_the_code_goes_into_the_group(nats_url: str) -> None:
    before = refused("telegram", "group_pairing_required")
    env = {"SB_TELEGRAM_GROUP_POLICY": "pairing", "SB_TELEGRAM_GROUP_ALLOW_FROM": '["7", "8"]'}
    async with router(nats_url, **env) as r:
        # Chatter, and a message from someone the allowlist does not hear, ask nothing.
        assert await route(r.js, group("telegram", "g1", False, sender="7", chat="-42")) == set()
        assert await route(r.js, group("telegram", "g2", True, sender="9", chat="-42")) == set()
        assert await codes_sent(r.js) == []
        assert (await r.admin.ListPairing(router_pb2.ListPairingRequest())).requests == []
        # A message that would run asks, once per pending request.
        assert await route(r.js, group("telegram", "g3", True, sender="7", chat="-42")) == set()
        assert await route(r.js, group("telegram", "g4", True, sender="8", chat="-42")) == set()
        [part] = await codes_sent(r.js)
        [request] = (await r.admin.ListPairing(router_pb2.ListPairingRequest())).requests
        assert (request.sender, request.chat_id) == ("group:-42", "-42")
        assert (part.chat.id, part.chat.type) == ("-42", "group")
        assert request.code in part.text and "group" in part.text
        assert refused("telegram", "group_pairing_required") == before + 4

        with pytest.raises(grpc.aio.AioRpcError) as err:  # a group is never an owner
            await r.admin.Approve(
                router_pb2.PairingDecision(channel="telegram", code=request.code, owner=True)
            )
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        paired = await r.admin.Approve(
            router_pb2.PairingDecision(channel="telegram", code=request.code, decided_by="ops")
        )
        assert (paired.sender, paired.role, paired.approved_by) == ("group:-42", "member", "ops")

        reached = await route(
            r.js,
            group("telegram", "g5", True, sender="7", chat="-42"),
            group("telegram", "g6", True, sender="9", chat="-42"),  # still not heard there
            group("telegram", "g7", True, sender="7", chat="-43"),  # another group: asks
            dm("telegram", "7", "d1"),  # the group's approval admits no DM
        )
        assert reached == {"g5"}
        listed = (await r.admin.ListPairing(router_pb2.ListPairingRequest())).requests
        assert {q.sender for q in listed} == {"group:-43", "7"}

        await r.admin.Revoke(router_pb2.RevokeRequest(channel="telegram", sender="group:-42"))
        assert await route(r.js, group("telegram", "g8", True, sender="7", chat="-42")) == {"g5"}


async def test_a_paired_dm_sender_does_not_open_a_group(nats_url: str) -> None:
    async with router(nats_url, SB_GROUP_POLICY="pairing") as r:
        await route(r.js, dm("slack", "U1", "d1"))
        [request] = (await r.admin.ListPairing(router_pb2.ListPairingRequest())).requests
        await r.admin.Approve(router_pb2.PairingDecision(channel="slack", code=request.code))
        reached = await route(r.js, dm("slack", "U1", "d2"), group("slack", "g1", True))
        assert reached == {"d2"}
        [asked] = (await r.admin.ListPairing(router_pb2.ListPairingRequest())).requests
        assert asked.sender == "group:C9"


async def test_group_requests_count_against_the_pending_limit(nats_url: str) -> None:
    before = refused("telegram", "pairing_limit")
    env = {"SB_GROUP_POLICY": "pairing", "SB_PAIRING_MAX_PENDING": "1"}
    async with router(nats_url, **env) as r:
        await route(r.js, group("telegram", "g1", True, chat="-1"))
        assert await route(r.js, group("telegram", "g2", True, chat="-2")) == set()
        assert len(await codes_sent(r.js)) == 1
    assert refused("telegram", "pairing_limit") == before + 1
