"""Trust per account, against a real nats-server and the router's own RouterAdmin: a channel
with two bots (or two Slack workspaces) keeps each account's allowlists, group lists and
pairings apart (docs/trust.md "Several accounts"). Before, every list and approval held for
every account of the channel: a sender paired on one bot reached the agent through all."""

from __future__ import annotations

import json

import grpc
import pytest

from switchboard.v1 import messages_pb2, router_pb2

from .router_harness import dm, group, refused, route, router


def on(account: str, message: messages_pb2.InboundMessage) -> messages_pb2.InboundMessage:
    message.account = account
    return message


SECURITY = {
    "telegram": {
        "allow_from": ["42"],
        "groups": ["-1"],
        "accounts": {"family": {"allow_from": ["43"], "groups": ["-2"]}},
    }
}


async def test_an_accounts_own_lists_replace_the_channels(nats_url: str) -> None:
    before = refused("telegram", "not_allowed")
    settings = {"SB_DM_POLICY": "allowlist", "SB_CHANNEL_SECURITY": json.dumps(SECURITY)}
    async with router(nats_url, **settings) as r:
        reached = await route(
            r.js,
            dm("telegram", "42", "d-42"),  # the channel's list: the default bot
            dm("telegram", "43", "d-43"),  # listed for the family bot only
            on("family", dm("telegram", "43", "f-43")),
            on("family", dm("telegram", "42", "f-42")),  # the family bot's list replaces it
            on("work", dm("telegram", "42", "w-42")),  # no entry of its own: the channel's
            on("work", dm("telegram", "43", "w-43")),
            group("telegram", "g-1", True, sender="42", chat="-1"),
            group("telegram", "g-2", True, sender="42", chat="-2"),
            on("family", group("telegram", "fg-2", True, sender="43", chat="-2")),
            on("family", group("telegram", "fg-1", True, sender="43", chat="-1")),
        )
    assert reached == {"d-42", "f-43", "w-42", "g-1", "fg-2"}
    assert refused("telegram", "not_allowed") == before + 3


async def test_a_pairing_admits_on_its_own_account_only(nats_url: str) -> None:
    async with router(nats_url) as r:  # DM policy pairing, the default
        assert await route(r.js, on("family", dm("telegram", "555", "f1"))) == set()
        [request] = (await r.admin.ListPairing(router_pb2.ListPairingRequest())).requests
        assert (request.account, request.sender) == ("family", "555")
        paired = await r.admin.Approve(
            router_pb2.PairingDecision(channel="telegram", code=request.code, decided_by="ops")
        )
        assert (paired.account, paired.sender) == ("family", "555")
        assert await route(r.js, on("family", dm("telegram", "555", "f2"))) == {"f2"}

        # The default bot does not know 555: a request of its own, its own code.
        assert await route(r.js, dm("telegram", "555", "d1")) == {"f2"}
        [other] = (await r.admin.ListPairing(router_pb2.ListPairingRequest())).requests
        assert (other.account, other.sender) == ("default", "555")
        assert other.code != request.code

        # Revoked on the account it was approved on; the default account has nothing to revoke.
        with pytest.raises(grpc.aio.AioRpcError) as missing:
            await r.admin.Revoke(router_pb2.RevokeRequest(channel="telegram", sender="555"))
        assert missing.value.code() == grpc.StatusCode.NOT_FOUND
        revoked = await r.admin.Revoke(
            router_pb2.RevokeRequest(channel="telegram", sender="555", account="family")
        )
        assert revoked.account == "family"
        assert await route(r.js, on("family", dm("telegram", "555", "f3"))) == {"f2"}


async def test_a_group_paired_on_one_bot_is_unknown_to_the_other(nats_url: str) -> None:
    async with router(nats_url, SB_GROUP_POLICY="pairing") as r:
        message = on("family", group("telegram", "fg1", True, sender="43", chat="-7"))
        assert await route(r.js, message) == set()
        [request] = (await r.admin.ListPairing(router_pb2.ListPairingRequest())).requests
        assert (request.account, request.sender) == ("family", "group:-7")
        await r.admin.Approve(router_pb2.PairingDecision(channel="telegram", code=request.code))
        again = on("family", group("telegram", "fg2", True, sender="43", chat="-7"))
        assert await route(r.js, again) == {"fg2"}
        elsewhere = group("telegram", "dg1", True, sender="43", chat="-7")
        assert await route(r.js, elsewhere) == {"fg2"}
