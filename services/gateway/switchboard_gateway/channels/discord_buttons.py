"""Discord's buttons for approvals (docs/chat-approvals.md): message components under an
approval notice, the MESSAGE_COMPONENT interaction a click sends, and the answer to it.

- A notice (``OutboundMessage.approval_id``) is sent with ``components``: one action row
  (type 1) of two buttons (type 2), Approve (style 3, green) and Deny (style 4, red), whose
  ``custom_id`` is ``ap:<hex digits of the id>:y`` or ``:n``.
- A click arrives at the interactions endpoint (Ed25519-verified as every interaction) as type
  3. One on our buttons becomes an inbound message from the clicker in the message's channel
  whose text is the command it stands for (``/approve <hex>``), with ``click``; the router
  decides it as that text typed there. Discord is answered at once with a deferred update
  (type 6: nothing changes yet); the interaction's token and application and the message's
  content travel in ``reply_context``. A click on anything else is acknowledged the same way
  and publishes nothing.
- The answer (``OutboundMessage.click``): when the click decided, the clicked message edited
  through the interaction (``PATCH /webhooks/<app>/<token>/messages/@original``: after a type
  6 response that is the message the button is on) to its content and "Approved by <name>",
  with no components; otherwise an ephemeral follow-up (flag 64) with the router's text, which
  only the clicker sees.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from switchboard.v1 import messages_pb2

from .base import BadPayload, Inbound
from .discord_format import TEXT_LIMIT, message_body

APPROVAL_ID = re.compile(r"ap_([0-9a-f]{6,40})")
CUSTOM_ID = re.compile(r"ap:([0-9a-f]{6,40}):([yn])")
MESSAGE_COMPONENT = 3
DEFERRED_UPDATE_MESSAGE = 6
ACTION_ROW, BUTTON = 1, 2
SUCCESS, DANGER = 3, 4
EPHEMERAL = 1 << 6
MAX_NAME = 64
MESSAGE_CONTENT = "message_content"  # reply_context key: the clicked message's content
ACK: dict[str, Any] = {"type": DEFERRED_UPDATE_MESSAGE}


def notice_components(approval_id: str) -> list[dict[str, Any]] | None:
    """The components of an approval notice's (last) message; None for an id that is not
    one."""
    found = APPROVAL_ID.fullmatch(approval_id)
    if found is None:
        return None
    digits = found.group(1)
    buttons = [
        {"type": BUTTON, "style": SUCCESS, "label": "Approve", "custom_id": f"ap:{digits}:y"},
        {"type": BUTTON, "style": DANGER, "label": "Deny", "custom_id": f"ap:{digits}:n"},
    ]
    return [{"type": ACTION_ROW, "components": buttons}]


def parse_component(
    data: Mapping[str, Any], context: dict[str, str], sender: str, channel: str, group: bool
) -> Inbound:
    """A verified MESSAGE_COMPONENT interaction (its ids checked by the caller, ``context``
    the interaction's reply context) as the click it is, acknowledged with a deferred update."""
    component, message = data.get("data"), data.get("message")
    if not isinstance(component, dict) or not isinstance(message, dict):
        raise BadPayload("the component interaction lacks its data or message")
    found = CUSTOM_ID.fullmatch(str(component.get("custom_id", "")))
    message_id = message.get("id")
    if found is None or component.get("component_type") != BUTTON:
        return Inbound(reply=ACK)  # not one of ours: acknowledged, nothing published
    if not isinstance(message_id, str) or not message_id.isdigit() or len(message_id) > 20:
        raise BadPayload("the component interaction's message has no valid id")
    content = message.get("content")
    if isinstance(content, str) and len(content) <= TEXT_LIMIT:
        context[MESSAGE_CONTENT] = content
    user = _clicker(data)
    verb = "approve" if found.group(2) == "y" else "deny"
    click = messages_pb2.InboundMessage(
        sender=sender,
        chat=messages_pb2.ChatRef(id=channel, type="group" if group else "direct"),
        text=f"/{verb} {found.group(1)}",
        message_id=context["interaction_id"],
        mentions_bot=True,  # a click on the bot's own message is addressed to it
        reply_context=context,
        click=messages_pb2.ButtonClick(message_id=message_id, by=_name(user, sender)),
    )
    return Inbound(messages=[click], reply=ACK)


def _clicker(data: Mapping[str, Any]) -> Mapping[str, Any]:
    member = data.get("member")
    user = member.get("user") if isinstance(member, dict) else data.get("user")
    return user if isinstance(user, dict) else {}


def _name(user: Mapping[str, Any], fallback: str) -> str:
    for key in ("global_name", "username"):
        value = user.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()[:MAX_NAME]
    return fallback


def verdict(decision: str, by: str) -> str:
    return f"**{'Approved' if decision == 'approved' else 'Denied'} by {_plain(by)}**"


def _plain(text: str) -> str:
    """``text`` with Discord's markdown characters escaped."""
    return re.sub(r"([\\*_~`|>#\[\]()-])", r"\\\1", text)


def answer_body(part: messages_pb2.OutboundMessage) -> tuple[bool, dict[str, Any]] | None:
    """How to answer a click: (True, the clicked message's edit) when it decided, (False, an
    ephemeral follow-up) otherwise; None when there is nothing to say."""
    if part.click.decision:
        line = verdict(part.click.decision, part.click.by)
        original = part.reply_context.get(MESSAGE_CONTENT, "").rstrip()
        room = TEXT_LIMIT - len(line) - 2
        if len(original) > room:
            original = original[: max(room - 1, 0)] + "…" if room > 1 else ""
        body = message_body(f"{original}\n\n{line}" if original else line)
        body["components"] = []
        return True, body
    if not part.text.strip():
        return None
    body = message_body(part.text[:TEXT_LIMIT])
    body["flags"] = EPHEMERAL
    return False, body
