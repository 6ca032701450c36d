"""Approvals decided with buttons (issue 29, part 4), every service a real process, the three
fake platforms speaking their real wire formats, on the default configuration plus one owner
and one allow-listed group per platform and an approval rule on ``get_time``: a call waiting
for approval in a group is announced with Approve and Deny buttons (and the typed commands as
a fallback); a member's click is refused and nothing runs; the owner's click approves it, the
tool runs and the reply comes, and the notice is updated to "Approved by <who>" with its
buttons gone; a second click says it is already decided; a Telegram click on an approval that
does not exist is answered and changes nothing; a Slack interactivity call with a bad signature
is 401 and decides nothing.

One system for the module; each test tags its messages and reads only its own."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.helpers import client, wait_for
from tests.e2e.trust_support import (
    WAIT_S,
    Chats,
    Platforms,
    call,
    calls_for,
    obedient,
    reply_in,
    running_system,
    settled,
    tag,
    workspaces_dir,
)
from tests.fakes.discord import Message
from tests.fakes.discord_rest import message_object
from tests.fakes.llm import FakeLLM
from tests.fakes.slack import Post, SlackEvents
from tests.fakes.slack_buttons import Ephemeral
from tests.fakes.telegram_buttons import CallbackAnswer
from tests.fakes.telegram_wire import Sent
from tests.support.services import ServiceProcesses

TG_OWNER, TG_MEMBER = 4242, 5151
TG_GROUP = -1002300001
SLACK_OWNER, SLACK_MEMBER, SLACK_GROUP = "U0OWNER", "U0MEMBER", "C0TEAM"
DISCORD_OWNER, DISCORD_MEMBER = "4100000000000000101", "4100000000000000102"
DISCORD_GUILD, DISCORD_GROUP = "4400000000000000001", "4200000000000000005"
NOT_ALLOWED = "You may not decide this approval."


@pytest.fixture(scope="module")
def platforms() -> Iterator[Platforms]:
    with Platforms() as fakes:
        yield fakes


@pytest.fixture(scope="module")
def system(
    tmp_path_factory: pytest.TempPathFactory,
    module_nats_url: str,
    module_database_url: str,
    platforms: Platforms,
) -> Iterator[ServiceProcesses]:
    env = {
        **platforms.env(),
        "SB_OWNERS": json.dumps(
            [f"telegram:{TG_OWNER}", f"slack:{SLACK_OWNER}", f"discord:{DISCORD_OWNER}"]
        ),
        "SB_TELEGRAM_GROUPS": json.dumps([str(TG_GROUP)]),
        "SB_SLACK_GROUPS": json.dumps([SLACK_GROUP]),
        "SB_DISCORD_GROUPS": json.dumps([DISCORD_GROUP]),
        "SB_TOOL_APPROVALS": '["get_time"]',
    }
    home: Path = tmp_path_factory.mktemp("chat-buttons")
    with (
        workspaces_dir() as workspaces,
        FakeLLM(obedient) as llm,
        running_system(home, module_nats_url, module_database_url, llm, workspaces, env) as procs,
    ):
        yield procs


@pytest.fixture
def chats(system: ServiceProcesses, platforms: Platforms) -> Chats:
    return Chats(system, platforms)


@pytest.fixture
def llm(system: ServiceProcesses) -> FakeLLM:
    model: FakeLLM = system.llm  # type: ignore[attr-defined]
    return model


def approval(system: ServiceProcesses, digits: str, status: str) -> dict[str, Any] | None:
    """The approval ``ap_<digits>`` when its status is ``status``."""
    with client(system.url, system.token) as c:
        r = c.get("/api/approvals", params={"status": status})
        assert r.status_code == 200, r.text
        found = [a for a in r.json()["approvals"] if a["id"] == f"ap_{digits}"]
    return found[0] if found else None


# --- Telegram ---------------------------------------------------------------------------------


def tg_click(chats: Chats, sent: Sent, sender: int, data: str) -> str:
    """``sender`` presses the button ``data`` under ``sent``: Telegram's callback_query update
    POSTed to the webhook. The query's id."""
    p = chats.p
    person = p.updates.user(sender, first_name=f"P{sender}", username=f"p{sender}")
    query = p.tg.buttons.click(sent, person, data)
    body, headers = p.updates.webhook(p.updates.update("callback_query", query))
    url = chats.services.url + "/channels/telegram/default"
    response = httpx.post(url, content=body, headers=headers, timeout=30)
    assert response.status_code == 200, response.text
    return str(query["id"])


