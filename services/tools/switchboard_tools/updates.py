"""Partial tool output on the bus: ``ToolUpdate`` messages on core ``sb.tools.update.<call id>``.

Best effort and not captured by a stream: the ``ToolResult`` stays authoritative. A tool hands
its output to ``ToolContext.on_update``, already coalesced (see
:class:`~switchboard_tools.output.OutputStreamer`: at most one piece every ~150 ms unless 4 KiB
are pending, only output within the call's cap); every piece has been published before the
tool returns, so a subscriber on one connection sees all updates before the result.
"""

from __future__ import annotations

import itertools

from nats.aio.client import Client as NATS

from switchboard import bus
from switchboard.v1 import messages_pb2
from switchboard_tools.output import OutputCallback

# Characters that would change the meaning of a subject if a call id contained them.
_NOT_IN_TOKEN = frozenset(".*> \t\r\n")


def update_publisher(
    nc: NATS, subjects: bus.Subjects, call: messages_pb2.ToolCall, stream: str = "output"
) -> OutputCallback | None:
    """The ``on_update`` callback for ``call``, or ``None`` when its call id cannot be a
    subject token (then nothing is streamed; the result is unaffected)."""
    call_id = call.call_id
    if not call_id or any(ch in _NOT_IN_TOKEN for ch in call_id):
        return None
    subject = subjects.tools_update(call_id)
    numbers = itertools.count(1)

    async def publish(text: str) -> None:
        update = messages_pb2.ToolUpdate(
            call_id=call_id, run_id=call.run_id, seq=next(numbers), text=text, stream=stream
        )
        await bus.core_publish(nc, subject, update)

    return publish
