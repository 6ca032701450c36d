"""``/approve <id>`` and ``/deny <id>`` typed in a chat, against a real nats-server and the
router in-process: an admitted sender's command becomes a ``ChatDecision`` request (answered
here by a stand-in agent) and a reply part to its chat, never a lane item; a refused sender's
command asks nothing; a command without an id gets the usage."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import nats
import pytest
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from switchboard import bus
from switchboard.v1 import approvals_pb2, messages_pb2
from switchboard_router.chat_commands import USAGE, Command, Malformed, parse
from tests.support.streams import stored as stream_messages

from .router_harness import dm, group, route, router

SUBJECTS = bus.Subjects()
Answer = Callable[[approvals_pb2.ChatDecision], approvals_pb2.ChatDecisionResult]


class StandInAgent:
    """Answers sb.approvals.decide as the agent would, recording what it was asked."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.requests: list[approvals_pb2.ChatDecision] = []

    async def handle(self, msg: Msg) -> None:
        request = approvals_pb2.ChatDecision.FromString(msg.data)
        self.requests.append(request)
        await msg.respond(self.answer(request).SerializeToString())


def approving(request: approvals_pb2.ChatDecision) -> approvals_pb2.ChatDecisionResult:
    status = "approved" if request.approve else "denied"
    return approvals_pb2.ChatDecisionResult(
        outcome="decided", approval_id="ap_3f9a2c1b00", status=status, tool="exec"
    )


@pytest.fixture
async def agent_nc(nats_url: str) -> AsyncIterator[NATS]:
    nc: NATS = await nats.connect(nats_url)
    yield nc
    await nc.close()


async def stand_in(nc: NATS, answer: Answer = approving) -> StandInAgent:
    agent = StandInAgent(answer)
    await nc.subscribe(SUBJECTS.approvals_decide(), queue="agent-approvals", cb=agent.handle)
    await nc.flush()
    return agent


async def replies(js: JetStreamContext) -> list[tuple[str, messages_pb2.OutboundMessage]]:
    """(Nats-Msg-Id, part) of every part on OUTBOUND."""
    found = await stream_messages(js, SUBJECTS.stream("OUTBOUND"), messages_pb2.OutboundMessage)
    return [(s.msg_id, s.message) for s in found]


def command(text: str, sender: str = "555", message_id: str = "c1") -> messages_pb2.InboundMessage:
    msg = dm("telegram", sender, message_id)
    msg.text = text
    msg.thread_id = "th-1"
    return msg


async def test_an_admitted_command_asks_the_agents_and_never_reaches_a_lane(
    nats_url: str, agent_nc: NATS
) -> None:
    agent = await stand_in(agent_nc)
    async with router(nats_url, SB_DM_POLICY="open") as r:
        sent = [
            command("/approve 3f9a2c1b", message_id="c1"),
            command("/DENY@switchboard_bot ap_3F9A2C1B  not now, thanks", message_id="c2"),
        ]
        assert await route(r.js, *sent) == set()
        first, second = agent.requests
        assert (first.approval_id, first.approve, first.reason) == ("3f9a2c1b", True, "")
        assert (first.sender, first.session_key) == ("telegram:555", "main:telegram:555")
        assert (second.approval_id, second.approve) == ("ap_3F9A2C1B", False)
        assert second.reason == "not now, thanks"
        (id1, p1), (id2, p2) = await replies(r.js)
        assert id2 == "command:telegram:default:c2:0"
        assert id1 == "command:telegram:default:c1:0"
        assert (p1.channel, p1.chat.id, p1.thread_id) == ("telegram", "555", "th-1")
        assert p1.text == "Approved: the call to exec (3f9a2c1b)."
        assert p2.text == "Denied: the call to exec (ap_3F9A2C1B)."
        # A message that only starts like a command is an ordinary message.
        assert await route(r.js, command("/approved, thanks!", message_id="c3")) == {"c3"}
        assert len(agent.requests) == 2