def tg_answer(chats: Chats, query_id: str) -> CallbackAnswer:
    def find() -> CallbackAnswer | None:
        return next((a for a in chats.p.tg.buttons.answers if a.query_id == query_id), None)

    answer: CallbackAnswer = wait_for(find, WAIT_S, f"the answer to callback {query_id}")
    return answer


def test_telegram_buttons_decide_an_approval(
    system: ServiceProcesses, chats: Chats, llm: FakeLLM
) -> None:
    tg = chats.p.tg
    label = tag()
    seen = len(tg.sent_to(TG_GROUP))
    chats.telegram(f"[{label}] {call('get_time')}", TG_MEMBER, group=TG_GROUP)
    notices: list[Sent] = wait_for(
        lambda: [s for s in tg.sent_to(TG_GROUP)[seen:] if "reply_markup" in s.params],
        WAIT_S,
        "the notice with its buttons",
    )
    notice = notices[0]
    [[approve, deny]] = notice.params["reply_markup"]["inline_keyboard"]
    assert (approve["text"], deny["text"]) == ("Approve", "Deny")
    found = re.fullmatch(r"ap:([0-9a-f]{20}):y", approve["callback_data"])
    assert found, approve
    digits = found.group(1)
    assert deny["callback_data"] == f"ap:{digits}:n"
    assert f"/approve {digits[:8]}" in notice.text  # the typed fallback
    wait_for(lambda: approval(system, digits, "awaiting_approval"), WAIT_S, "the approval")

    # A member of the group presses Approve: told they may not, nothing changes or runs.
    edits = len(tg.buttons.edits)
    refused = tg_answer(chats, tg_click(chats, notice, TG_MEMBER, approve["callback_data"]))
    assert refused.text == NOT_ALLOWED
    assert approval(system, digits, "awaiting_approval") is not None
    assert len(calls_for(llm, label)) == 1
    assert len(tg.buttons.edits) == edits and tg.buttons.keyboard(notice) is not None

    # The owner presses Approve: decided as theirs, the tool runs, the notice says so.
    done = tg_answer(chats, tg_click(chats, notice, TG_OWNER, approve["callback_data"]))
    assert done.text == f"Approved: the call to get_time ({digits})."
    reply = reply_in(lambda: [s.text for s in tg.sent_to(TG_GROUP)], label, "the run's reply")
    assert "RESULTS" in reply, reply
    decided = approval(system, digits, "approved")
    assert decided is not None and decided["decided_by"] == f"telegram:{TG_OWNER}"
    [edit] = tg.buttons.edits[edits:]
    assert (edit.chat_id, edit.message_id) == (TG_GROUP, notice.message_id)
    assert edit.text.startswith(notice.text.rstrip())
    assert edit.text.endswith(f"Approved by P{TG_OWNER}")
    assert tg.buttons.keyboard(notice) is None  # the buttons are gone

    # A second press (Deny, by the owner): already decided, nothing changes.
    again = tg_answer(chats, tg_click(chats, notice, TG_OWNER, deny["callback_data"]))
    assert again.text == "That approval is already approved."
    assert len(tg.buttons.edits) == edits + 1

    # A press naming an approval that does not exist: answered, harmless.
    calls = len(llm.calls)
    unknown = tg_answer(chats, tg_click(chats, notice, TG_OWNER, "ap:" + "f" * 20 + ":y"))
    assert unknown.text == f"There is no approval {'f' * 20}."
    assert len(tg.buttons.edits) == edits + 1
    settled(system)
    assert len(llm.calls) == calls


# --- Slack ------------------------------------------------------------------------------------


