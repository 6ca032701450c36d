"""Slack's buttons for approvals (docs/chat-approvals.md): Block Kit under an approval notice,
the ``block_actions`` call a click sends to the app's Interactivity Request URL, and the answer.

- A notice (``OutboundMessage.approval_id``) is posted with ``blocks``: its text as ``section``
  blocks (3000 characters each, Block Kit's limit) and an ``actions`` block with two buttons,
  Approve (``primary``) and Deny (``danger``), whose ``action_id`` is ``sb_approve`` or
  ``sb_deny`` and ``value`` ``ap:<hex digits of the id>:y`` or ``:n``; ``text`` stays the
  fallback for notifications.
- Slack posts a click as ``application/x-www-form-urlencoded`` with one field, ``payload`` (the
  JSON), signed like the Events API: the same route and the same signature check
  (:meth:`SlackAdapter.verify`) serve both, so the Interactivity Request URL is the events one.
  A ``block_actions`` payload whose action is one of our buttons becomes an inbound message
  from the clicker in the message's channel whose text is the command it stands for
  (``/approve <hex>``), with ``click``; the router decides it as that text typed there. The
  clicker's id, the message's text and thread travel in ``reply_context``. Other payloads
  (shortcuts, modals, other apps' buttons) publish nothing.
- The answer (``OutboundMessage.click``): when the click decided, ``chat.update`` of the notice:
  its text, then "Approved by <name>" as a ``context`` block, and no buttons; otherwise the
  router's text to the clicker alone (``chat.postEphemeral``).
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from typing import Any

from slack_sdk.web import WebClient

from switchboard import jsonsafe
from switchboard.v1 import messages_pb2

from .base import BadPayload, Inbound, PlatformMessage
from .slack_format import escape, split_mrkdwn, to_mrkdwn

APPROVAL_ID = re.compile(r"ap_([0-9a-f]{6,40})")
VALUE = re.compile(r"ap:([0-9a-f]{6,40}):([yn])")
ACTIONS = {"sb_approve": "y", "sb_deny": "n"}
SECTION_LIMIT = 3000  # a section block's text
MAX_SECTIONS = 40  # of Block Kit's 50 blocks a message
MAX_TEXT = 12_000  # of the clicked message's text carried back
_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_TS = re.compile(r"\d{1,12}\.\d{1,9}")
MAX_NAME = 64
# reply_context keys of a click
CLICKER = "user_id"
MESSAGE_TEXT = "message_text"
MESSAGE_THREAD = "message_thread_ts"
# PlatformMessage payload "call": which Web API method
UPDATE, EPHEMERAL = "chat.update", "chat.postEphemeral"


def is_interactive(headers: Mapping[str, str], body: bytes) -> bool:
    """Is this call an interactivity payload (a form with ``payload``) rather than an event?"""
    kind = headers.get("content-type", "")
    return kind.startswith("application/x-www-form-urlencoded") or body.startswith(b"payload=")


def sections(text: str) -> list[dict[str, Any]]:
    return [
        {"type": "section", "text": {"type": "mrkdwn", "text": piece}}
        for piece in split_mrkdwn(text, SECTION_LIMIT)[:MAX_SECTIONS]
        if piece.strip()
    ]


def notice_blocks(text: str, approval_id: str) -> list[dict[str, Any]] | None:
    """The blocks of an approval notice's (last) message; None for an id that is not one."""
    found = APPROVAL_ID.fullmatch(approval_id)
    if found is None:
        return None
    digits = found.group(1)
    buttons = [
        _button("Approve", "sb_approve", f"ap:{digits}:y", "primary"),
        _button("Deny", "sb_deny", f"ap:{digits}:n", "danger"),
    ]
    return [*sections(text), {"type": "actions", "block_id": "sb_approval", "elements": buttons}]


def _button(label: str, action_id: str, value: str, style: str) -> dict[str, Any]:
    return {
        "type": "button",
        "text": {"type": "plain_text", "text": label},
        "action_id": action_id,
        "value": value,
        "style": style,
    }


def parse_interactivity(body: bytes) -> Inbound:
    """The click in an interactivity call; :class:`BadPayload` when it is not one Slack sends."""
    fields = urllib.parse.parse_qs(body.decode("utf-8", "replace"), max_num_fields=8)
    raw = fields.get("payload", [""])[0]
    try:
        payload = jsonsafe.loads(raw.encode())
    except jsonsafe.JsonRefused as exc:
        raise BadPayload(f"the interactivity payload is not JSON: {exc}") from None
    if not isinstance(payload, dict) or not isinstance(payload.get("type"), str):
        raise BadPayload("expected an interactivity payload with a type")
    if payload["type"] != "block_actions":
        return Inbound()  # shortcuts, view submissions...: nothing of ours
    click = _click(payload)
    return Inbound(messages=[click] if click is not None else [])


