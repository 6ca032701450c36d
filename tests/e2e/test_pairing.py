"""DM and group pairing end to end: every service as a real process under the default
``pairing`` DM policy. An unknown sender's message runs nothing and its chat gets a code (an
OUTBOUND part); the operator sees it with ``switchboard pairing list``, approves it with
``switchboard pairing approve``; the sender's next message runs and is answered. Under the
group policy ``pairing`` a group gets its code in the group and is approved the same way (never
as an owner); ``approve --owner`` makes a sender an owner, which ``pairing paired`` shows."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import nats
import pytest

from switchboard import bus
from switchboard.v1 import messages_pb2
from tests.fakes.llm import text_only
from tests.support.services import ServiceProcesses, with_fake_model
from tests.support.streams import outbound_parts

SUBJECTS = bus.Subjects()


@pytest.fixture
def services(tmp_path: Path, nats_url: str, database_url: str) -> Iterator[ServiceProcesses]:
    env = {"SB_DM_POLICY": "pairing"}  # the default, which with_fake_model opens for others
    with with_fake_model(tmp_path, nats_url, database_url, text_only("hello, friend"), env) as p:
        yield p


def dm(message_id: str, sender: str = "4242") -> messages_pb2.InboundMessage:
    return messages_pb2.InboundMessage(
        channel="telegram",
        account="default",
        sender=sender,
        chat=messages_pb2.ChatRef(id=sender, type="direct"),
        text="hi there",
        message_id=message_id,
        received_at_ms=int(time.time() * 1000),
    )


def in_group(message_id: str, group: str, sender: str = "5") -> messages_pb2.InboundMessage:
    """A group message that mentions the bot."""
    return messages_pb2.InboundMessage(
        channel="telegram",
        account="default",
        sender=sender,
        chat=messages_pb2.ChatRef(id=group, type="group"),
        text="@bot hi all",
        message_id=message_id,
        mentions_bot=True,
        received_at_ms=int(time.time() * 1000),
    )


def cli(procs: ServiceProcesses, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("SB_")},
        "SB_GATEWAY_URL": procs.url,
        "SB_GATEWAY_TOKEN": procs.token,
        "SB_HOME": str(procs.home),
    }
    return subprocess.run(
        [sys.executable, "-m", "switchboard.cli.main", "pairing", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


async def parts_for(
    url: str, count: int, timeout: float = 60.0
) -> list[messages_pb2.OutboundMessage]:
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        deadline = time.monotonic() + timeout
        while True:
            parts = [p for _, p in await outbound_parts(js)]
            if len(parts) >= count or time.monotonic() > deadline:
                return parts
            await asyncio.sleep(0.1)
    finally:
        await nc.close()


async def publish(url: str, message: messages_pb2.InboundMessage) -> None:
    nc = await nats.connect(url)
    try:
        msg_id = f"telegram:default:{message.message_id}"
        await bus.js_publish(nc.jetstream(), SUBJECTS.inbound("telegram"), message, msg_id=msg_id)
    finally:
        await nc.close()


def test_pairing_code_then_approval_then_the_next_message_runs(
    services: ServiceProcesses,
) -> None:
    llm = services.llm  # type: ignore[attr-defined]
    asyncio.run(publish(services.nats_url, dm("p-1")))
    [code_part] = asyncio.run(parts_for(services.nats_url, 1))
    assert code_part.chat.id == "4242" and "pairing code" in code_part.text

    listed = cli(services, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    [request] = json.loads(listed.stdout)
    assert (request["channel"], request["sender"]) == ("telegram", "4242")
    assert request["code"] in code_part.text
    assert llm.calls == []  # refused: no run

    wrong = cli(services, "approve", "telegram", "ZZZZZZZZ")
    assert wrong.returncode == 1 and "404" in wrong.stderr

    approved = cli(services, "approve", "telegram", request["code"])
    assert approved.returncode == 0, approved.stderr
    assert "approved: sender 4242 on telegram" in approved.stdout
    assert json.loads(cli(services, "list", "--json").stdout) == []

    asyncio.run(publish(services.nats_url, dm("p-2")))
    parts = asyncio.run(parts_for(services.nats_url, 2))
    assert [p.text for p in parts[1:]] == ["hello, friend"]
    assert len(llm.calls) == 1


@pytest.fixture
def group_services(tmp_path: Path, nats_url: str, database_url: str) -> Iterator[ServiceProcesses]:
    env = {"SB_DM_POLICY": "pairing", "SB_GROUP_POLICY": "pairing"}
    with with_fake_model(tmp_path, nats_url, database_url, text_only("hello, group"), env) as p:
        yield p


def test_a_group_is_paired_into_its_chat_and_an_owner_with_owner(
    group_services: ServiceProcesses,
) -> None:
    services = group_services
    llm = services.llm  # type: ignore[attr-defined]
    asyncio.run(publish(services.nats_url, in_group("g-1", "-100777")))
    [code_part] = asyncio.run(parts_for(services.nats_url, 1))
    assert (code_part.chat.id, code_part.chat.type) == ("-100777", "group")
    assert "group" in code_part.text and llm.calls == []

    listed = cli(services, "list")
    assert listed.returncode == 0, listed.stderr
    assert "group -100777" in listed.stdout
    [request] = json.loads(cli(services, "list", "--json").stdout)
    assert (request["sender"], request["chat_id"]) == ("group:-100777", "-100777")
    assert request["code"] in code_part.text

    as_owner = cli(services, "approve", "telegram", request["code"], "--owner")
    assert as_owner.returncode == 1 and "400" in as_owner.stderr  # a group is never an owner
    approved = cli(services, "approve", "telegram", request["code"])
    assert approved.returncode == 0, approved.stderr
    assert "approved: group -100777 on telegram" in approved.stdout

    asyncio.run(publish(services.nats_url, in_group("g-2", "-100777")))
    parts = asyncio.run(parts_for(services.nats_url, 2))
    assert [(p.chat.id, p.text) for p in parts[1:]] == [("-100777", "hello, group")]

    # A sender of that group is still a stranger in a DM; approved --owner, an owner.
    asyncio.run(publish(services.nats_url, dm("d-1", sender="5")))
    parts = asyncio.run(parts_for(services.nats_url, 3))
    assert parts[2].chat.id == "5" and "pairing code" in parts[2].text
    [request] = json.loads(cli(services, "list", "--json").stdout)
    path = f"{services.url}/api/pairing/telegram/{request['code']}/approve"
    auth = {"Authorization": f"Bearer {services.token}"}
    for bad in (b'{"owner": "yes"}', b"[true]", b'{"owner": true, "x": 1}', b"owner"):
        answer = httpx.post(path, content=bad, headers=auth, timeout=10)
        assert answer.status_code == 400, (bad, answer.text)
    approved = cli(services, "approve", "telegram", request["code"], "--owner")
    assert approved.returncode == 0, approved.stderr
    assert "approved: sender 5 on telegram as an owner" in approved.stdout
    paired = cli(services, "paired")
    assert paired.returncode == 0, paired.stderr
    lines = paired.stdout.splitlines()
    assert any("group -100777" in line and "role" not in line for line in lines), lines
    assert any("sender 5  role owner" in line for line in lines), lines
    senders = json.loads(cli(services, "paired", "--json").stdout)
    assert {(s["sender"], s["role"]) for s in senders} == {
        ("group:-100777", "member"),
        ("5", "owner"),
    }

    revoked = cli(services, "revoke", "telegram", "group:-100777")
    assert revoked.returncode == 0 and "revoked: group -100777" in revoked.stdout
    asyncio.run(publish(services.nats_url, in_group("g-3", "-100777")))
    parts = asyncio.run(parts_for(services.nats_url, 4))
    assert "pairing code" in parts[3].text and parts[3].chat.id == "-100777"
    assert len(llm.calls) == 1  # the approved group's one message, nothing else
