"""The ``message`` tool: a run speaks first. A scheduled run, a sub-agent or a long task sends
a message to the chat of the conversation (``to: "current"``, the default) or to a target the
operator named in ``SB_MESSAGE_TARGETS``; nothing else can be addressed. Named targets are the
operator's: only a run of the owner's standing (docs/trust.md) may use them; any other gets a
readable refusal and nothing is sent.

``SB_MESSAGE_TARGETS`` is a JSON object ``{"<name>": {"channel", "account"?, "chat_id",
"chat_type"? ("direct" | "group"), "thread_id"?}}``, checked when the agent starts: names are
1-64 of ``A-Z a-z 0-9 _ -`` (``current`` is reserved) and each channel must deliver its
messages as OUTBOUND parts (not ``api``, ``openai``, ``webchat``, ``hooks``).

Each message is one OUTBOUND part under the run id ``<run id>:message:<call id>`` (see
:mod:`..outbound.chat_parts`), so a run resumed from its checkpoint that runs the same call again
does not send it twice. ``message`` is a tool like any other for the tool policy
(``group:messaging``; sub-agents are denied it by default) and for approval rules
(``message:to=ops``).

``media`` sends stored files with the text: ``media:<sha256>`` references (those shown next to
the conversation's attachments, or given by a tool), each checked with the media service (an
unknown or expired one is a tool error and nothing is sent) and passed on with the type the
service sniffed. The channel adapters upload them (Telegram ``sendPhoto``..., Discord and
Slack files). In a WebChat conversation (no OUTBOUND chat) ``to: current`` shows the message
in the page: the tool's result event carries it (``webchat/translate.py``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from switchboard.media import (
    MediaClient,
    MediaNotFound,
    MediaServiceError,
    media_ref,
    parse_media_ref,
)
from switchboard.toolspec import ToolSpec
from switchboard.trust import Standing

from ..outbound.chat_parts import ChatDestination, publish_part, reply_destination
from ..outbound.publisher import DEFAULT_ACCOUNT, EVENT_ONLY_CHANNELS, OutboundPublisher
from .client import CallRequest, CallResult
from .local import LocalContext, tool_error

NAME = "message"
CURRENT = "current"
MAX_TEXT = 4000
MAX_MEDIA = 4
WEBCHAT = "webchat"  # its messages are shown by the page from the tool's result event
_TARGET_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


class MessageTarget(BaseModel):
    """A chat the ``message`` tool may address by name."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    channel: str = Field(min_length=1, max_length=64, pattern=r"^[a-z0-9_-]+$")
    account: str = Field(default="", max_length=128)
    chat_id: str = Field(min_length=1, max_length=256)
    chat_type: Literal["direct", "group"] = "direct"
    thread_id: str = Field(default="", max_length=256)

    def destination(self) -> ChatDestination:
        return ChatDestination(
            self.channel,
            self.account or DEFAULT_ACCOUNT,
            self.chat_id,
            self.chat_type,
            self.thread_id,
        )


def check_targets(targets: Mapping[str, MessageTarget]) -> None:
    """Raise ValueError naming the first target that cannot be used."""
    for name, target in targets.items():
        if not _TARGET_NAME.fullmatch(name):
            raise ValueError(
                f"message_targets: {name!r} is not a target name (1-64 of A-Z a-z 0-9 _ -)"
            )
        if name == CURRENT:
            raise ValueError(f"message_targets: {CURRENT!r} is reserved for the run's own chat")
        if target.channel in EVENT_ONLY_CHANNELS:
            raise ValueError(
                f"message_targets.{name}: channel {target.channel!r} gets no chat messages"
                f" (its replies go back on the request); use a chat channel"
            )


def _spec(targets: Mapping[str, MessageTarget]) -> ToolSpec:
    names = ", ".join(sorted(targets)) or "none configured"
    return ToolSpec(
        NAME,
        "Send a message to a chat now, without waiting for the end of the run: to the chat of"
        " this conversation (to: current, the default) or to a named target. Use it to speak"
        " first (reminders, results of scheduled work); your normal answer is still sent as"
        f" the reply. Named targets: {names}.",
        {
            "type": "object",
            "properties": {
                "text": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_TEXT,
                    "description": f"The message, up to {MAX_TEXT} characters (the caption"
                    " when media is sent).",
                },
                "media": {
                    "type": "array",
                    "items": {"type": "string", "minLength": 1, "maxLength": 512},
                    "maxItems": MAX_MEDIA,
                    "description": "Files to send with the message (images are shown): media"
                    " references (media:<sha256>?mime=...) from this conversation or a tool.",
                },
                "to": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 64,
                    "description": f'"{CURRENT}" (default) or a target name: {names}.',
                },
            },
            "additionalProperties": False,
        },
        groups=("messaging",),
    )