def _click(payload: Mapping[str, Any]) -> messages_pb2.InboundMessage | None:
    user, channel, container, message = (
        _object(payload, "user"),
        _object(payload, "channel"),
        _object(payload, "container"),
        _object(payload, "message"),
    )
    actions = payload.get("actions")
    action = actions[0] if isinstance(actions, list) and len(actions) == 1 else None
    if not isinstance(action, dict) or action.get("action_id") not in ACTIONS:
        return None  # another app's or another block's action
    found = VALUE.fullmatch(str(action.get("value", "")))
    if found is None or found.group(2) != ACTIONS[str(action["action_id"])]:
        return None
    user_id = _matching(user.get("id"), _ID, "user.id")
    channel_id = _matching(channel.get("id") or container.get("channel_id"), _ID, "channel.id")
    message_ts = _matching(container.get("message_ts") or message.get("ts"), _TS, "message_ts")
    action_ts = _matching(action.get("action_ts"), _TS, "action_ts")
    verb = "approve" if found.group(2) == "y" else "deny"
    context = {CLICKER: user_id}
    text = message.get("text")
    if isinstance(text, str) and len(text) <= MAX_TEXT:
        context[MESSAGE_TEXT] = text
    thread = message.get("thread_ts")
    if isinstance(thread, str) and _TS.fullmatch(thread):
        context[MESSAGE_THREAD] = thread
    name = user.get("name") or user.get("username")
    return messages_pb2.InboundMessage(
        sender=user_id,
        chat=messages_pb2.ChatRef(
            # D...: a DM with the app; C... (channels), G... (private channels, group DMs)
            id=channel_id,
            type="direct" if channel_id.startswith("D") else "group",
        ),
        text=f"/{verb} {found.group(1)}",
        message_id=f"{channel_id}:{message_ts}:click:{action_ts}",
        mentions_bot=True,  # a click on the app's own message is addressed to it
        reply_context=context,
        click=messages_pb2.ButtonClick(
            message_id=message_ts,
            by=(name if isinstance(name, str) and name else user_id)[:MAX_NAME],
        ),
    )


def _object(payload: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = payload.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadPayload(f"the payload's {key} is not an object")
    return value


def _matching(value: object, pattern: re.Pattern[str], field: str) -> str:
    if isinstance(value, str) and pattern.fullmatch(value):
        return value
    raise BadPayload(f"the payload has no valid {field}")


def verdict(decision: str, by: str) -> str:
    return f"{'Approved' if decision == 'approved' else 'Denied'} by {escape(by or 'someone')}"


def answer_messages(part: messages_pb2.OutboundMessage) -> list[PlatformMessage]:
    """The call that answers a click: the notice updated, or a message to the clicker alone."""
    context = part.reply_context
    ts = part.click.message_id
    if part.click.decision and _TS.fullmatch(ts):
        line = verdict(part.click.decision, part.click.by)
        original = context.get(MESSAGE_TEXT, "").rstrip()
        blocks = [*sections(original), {"type": "context", "elements": [_mrkdwn(line)]}]
        text = f"{original}\n\n{line}" if original else line
        payload = {"call": UPDATE, "channel": part.chat.id, "ts": ts, "text": text}
        return [PlatformMessage({**payload, "blocks": blocks})]
    user = context.get(CLICKER, "")
    if not _ID.fullmatch(user) or not part.text.strip():
        return []
    text = to_mrkdwn(part.text)
    payload = {"call": EPHEMERAL, "channel": part.chat.id, "user": user, "text": text}
    thread = context.get(MESSAGE_THREAD, "")
    if _TS.fullmatch(thread):
        payload["thread_ts"] = thread
    return [PlatformMessage(payload)]


def _mrkdwn(text: str) -> dict[str, str]:
    return {"type": "mrkdwn", "text": text}


def send_answer(client: WebClient, payload: Mapping[str, Any]) -> None:
    """Make the call of :func:`answer_messages`' message (blocking: run it in a thread)."""
    if payload["call"] == UPDATE:
        client.chat_update(
            channel=payload["channel"],
            ts=payload["ts"],
            text=payload["text"],
            blocks=payload["blocks"],
        )
    else:
        client.chat_postEphemeral(
            channel=payload["channel"],
            user=payload["user"],
            text=payload["text"],
            thread_ts=payload.get("thread_ts"),
        )
