"""Bindings, per-sender rate limits and debounce, against a real nats-server with the router
in-process (what reached the LANES stream is read back)."""

from __future__ import annotations

import json

import pytest
from nats.js import JetStreamContext

from switchboard import bus
from switchboard.v1 import messages_pb2
from switchboard_router.config import RouterSettings
from switchboard_router.ratelimit import RateLimiter
from tests.support.streams import stored as stream_messages

from .router_harness import dm, group, refused, route, router

SUBJECTS = bus.Subjects()


async def lane_items(js: JetStreamContext) -> list[messages_pb2.LaneItem]:
    found = await stream_messages(js, SUBJECTS.stream("LANES"), messages_pb2.LaneItem)
    return [s.message for s in found]


def test_a_bucket_refills_at_its_rate_and_holds_at_most_its_burst() -> None:
    now = [0.0]
    limiter = RateLimiter(per_minute=60, burst=2, clock=lambda: now[0])
    assert [limiter.allow("t", "a") for _ in range(3)] == [True, True, False]
    assert limiter.allow("t", "b")  # another sender has its own bucket
    now[0] += 1.0  # one token back
    assert [limiter.allow("t", "a") for _ in range(2)] == [True, False]
    now[0] += 3600.0  # never more than the burst
    assert [limiter.allow("t", "a") for _ in range(3)] == [True, True, False]
    assert RateLimiter(per_minute=0, burst=1).allow("t", "a")  # 0: no limit


async def test_a_sender_over_the_limit_is_refused_and_others_are_not(nats_url: str) -> None:
    before = refused("telegram", "rate_limited")
    env = {"SB_DM_POLICY": "open", "SB_RATE_LIMIT_PER_MINUTE": "0.01", "SB_RATE_LIMIT_BURST": "2"}
    async with router(nats_url, **env) as r:
        reached = await route(
            r.js,
            *(dm("telegram", "flood", f"f{i}") for i in range(4)),
            dm("telegram", "calm", "c1"),
            *(dm("api", "flood", f"a{i}") for i in range(4)),  # the gateway's own: no limit
        )
    flood = {"f0", "f1", "f2", "f3"}
    assert len(reached & flood) == 2  # the burst; which two is not fixed (handled concurrently)
    assert reached - flood == {"c1", "a0", "a1", "a2", "a3"}
    assert refused("telegram", "rate_limited") == before + 2


BINDINGS = [
    {"channel": "telegram", "agent": "tg"},
    {"channel": "telegram", "peer": "42", "agent": "vip"},
    {"channel": "slack", "group": "C9", "agent": "team"},
    {"channel": "slack", "account": "other", "agent": "acct"},
]


def test_the_most_specific_binding_wins() -> None:
    settings = RouterSettings.from_environ({"SB_BINDINGS": json.dumps(BINDINGS)})
    assert settings.agent_for("telegram", "default", "direct", "7") == "tg"
    assert settings.agent_for("telegram", "default", "direct", "42") == "vip"
    assert settings.agent_for("telegram", "default", "group", "42") == "tg"  # a peer is a DM
    assert settings.agent_for("slack", "default", "group", "C9") == "team"
    assert settings.agent_for("slack", "other", "group", "C8") == "acct"
    assert settings.agent_for("slack", "default", "direct", "U1") == "main"
    assert settings.agent_for("discord", "default", "direct", "U1") == "main"


async def test_messages_reach_the_bound_agents_lane(nats_url: str) -> None:
    env = {"SB_DM_POLICY": "open", "SB_GROUP_POLICY": "open", "SB_BINDINGS": json.dumps(BINDINGS)}
    async with router(nats_url, **env) as r:
        await route(
            r.js,
            dm("telegram", "7", "t7"),
            dm("telegram", "42", "t42"),
            group("slack", "s-c9", mentions_bot=True),
            dm("discord", "9", "d9"),
        )
        items = await lane_items(r.js)
    agents = {i.message.message_id: (i.agent, i.session_key.split(":")[0]) for i in items}
    assert agents == {
        "t7": ("tg", "tg"),
        "t42": ("vip", "vip"),
        "s-c9": ("team", "team"),
        "d9": ("main", "main"),
    }


@pytest.mark.parametrize("bad", ['[{"channel": "x"}]', '[{"channel": "x", "agent": "Bad Id"}]'])
def test_a_bad_binding_is_a_clear_error(bad: str) -> None:
    with pytest.raises(ValueError, match="bindings"):
        RouterSettings.from_environ({"SB_BINDINGS": bad})


async def test_a_burst_from_one_sender_becomes_one_lane_item(nats_url: str) -> None:
    env = {"SB_DM_POLICY": "open", "SB_DEBOUNCE_MS": "1500"}
    async with router(nats_url, **env) as r:
        parts = [dm("telegram", "5", f"b{i}") for i in range(3)]
        for i, part in enumerate(parts):
            part.text = f"part {i}"
        other = dm("telegram", "6", "o1")
        reached = await route(r.js, *parts, other)
        items = await lane_items(r.js)
    assert len(reached) == 2 and "o1" in reached
    [burst] = [i.message for i in items if i.message.sender == "5"]
    # every part, once (their order within the burst follows the concurrent handlers)
    assert sorted(burst.text.split("\n")) == ["part 0", "part 1", "part 2"]
    assert burst.message_id in {"b0", "b1", "b2"}
