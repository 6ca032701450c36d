"""The notice of a call waiting for an approval, sent to the run's chat: which tool, a short
and safe rendering of its arguments, the rule that matched, and how to decide ("reply /approve
<id> or /deny <id>", see :mod:`.chat`; channels with buttons add Approve and Deny under it,
``OutboundMessage.approval_id``). Only chats whose replies go out as OUTBOUND
parts get one (the API and WebChat see the ``approval`` event instead).

Once per approval: the part's run id is ``approval:<approval id>`` (``Nats-Msg-Id`` from it),
so a run resumed from its checkpoint that waits again on the same approval does not repeat the
notice while the OUTBOUND dedupe window lasts. A notice that cannot be published is logged and
counted; the call waits all the same and can be decided through the API."""

from __future__ import annotations

import json
import logging
import unicodedata
from typing import Any

from switchboard.v1 import messages_pb2

from ..metrics import APPROVAL_NOTICES
from ..outbound.chat_parts import publish_part, reply_destination
from ..outbound.publisher import OutboundPublisher
from ..tools.client import CallRequest
from .chat import short_id
from .store import ApprovalRow, ApprovalStore

log = logging.getLogger(__name__)
MAX_ARGS_CHARS = 300
# Characters that could disguise the arguments (bidirectional overrides, zero-width, control,
# private use, line separators) are shown as escapes.
_HIDDEN = frozenset({"Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp"})


def render_args(args: Any, limit: int = MAX_ARGS_CHARS) -> str:
    """The arguments as one line of JSON, hidden characters escaped, cut at ``limit``."""
    text = json.dumps(args, ensure_ascii=False, default=str)
    shown = "".join(
        f"\\u{ord(ch):04x}" if unicodedata.category(ch) in _HIDDEN else ch for ch in text
    )
    if len(shown) > limit:
        cut = len(shown) - limit
        shown = f"{shown[:limit]}… ({cut} more characters)"
    return shown


def _code(text: str) -> str:
    """``text`` as a code span (no backtick inside can close it)."""
    return "`" + text.replace("`", "'") + "`"


def notice_text(row: ApprovalRow, short: str) -> str:
    # The arguments go in a fenced block on one line: markdown inside is not read, and a
    # line of JSON starts with "{" or a quote, so it can never close the fence.
    return (
        f"Approval needed: the assistant wants to call {_code(row.tool)}"
        f" (rule {_code(row.rule)}) with:\n"
        f"```\n{render_args(row.args)}\n```\n"
        f"Reply /approve {short} or /deny {short} (a reason may follow the id)."
    )


class ApprovalNotices:
    """``ToolGate.announce``: tells the run's chat about a call waiting for approval."""

    def __init__(self, outbound: OutboundPublisher, store: ApprovalStore) -> None:
        self.outbound = outbound
        self.store = store

    async def __call__(
        self, origin: messages_pb2.LaneItem, call: CallRequest, row: ApprovalRow
    ) -> None:
        destination = reply_destination(self.outbound, origin)
        if destination is None:
            return
        try:
            short = await short_id(self.store.pool, row.approval_id)
            new = await publish_part(
                self.outbound,
                destination,
                run_id=f"approval:{row.approval_id}",
                text=notice_text(row, short),
                session_key=row.session_key,
                message_ids=[origin.message.message_id],
                approval_id=row.approval_id,  # buttons where the channel has them
            )
        except Exception as exc:  # the call waits anyway; the API can still decide it
            APPROVAL_NOTICES.labels("failed").inc()
            log.warning(
                "could not post the approval notice (%s)",
                type(exc).__name__,
                extra={"run_id": row.run_id, "session": row.session_key},
            )
            return
        APPROVAL_NOTICES.labels("sent" if new else "repeated").inc()
