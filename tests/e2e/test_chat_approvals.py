"""Tool-call approval from the chat itself, every service a real process against a fake model:
a call matching an approval rule is announced in the run's chat (an OUTBOUND part with the id
and how to decide); ``/approve <id>`` from another sender is refused and the call keeps
waiting; from the sender the session belongs to it runs, and the run's reply reaches the chat.
The commands are published straight to INBOUND, as the gateway publishes a chat message."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest

from switchboard import bus
from switchboard.v1 import messages_pb2
from tests.e2e import helpers
from tests.e2e.helpers import wait_for
from tests.fakes.llm import FakeLLM, FakeRequest, Reply
from tests.support.services import ServiceProcesses, with_fake_model
from tests.support.streams import outbound_parts

SUBJECTS = bus.Subjects()
OWNER = "4242"
OWNER_KEY = f"main:telegram:{OWNER}"


def script(req: FakeRequest) -> Reply:
    """``exec: <command>`` calls exec; after the tool result the answer quotes it."""
    if req.last_tool_results:
        return Reply(text="done: " + " | ".join(req.last_tool_results))
    if req.last_user_text.startswith("exec: "):
        return Reply(tool_calls=[("exec", {"command": req.last_user_text[6:]})])
    return Reply(text="hello")


@pytest.fixture
def services(tmp_path: Path, nats_url: str, database_url: str) -> Iterator[ServiceProcesses]:
    env = {
        "SB_EXEC_ALLOWLIST": '["echo"]',
        "SB_TOOL_APPROVALS": '["exec:command=echo guarded*"]',
    }
    with with_fake_model(tmp_path, nats_url, database_url, script, env) as procs:
        yield procs


def parts(url: str) -> list[messages_pb2.OutboundMessage]:
    async def read() -> list[messages_pb2.OutboundMessage]:
        nc = await nats.connect(url)
        try:
            return [p for _, p in await outbound_parts(nc.jetstream())]
        finally:
            await nc.close()

    return asyncio.run(read())


def part_where(url: str, what: str, **fields: Any) -> messages_pb2.OutboundMessage:
    """The first OUTBOUND part whose fields (``chat_id``, ``run_prefix``...) match."""

    def find() -> messages_pb2.OutboundMessage | None:
        for p in parts(url):
            if fields.get("chat_id", p.chat.id) != p.chat.id:
                continue
            if not p.run_id.startswith(fields.get("run_prefix", "")):
                continue
            if fields.get("text_prefix", "") and not p.text.startswith(fields["text_prefix"]):
                continue
            return p
        return None

    part: messages_pb2.OutboundMessage = wait_for(find, timeout=60, what=what)
    return part


def say(url: str, sender: str, text: str, message_id: str) -> None:
    """A Telegram DM from ``sender``, as the gateway publishes it."""
    message = messages_pb2.InboundMessage(
        channel="telegram",
        account="default",
        sender=sender,
        chat=messages_pb2.ChatRef(id=sender, type="direct"),
        text=text,
        message_id=message_id,
        received_at_ms=int(time.time() * 1000),
    )

    async def send() -> None:
        nc = await nats.connect(url)
        try:
            msg_id = f"telegram:default:{message_id}"
            await bus.js_publish(nc.jetstream(), SUBJECTS.inbound("telegram"), message, msg_id)
        finally:
            await nc.close()

    asyncio.run(send())


def test_the_owner_approves_from_the_chat_and_a_stranger_cannot(
    services: ServiceProcesses,
) -> None:
    llm: FakeLLM = services.llm  # type: ignore[attr-defined]
    url = services.nats_url
    say(url, OWNER, "exec: echo guarded-1", "ca-1")
    notice = part_where(url, "the approval notice", chat_id=OWNER, run_prefix="approval:")
    assert "`exec`" in notice.text and "echo guarded-1" in notice.text
    assert "`exec:command=echo guarded*`" in notice.text
    found = re.search(r"/approve ([0-9a-f]{8,})", notice.text)
    assert found, notice.text
    short = found.group(1)
    assert f"/deny {short}" in notice.text

    with helpers.client(services.url, services.token) as c:

        def waiting() -> list[dict[str, Any]]:
            params = {"session_key": OWNER_KEY, "status": "awaiting_approval"}
            return list(c.get("/api/approvals", params=params).json()["approvals"])

        [approval] = wait_for(waiting)
        assert approval["id"].startswith(f"ap_{short}")
        assert notice.run_id == f"approval:{approval['id']}"

        # Another sender, in its own chat: refused, and the call keeps waiting.
        say(url, "9999", f"/approve {short}", "ca-2")
        refused = part_where(url, "the stranger's answer", chat_id="9999")
        assert refused.text == "You may not decide this approval."
        assert [a["id"] for a in waiting()] == [approval["id"]]
        assert len(llm.calls) == 1  # the model was not asked again: nothing ran

        # The session's owner, in the chat the run belongs to.
        say(url, OWNER, f"/approve {short} looks fine", "ca-3")
        approved = part_where(url, "the owner's answer", chat_id=OWNER, run_prefix="command:")
        assert approved.text == f"Approved: the call to exec ({short})."
        reply = part_where(url, "the run's reply", chat_id=OWNER, text_prefix="done: ")
        assert reply.text.rstrip() == "done: guarded-1"
        assert reply.run_id == approval["run_id"]
        decided = c.get("/api/approvals", params={"session_key": OWNER_KEY}).json()["approvals"]
        assert [(a["status"], a["decided_by"], a["reason"]) for a in decided] == [
            ("approved", f"telegram:{OWNER}", "looks fine")
        ]

    # Neither command reached a lane: each chat holds one run at most (the owner's).
    texts = [m.request.last_user_text for m in llm.calls]
    assert all("/approve" not in t for t in texts), texts