def slack_click(
    chats: Chats, post: Post, user: str, action: str, sign: bool = True, stale: bool = False
) -> int:
    """``user`` presses the button ``action`` of ``post`` (``stale``: as it was posted):
    Slack's signed interactivity call (``sign=False``: signed with another secret). The
    gateway's status."""
    p = chats.p
    payload = p.slack.buttons.click_payload(post, user, action, p.events.team_id, stale)
    signer = p.events if sign else SlackEvents(secret="not-the-signing-secret")
    body, headers = p.slack.buttons.request(signer, payload)
    url = chats.services.url + "/channels/slack/default"
    return httpx.post(url, content=body, headers=headers, timeout=30).status_code


def ephemeral_to(chats: Chats, user: str, seen: int) -> Ephemeral:
    found: list[Ephemeral] = wait_for(
        lambda: [e for e in chats.p.slack.buttons.ephemerals[seen:] if e.user == user],
        WAIT_S,
        f"the message to {user} alone",
    )
    return found[0]


def test_slack_buttons_decide_an_approval(
    system: ServiceProcesses, chats: Chats, llm: FakeLLM
) -> None:
    slack = chats.p.slack
    label = tag()
    seen = len(slack.posts)
    chats.slack(f"[{label}] {call('get_time')}", SLACK_MEMBER, SLACK_GROUP)
    notices: list[Post] = wait_for(
        lambda: [p for p in slack.posts[seen:] if p.blocks and p.channel == SLACK_GROUP],
        WAIT_S,
        "the notice with its buttons",
    )
    notice = notices[0]
    section, actions = notice.blocks or []
    assert section["type"] == "section" and section["text"]["text"] == notice.text
    approve, deny = actions["elements"]
    assert (approve["action_id"], approve["text"]["text"]) == ("sb_approve", "Approve")
    assert (deny["action_id"], deny["style"]) == ("sb_deny", "danger")
    found = re.fullmatch(r"ap:([0-9a-f]{20}):y", approve["value"])
    assert found, approve
    digits = found.group(1)
    assert f"/approve {digits[:8]}" in notice.text  # the typed fallback
    wait_for(lambda: approval(system, digits, "awaiting_approval"), WAIT_S, "the approval")

    # A member presses Approve: told so alone, in the notice's thread; nothing changes.
    ephemerals = len(slack.buttons.ephemerals)
    assert slack_click(chats, notice, SLACK_MEMBER, "sb_approve") == 200
    refused = ephemeral_to(chats, SLACK_MEMBER, ephemerals)
    assert (refused.text, refused.channel) == (NOT_ALLOWED, SLACK_GROUP)
    assert refused.thread_ts == notice.thread_ts
    # The owner's press with a bad signature: 401, and nothing is decided.
    assert slack_click(chats, notice, SLACK_OWNER, "sb_approve", sign=False) == 401
    assert approval(system, digits, "awaiting_approval") is not None
    assert len(calls_for(llm, label)) == 1 and slack.buttons.updates == []

    # The owner presses Approve: decided as theirs, the tool runs, the notice says so.
    assert slack_click(chats, notice, SLACK_OWNER, "sb_approve") == 200
    texts = lambda: [p.text for p in slack.posts if p.channel == SLACK_GROUP]  # noqa: E731
    reply = reply_in(texts, label, "the run's reply")
    assert "RESULTS" in reply, reply
    decided = approval(system, digits, "approved")
    assert decided is not None and decided["decided_by"] == f"slack:{SLACK_OWNER}"
    [update] = wait_for(lambda: slack.buttons.updates, WAIT_S, "the notice's update")
    assert (update.channel, update.ts) == (SLACK_GROUP, notice.ts)
    assert update.text.startswith(notice.text.rstrip())
    assert update.text.endswith(f"Approved by {SLACK_OWNER.lower()}")
    assert [b["type"] for b in update.blocks or []] == ["section", "context"]  # no buttons

    # A second press, on a screen still showing the buttons (Deny): already decided.
    ephemerals = len(slack.buttons.ephemerals)
    assert slack_click(chats, notice, SLACK_OWNER, "sb_deny", stale=True) == 200
    again = ephemeral_to(chats, SLACK_OWNER, ephemerals)
    assert again.text == "That approval is already approved."
    assert len(slack.buttons.updates) == 1
    settled(system)


