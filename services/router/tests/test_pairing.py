"""DM pairing against a real nats-server and the router's own gRPC RouterAdmin: an unknown
sender gets one code (an OUTBOUND part to its chat) and no run; after approval its next message
runs; deny, revoke, expiry and the pending limit."""

from __future__ import annotations

import time

import grpc
import pytest
from nats.js import JetStreamContext

from switchboard import bus
from switchboard.v1 import messages_pb2, router_pb2, router_pb2_grpc
from tests.support.streams import stored as stream_messages

from .router_harness import dm, eventually, refused, route, router

SUBJECTS = bus.Subjects()


async def codes_sent(js: JetStreamContext) -> list[messages_pb2.OutboundMessage]:
    """Every part on OUTBOUND (the router publishes nothing else there)."""
    found = await stream_messages(js, SUBJECTS.stream("OUTBOUND"), messages_pb2.OutboundMessage)
    return [s.message for s in found]


async def test_unknown_sender_gets_one_code_and_runs_after_approval(nats_url: str) -> None:
    before = refused("telegram", "pairing_required")
    async with router(nats_url) as r:
        assert await route(r.js, dm("telegram", "555", "m1")) == set()
        assert await route(r.js, dm("telegram", "555", "m2")) == set()  # asks again: no new code
        [part] = await codes_sent(r.js)
        listed = (await r.admin.ListPairing(router_pb2.ListPairingRequest())).requests
        assert [(p.channel, p.sender, p.chat_id) for p in listed] == [("telegram", "555", "555")]
        code = listed[0].code
        assert code in part.text
        assert (part.channel, part.account, part.chat.id) == ("telegram", "default", "555")
        assert refused("telegram", "pairing_required") == before + 2

        paired = await r.admin.Approve(
            router_pb2.PairingDecision(channel="telegram", code=code.lower(), decided_by="ops")
        )
        assert (paired.sender, paired.approved_by) == ("555", "ops")
        assert await route(r.js, dm("telegram", "555", "m3")) == {"m3"}
        assert (await r.admin.ListPairing(router_pb2.ListPairingRequest())).requests == []
        senders = (await r.admin.ListPaired(router_pb2.ListPairingRequest())).senders
        assert [s.sender for s in senders] == ["555"]
        # the approval is per channel: the same id elsewhere is a stranger
        # (route returns everything that ever reached a lane: m3 only)
        assert await route(r.js, dm("slack", "555", "s1")) == {"m3"}

        await r.admin.Revoke(router_pb2.RevokeRequest(channel="telegram", sender="555"))
        assert await route(r.js, dm("telegram", "555", "m4")) == {"m3"}
        assert len(await codes_sent(r.js)) == 3  # telegram, slack, telegram again


async def test_denied_request_is_dropped_and_the_sender_stays_refused(nats_url: str) -> None:
    async with router(nats_url) as r:
        await route(r.js, dm("telegram", "777", "d1"))
        [request] = (await r.admin.ListPairing(router_pb2.ListPairingRequest())).requests
        denied = await r.admin.Deny(
            router_pb2.PairingDecision(channel="telegram", code=request.code)
        )
        assert denied.sender == "777"
        assert (await r.admin.ListPairing(router_pb2.ListPairingRequest())).requests == []
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await r.admin.Approve(router_pb2.PairingDecision(channel="telegram", code=request.code))
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
        assert await route(r.js, dm("telegram", "777", "d2")) == set()
        [again] = (await r.admin.ListPairing(router_pb2.ListPairingRequest())).requests
        assert again.code != request.code


@pytest.mark.parametrize(
    ("channel", "code"),
    [("telegram", "short"), ("Tele gram", "ABCDEFGH"), ("telegram", "0OIL1234")],
)
async def test_malformed_decisions_are_invalid_arguments(
    nats_url: str, channel: str, code: str
) -> None:
    async with router(nats_url) as r:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await r.admin.Approve(router_pb2.PairingDecision(channel=channel, code=code))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_an_expired_code_is_gone_and_the_next_message_gets_a_new_one(
    nats_url: str,
) -> None:
    async with router(nats_url, SB_PAIRING_TTL_S="1") as r:
        await route(r.js, dm("telegram", "888", "e1"))
        [first] = (await r.admin.ListPairing(router_pb2.ListPairingRequest())).requests

        async def expired() -> bool:
            # Past its expiry by the clock first: a listing alone once came back empty while
            # the request still had its second to live (the KV key listing under load).
            if time.time() * 1000 <= first.expires_at_ms:
                return False
            listed = await r.admin.ListPairing(router_pb2.ListPairingRequest())
            return not listed.requests

        await eventually(expired)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await r.admin.Approve(router_pb2.PairingDecision(channel="telegram", code=first.code))
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
        await route(r.js, dm("telegram", "888", "e2"))
        [second] = (await r.admin.ListPairing(router_pb2.ListPairingRequest())).requests
        assert second.code != first.code
        assert len(await codes_sent(r.js)) == 2


async def test_past_the_pending_limit_no_code_is_issued(nats_url: str) -> None:
    before = refused("telegram", "pairing_limit")
    async with router(nats_url, SB_PAIRING_MAX_PENDING="1") as r:
        assert await route(r.js, dm("telegram", "1", "l1")) == set()
        assert await route(r.js, dm("telegram", "2", "l2")) == set()
        listed = (await r.admin.ListPairing(router_pb2.ListPairingRequest())).requests
        assert [p.sender for p in listed] == ["1"]
        assert len(await codes_sent(r.js)) == 1
    assert refused("telegram", "pairing_limit") == before + 1


async def test_admin_calls_need_the_service_token(nats_url: str) -> None:
    async with router(nats_url) as r:
        target = r.admin_target
        channel = grpc.aio.insecure_channel(target)
        try:
            stub = router_pb2_grpc.RouterAdminStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.ListPairing(router_pb2.ListPairingRequest())
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        finally:
            await channel.close()
