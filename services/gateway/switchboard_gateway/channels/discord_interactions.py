"""Discord interactions (the body of a verified ``POST /channels/discord/<account>``) as inbound
messages.

A PING (type 1, Discord checking the endpoint) is answered with a PONG and publishes nothing.
An APPLICATION_COMMAND (type 2), such as ``/ask prompt:<text>``, becomes one message: the text
is the command's string options (in subcommands too), the sender the invoking user, the chat
the channel it was used in (``direct`` in a DM with the bot, else ``group`` and addressed to
the bot), the id the interaction's. Discord is answered at once with a deferred response
(type 5: "<bot> is thinking..."); the interaction's token and application id travel with the
message as ``reply_context`` so the reply edits that response (see :mod:`.discord`). A command
with no text gets an ephemeral hint and publishes nothing. A MESSAGE_COMPONENT (type 3), a
click on an approval notice's button, is the click :mod:`.discord_buttons` makes of it. Other
interaction types (autocomplete, modals: nothing registers them) are refused with 400.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from switchboard import jsonsafe
from switchboard.v1 import messages_pb2

from .base import BadPayload, Inbound
from .discord_buttons import MESSAGE_COMPONENT, parse_component

PING, APPLICATION_COMMAND = 1, 2
PONG, CHANNEL_MESSAGE, DEFERRED_CHANNEL_MESSAGE = 1, 4, 5
STRING_OPTION = 3
SUBCOMMAND_OPTION_TYPES = (1, 2)  # SUB_COMMAND, SUB_COMMAND_GROUP: options inside options
GROUP_DM = 3  # channel type
EPHEMERAL = 1 << 6  # message flag: only the invoking user sees it

# reply_context keys (copied to every reply part by the agent).
INTERACTION_TOKEN = "interaction_token"
APPLICATION_ID = "application_id"
INTERACTION_ID = "interaction_id"

SNOWFLAKE = re.compile(r"[0-9]{1,20}")
# Interaction tokens are long URL-safe strings; they go into URL paths, so nothing else passes.
TOKEN = re.compile(r"[A-Za-z0-9._-]{1,1000}")
MAX_TEXT = 16_000  # far above Discord's own option limit (6000 for a whole command)
NO_TEXT_HINT = "Give the command some text, for example `/ask prompt: what time is it?`"


def parse_interaction(body: bytes) -> Inbound:
    try:
        data = jsonsafe.loads(body)
    except jsonsafe.JsonRefused as exc:
        raise BadPayload(str(exc)) from None
    if not isinstance(data, dict):
        raise BadPayload("an interaction is a JSON object")
    kind = data.get("type")
    if kind == PING:
        return Inbound(reply={"type": PONG})
    if kind == MESSAGE_COMPONENT:
        context, sender, channel_id, group = _origin(data)
        return parse_component(data, context, sender, channel_id, group)
    if kind != APPLICATION_COMMAND:
        shown = kind if isinstance(kind, int) and not isinstance(kind, bool) else "?"
        raise BadPayload(f"interaction type {shown} is not supported")
    return _command(data)


def _origin(data: Mapping[str, Any]) -> tuple[dict[str, str], str, str, bool]:
    """An interaction's reply context (its id, application and token), its user, its channel,
    and whether that channel is a group (a server's channel or a group DM)."""
    interaction_id = _snowflake(data.get("id"), "id")
    application_id = _snowflake(data.get("application_id"), "application_id")
    token = data.get("token")
    if not isinstance(token, str) or not TOKEN.fullmatch(token):
        raise BadPayload("the interaction has no valid token")
    channel = _object(data, "channel")
    channel_id = _snowflake(data.get("channel_id") or channel.get("id"), "channel_id")
    guild_id = data.get("guild_id")
    if guild_id is not None:
        _snowflake(guild_id, "guild_id")
    member = _object(data, "member")
    user = _object(member, "user") if member else _object(data, "user")
    sender = _snowflake(user.get("id"), "user.id")
    group = guild_id is not None or channel.get("type") == GROUP_DM
    context = {
        INTERACTION_TOKEN: token,
        APPLICATION_ID: application_id,
        INTERACTION_ID: interaction_id,
    }
    return context, sender, channel_id, group


def _command(data: Mapping[str, Any]) -> Inbound:
    context, sender, channel_id, group = _origin(data)
    command = _object(data, "data")
    if not isinstance(command.get("name"), str):
        raise BadPayload("the interaction names no command")
    text = "\n".join(_strings(command.get("options"), depth=0))
    if len(text) > MAX_TEXT:
        raise BadPayload("the command's text is too long")
    if not text.strip():
        hint = {"content": NO_TEXT_HINT, "flags": EPHEMERAL, "allowed_mentions": {"parse": []}}
        return Inbound(reply={"type": CHANNEL_MESSAGE, "data": hint})
    message = messages_pb2.InboundMessage(
        sender=sender,
        chat=messages_pb2.ChatRef(id=channel_id, type="group" if group else "direct"),
        text=text,
        message_id=context[INTERACTION_ID],
        mentions_bot=group,  # a slash command is addressed to the bot
        reply_context=context,
    )
    return Inbound(messages=[message], reply={"type": DEFERRED_CHANNEL_MESSAGE})


def _strings(options: object, depth: int) -> list[str]:
    """The values of the string options, in order, looking inside subcommands."""
    if options is None:
        return []
    if not isinstance(options, list) or depth > 2:
        raise BadPayload("the command's options are malformed")
    values: list[str] = []
    for option in options:
        if not isinstance(option, dict):
            raise BadPayload("the command's options are malformed")
        kind = option.get("type")
        if kind in SUBCOMMAND_OPTION_TYPES:
            values.extend(_strings(option.get("options"), depth + 1))
        elif kind == STRING_OPTION:
            value = option.get("value")
            if not isinstance(value, str):
                raise BadPayload("a string option has no string value")
            values.append(value)
    return values


def _snowflake(value: object, field: str) -> str:
    if isinstance(value, str) and SNOWFLAKE.fullmatch(value):
        return value
    raise BadPayload(f"the interaction has no valid {field}")


def _object(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadPayload(f"the interaction's {key} is not an object")
    return value