# --- Discord ----------------------------------------------------------------------------------


def discord_click(
    chats: Chats, message: dict[str, Any], custom_id: str, user_id: str, name: str
) -> str:
    """``user_id`` (shown as ``name``) presses the button ``custom_id`` under ``message`` in
    the group: Discord's signed MESSAGE_COMPONENT interaction, answered with a deferred update.
    The interaction's token."""
    discord = chats.p.discord
    payload = discord.interactions.click(
        message, custom_id, user_id=user_id, guild_id=DISCORD_GUILD
    )
    payload["member"]["user"]["global_name"] = name
    url = chats.services.url + "/channels/discord/default"
    response = discord.send_interaction(url, payload)
    assert response.status_code == 200, response.text
    assert response.json() == {"type": 6}
    return str(payload["token"])


def followup_of(chats: Chats, token: str) -> Message:
    discord = chats.p.discord
    found: list[Message] = wait_for(
        lambda: discord.interaction(token).followups, WAIT_S, "the follow-up to the clicker"
    )
    return found[0]


def test_discord_buttons_decide_an_approval(
    system: ServiceProcesses, chats: Chats, llm: FakeLLM
) -> None:
    discord = chats.p.discord
    label = tag()
    seen = len(discord.messages_in(DISCORD_GROUP))
    chats.discord(f"[{label}] {call('get_time')}", DISCORD_MEMBER, DISCORD_GROUP, DISCORD_GUILD)
    notices: list[Message] = wait_for(
        lambda: [m for m in discord.messages_in(DISCORD_GROUP)[seen:] if m.components],
        WAIT_S,
        "the notice with its buttons",
    )
    notice = notices[0]
    [row] = notice.components
    approve, deny = row["components"]
    assert row["type"] == 1 and (approve["type"], approve["label"]) == (2, "Approve")
    assert (approve["style"], deny["style"], deny["label"]) == (3, 4, "Deny")
    found = re.fullmatch(r"ap:([0-9a-f]{20}):y", approve["custom_id"])
    assert found, approve
    digits = found.group(1)
    assert deny["custom_id"] == f"ap:{digits}:n"
    assert f"/approve {digits[:8]}" in notice.content  # the typed fallback
    wait_for(lambda: approval(system, digits, "awaiting_approval"), WAIT_S, "the approval")
    shown = message_object(notice, discord.bot_id)

    # A member presses Approve: an ephemeral follow-up only they see; nothing changes.
    token = discord_click(chats, shown, approve["custom_id"], DISCORD_MEMBER, "Mel Member")
    refused = followup_of(chats, token)
    assert (refused.content, refused.flags) == (NOT_ALLOWED, 64)
    assert approval(system, digits, "awaiting_approval") is not None
    assert len(calls_for(llm, label)) == 1
    [now] = [m for m in discord.messages_in(DISCORD_GROUP) if m.id == notice.id]
    assert now.edits == 0 and now.components

    # The owner presses Approve: decided as theirs, the tool runs, the notice says so.
    discord_click(chats, shown, approve["custom_id"], DISCORD_OWNER, "Olive Owner")
    reply = reply_in(lambda: chats.discord_texts(DISCORD_GROUP), label, "the run's reply")
    assert "RESULTS" in reply, reply
    decided = approval(system, digits, "approved")
    assert decided is not None and decided["decided_by"] == f"discord:{DISCORD_OWNER}"

    def edited() -> Message | None:
        latest = [m for m in discord.messages_in(DISCORD_GROUP) if m.id == notice.id]
        return latest[0] if latest and latest[0].edits else None

    done: Message = wait_for(edited, WAIT_S, "the notice's edit")
    assert done.content.startswith(notice.content.rstrip())
    assert done.content.endswith("**Approved by Olive Owner**")
    assert done.components == []  # the buttons are gone

    # A second press on a screen still showing the buttons (Deny): already decided.
    token = discord_click(chats, shown, deny["custom_id"], DISCORD_OWNER, "Olive Owner")
    again = followup_of(chats, token)
    assert (again.content, again.flags) == ("That approval is already approved.", 64)
    assert edited() == done
    settled(system)