class MessageTool:
    def __init__(
        self,
        outbound: OutboundPublisher,
        targets: Mapping[str, MessageTarget] | None = None,
        media: MediaClient | None = None,
    ) -> None:
        self.outbound = outbound
        self.media = media
        self.targets = dict(targets or {})
        check_targets(self.targets)
        self._spec = _spec(self.targets)

    @property
    def spec(self) -> ToolSpec:
        return self._spec

    async def run(self, ctx: LocalContext, call: CallRequest) -> CallResult:
        text = str(call.args.get("text") or "")
        wanted = [str(ref) for ref in call.args.get("media") or []]
        if not text.strip() and not wanted:
            return tool_error(
                call, "message: the text is blank; nothing was sent.", "invalid_arguments"
            )
        try:
            media = await self._checked(wanted)
        except MediaServiceError as exc:
            return tool_error(call, f"message: {exc}; nothing was sent.", "media_error")
        to = str(call.args.get("to") or CURRENT)
        message_ids: list[str] = []
        if to == CURRENT:
            destination = reply_destination(self.outbound, ctx.origin)
            if destination is None and ctx.origin.message.channel == WEBCHAT:
                return _shown_in_webchat(call, text, media)
            if destination is None:
                channel = ctx.origin.message.channel or "this channel"
                instead = (
                    f" Name a target instead ({self._known()})."
                    if ctx.standing is Standing.OWNER
                    else ""
                )
                return tool_error(
                    call,
                    f"message: this conversation ({channel}) has no chat to send to; its"
                    f" replies go back on the request.{instead}",
                    "no_chat",
                )
            message_ids = [ctx.origin.message.message_id]
        elif ctx.standing is not Standing.OWNER:
            return tool_error(
                call,
                f"message: named targets are for the owner's own conversations only; this one"
                f" may send to {CURRENT!r} (its own chat). Nothing was sent.",
                "not_allowed",
            )
        else:
            target = self.targets.get(to)
            if target is None:
                return tool_error(
                    call,
                    f"message: unknown target {to!r}; use {CURRENT!r} or one of:"
                    f" {self._known()}. Nothing was sent.",
                    "unknown_target",
                )
            destination = target.destination()
        new = await publish_part(
            self.outbound,
            destination,
            run_id=f"{ctx.run_id}:message:{call.call_id}",
            text=text,
            session_key=ctx.session_key,
            message_ids=message_ids,
            media=media,
        )
        where = destination.describe() + (f" with {len(media)} file(s)" if media else "")
        return CallResult(
            call.call_id,
            f"sent to {where}" if new else f"already sent to {where}",
            False,
            {"to": to, "channel": destination.channel, "chat_id": destination.chat_id},
        )

    async def _checked(self, wanted: list[str]) -> list[str]:
        """The references as the media service knows them (its sniffed type); raises
        :class:`MediaServiceError` with a readable reason for one it does not know."""
        if not wanted:
            return []
        refs = []
        for ref in wanted:
            found = parse_media_ref(ref)
            if found is None:
                raise _NoMedia(f"{ref[:80]!r} is not a media reference (media:<sha256>...)")
            refs.append(found)
        if self.media is None:
            raise _NoMedia("files cannot be sent here (no media service is configured)")
        checked = []
        for found in refs:
            try:
                stored = await self.media.head(found.sha256)
            except MediaNotFound:
                raise MediaNotFound(
                    f"{media_ref(found.sha256, found.mime)} is not stored (or has expired)"
                ) from None
            checked.append(media_ref(stored.sha256, stored.mime, found.name))
        return checked

    def _known(self) -> str:
        return ", ".join(sorted(self.targets)) or "no targets are configured (SB_MESSAGE_TARGETS)"


class _NoMedia(MediaServiceError):
    """A file the message tool cannot send."""


def _shown_in_webchat(call: CallRequest, text: str, media: list[str]) -> CallResult:
    """WebChat's page shows the message from this result's event (``webchat/translate.py``)."""
    return CallResult(
        call.call_id,
        "shown in the chat",
        False,
        {"to": CURRENT, "channel": WEBCHAT, "text": text, "media": media},
    )