async def test_in_a_group_the_session_is_the_groups(nats_url: str, agent_nc: NATS) -> None:
    agent = await stand_in(agent_nc)
    # an admitted group; activation "mention": the bot is mentioned
    async with router(nats_url, SB_SLACK_GROUPS='["C9"]') as r:
        msg = group("slack", "g1", mentions_bot=True)
        msg.text = "@switchboard /approve abcdef12"
        assert await route(r.js, msg) == set()
        [request] = agent.requests
        assert (request.sender, request.session_key) == ("slack:U1", "main:slack:group:C9")
        [(_, part)] = await replies(r.js)
        assert part.chat.id == "C9" and part.text.startswith("Approved")


async def test_a_refused_sender_decides_nothing(nats_url: str, agent_nc: NATS) -> None:
    agent = await stand_in(agent_nc)
    async with router(nats_url) as r:  # DM policy "pairing": an unknown sender is refused
        assert await route(r.js, command("/approve 3f9a2c1b", sender="666")) == set()
        unmentioned = group("telegram", "g2", mentions_bot=False)
        unmentioned.text = "/approve 3f9a2c1b"
        assert await route(r.js, unmentioned) == set()
        assert agent.requests == []
        [(_, part)] = await replies(r.js)  # the pairing code, nothing else
        assert "pairing code" in part.text


@pytest.mark.parametrize("text", ["/approve", "/deny   ", "/approve now please", "/deny ap_"])
async def test_a_command_without_an_id_gets_the_usage(
    nats_url: str, agent_nc: NATS, text: str
) -> None:
    agent = await stand_in(agent_nc)
    async with router(nats_url, SB_DM_POLICY="open") as r:
        assert await route(r.js, command(text)) == set()
        [(_, part)] = await replies(r.js)
        assert part.text == USAGE and "/approve <id>" in part.text
        assert agent.requests == []


@pytest.mark.parametrize(
    ("outcome", "status", "says"),
    [
        ("not_allowed", "", "You may not decide this approval."),
        ("not_found", "", "There is no approval 3f9a2c1b."),
        ("already_decided", "expired", "That approval is already expired."),
        ("ambiguous", "", "3f9a2c1b matches more than one approval"),
        ("error", "", "could not be decided"),
    ],
)
async def test_the_agents_answer_goes_back_to_the_chat(
    nats_url: str, agent_nc: NATS, outcome: str, status: str, says: str
) -> None:
    await stand_in(
        agent_nc, lambda _: approvals_pb2.ChatDecisionResult(outcome=outcome, status=status)
    )
    async with router(nats_url, SB_DM_POLICY="open") as r:
        await route(r.js, command("/approve 3f9a2c1b"))
        [(_, part)] = await replies(r.js)
        assert says in part.text, part.text


async def test_without_an_agent_the_sender_is_told_to_retry(nats_url: str) -> None:
    async with router(nats_url, SB_DM_POLICY="open") as r:
        assert await route(r.js, command("/deny 3f9a2c1b")) == set()
        [(_, part)] = await replies(r.js)
        assert "cannot be decided right now" in part.text


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("/approve abcdef", Command(True, "abcdef", "")),
        (
            "  /Approve AP_ABCDEF12 because\nit is fine ",
            Command(True, "AP_ABCDEF12", "because\nit is fine"),
        ),
        ("@bot @other /deny abcdef12 no", Command(False, "abcdef12", "no")),
        ("/approve@my_bot abcdef12", Command(True, "abcdef12", "")),
        ("/approve abcde", Malformed("approve")),
        ("/deny", Malformed("deny")),
        ("/approve-all abcdef12", None),
        ("please /approve abcdef12", None),
        ("/approvex abcdef12", None),
        ("approve abcdef12", None),
        ("", None),
    ],
)
def test_parse(text: str, parsed: Command | Malformed | None) -> None:
    assert parse(text) == parsed
