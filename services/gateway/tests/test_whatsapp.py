"""WhatsApp's webhook at /channels/whatsapp/default: the gateway in-process on a real
nats-server with the real WhatsApp adapter against the fake Graph API, fed calls signed as Meta
signs them. The verification GET echoes the challenge only for the verify token; a POST is
verified by X-Hub-Signature-256 before it is parsed; each message type becomes one INBOUND
message, published once however often Meta delivers it, and is marked read."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from switchboard import registry
from switchboard.errors import ConfigError
from switchboard.runtime import ServiceRuntime
from switchboard.v1 import messages_pb2
from switchboard_gateway.app import create_app
from switchboard_gateway.channels import configured_adapters
from switchboard_gateway.channels.accounts import Accounts
from switchboard_gateway.channels.whatsapp import WhatsAppAdapter, from_settings
from switchboard_gateway.channels.whatsapp_format import parse_ref
from switchboard_gateway.channels.whatsapp_media import NotDownloaded, download
from switchboard_gateway.config import GatewaySettings
from tests.fakes.whatsapp import FakeWhatsApp, event, media_message, text_message
from tests.support.streams import stored as stream_messages

from .gateway_harness import absent_address, client_on

HOOK = "/channels/whatsapp/default"
TOKEN = f"gw-{uuid.uuid4().hex}"
USER = "15551234567"


@dataclass
class WhatsAppGateway:
    rt: ServiceRuntime
    client: httpx.AsyncClient
    adapter: WhatsAppAdapter
    fake: FakeWhatsApp

    async def post(self, body: bytes, signature: str | None = None) -> httpx.Response:
        headers = {"content-type": "application/json"}
        headers["x-hub-signature-256"] = self.fake.sign(body) if signature is None else signature
        return await self.client.post(HOOK, content=body, headers=headers)

    async def inbound(self) -> list[tuple[str, messages_pb2.InboundMessage]]:
        stream = self.rt.subjects.stream("INBOUND")
        found = await stream_messages(self.rt.js, stream, messages_pb2.InboundMessage)
        return [(s.msg_id, s.message) for s in found]


def settings_for(home: Path, nats_url: str, **values: object) -> GatewaySettings:
    return GatewaySettings.from_environ(
        {}, home=home, nats_url=nats_url, gateway_token=TOKEN, log_json=False, **values
    )


def whatsapp_settings(fake: FakeWhatsApp) -> dict[str, object]:
    return {
        "whatsapp_access_token": fake.token,
        "whatsapp_app_secret": fake.app_secret,
        "whatsapp_verify_token": fake.verify_token,
        "whatsapp_phone_number_id": fake.phone_number_id,
        "whatsapp_api_base": fake.base_url,
    }


@pytest.fixture
def fake() -> Iterator[FakeWhatsApp]:
    with FakeWhatsApp() as wa:
        yield wa


@pytest.fixture
async def gw(nats_url: str, tmp_path: Path, fake: FakeWhatsApp) -> AsyncIterator[WhatsAppGateway]:
    with absent_address() as agent_addr:
        settings = settings_for(
            tmp_path, nats_url, agent_addr=agent_addr, **whatsapp_settings(fake)
        )
        adapters = configured_adapters(settings)
        adapter = adapters["whatsapp"]
        assert isinstance(adapter, WhatsAppAdapter)
        async with ServiceRuntime(registry.get("gateway"), settings, asyncio.Event()) as rt:
            await adapter.start(rt)
            app = create_app(settings, rt, adapters)
            async with app.router.lifespan_context(app), client_on(app) as client:
                yield WhatsAppGateway(rt, client, adapter, fake)
            await adapter.close()


async def test_the_verification_get_echoes_the_challenge_for_the_verify_token(
    gw: WhatsAppGateway,
) -> None:
    good = {"hub.mode": "subscribe", "hub.verify_token": gw.fake.verify_token}
    response = await gw.client.get(HOOK, params={**good, "hub.challenge": "1158201444"})
    assert response.status_code == 200
    assert response.text == "1158201444"
    assert response.headers["content-type"].startswith("text/plain")
    wrong = [
        {**good, "hub.verify_token": "not-it"},
        {**good, "hub.mode": "unsubscribe"},
        {"hub.mode": "subscribe"},
    ]
    for params in wrong:
        response = await gw.client.get(HOOK, params={**params, "hub.challenge": "echo-me-not"})
        assert response.status_code == 403, params
        assert "echo-me-not" not in response.text
    response = await gw.client.get("/channels/whatsapp/other", params=good)
    assert response.status_code == 404


async def test_a_bad_or_missing_signature_is_401_and_nothing_is_published(
    gw: WhatsAppGateway,
) -> None:
    body = event(gw.fake.phone_number_id, [text_message(USER, "hi")])
    other = FakeWhatsApp().sign(body)  # another app's secret
    tampered = gw.fake.sign(body)
    for signature in ["", other, "sha256=" + "0" * 64, tampered.upper(), "sha1=abc"]:
        response = await gw.post(body, signature=signature)
        assert response.status_code == 401, signature
    response = await gw.post(body + b" ", signature=tampered)  # the body changed after signing
    assert response.status_code == 401
    assert await gw.inbound() == []
    assert gw.fake.reads == []


async def test_each_message_type_is_one_inbound_message_and_marked_read(
    gw: WhatsAppGateway,
) -> None:
    pnid = gw.fake.phone_number_id
    messages = [
        text_message(USER, "hello there"),
        media_message(USER, "image", "111", "image/jpeg", caption="a cat"),
        media_message(USER, "audio", "222", "audio/ogg; codecs=opus", voice=True),
        media_message(USER, "document", "333", "application/pdf", filename="q3 report.pdf"),
        {"from": USER, "id": "wamid.sticker", "type": "sticker", "sticker": {"id": "4"}},
    ]
    statuses = [{"id": "wamid.out", "status": "delivered", "recipient_id": USER}]
    response = await gw.post(event(pnid, messages, statuses=statuses))
    assert response.status_code == 200, response.text
    published = await gw.inbound()
    assert [msg_id for msg_id, _ in published] == [
        f"whatsapp:default:{m['id']}" for m in messages[:4]
    ]
    found = [m for _, m in published]
    assert all(m.sender == USER and m.chat.id == USER for m in found)
    assert all(m.chat.type == "direct" and m.channel == "whatsapp" for m in found)
    assert [m.text for m in found] == ["hello there", "a cat", "", ""]
    refs = [[parse_ref(r) for r in m.media] for m in found]
    assert refs == [
        [],
        [("image", "111", "")],
        [("audio", "222", "")],
        [("document", "333", "q3 report.pdf")],
    ]
    assert sorted(r.message_id for r in gw.fake.reads) == sorted(m["id"] for m in messages[:4])


async def test_a_delivery_meta_retries_is_published_once(gw: WhatsAppGateway) -> None:
    body = event(gw.fake.phone_number_id, [text_message(USER, "once", "wamid.AAA1")])
    for _ in range(3):
        response = await gw.post(body)
        assert response.status_code == 200, response.text
    [(msg_id, message)] = await gw.inbound()
    assert (msg_id, message.text) == ("whatsapp:default:wamid.AAA1", "once")


async def test_a_body_that_is_not_meta_json_is_400(gw: WhatsAppGateway) -> None:
    for body in [b"{not json", b"\xff\xfe", b"[1, 2]", json.dumps({"entry": 7}).encode()]:
        response = await gw.post(body)
        assert response.status_code == 400, body
    assert await gw.inbound() == []


async def test_typing_is_the_read_receipt_with_the_indicator(gw: WhatsAppGateway) -> None:
    body = event(gw.fake.phone_number_id, [text_message(USER, "hi", "wamid.T1")])
    assert (await gw.post(body)).status_code == 200
    chat = messages_pb2.ChatRef(id=USER, type="direct")
    await gw.adapter.typing("default", chat, "")
    reads = gw.fake.reads
    assert [(r.message_id, r.typing) for r in reads] == [("wamid.T1", False), ("wamid.T1", True)]


async def test_a_users_file_is_downloaded_with_the_token(fake: FakeWhatsApp) -> None:
    media_id = fake.add_media(b"\x89PNG fake bytes", "image/png")
    headers = {"Authorization": f"Bearer {fake.token}"}
    async with httpx.AsyncClient(headers=headers) as client:
        data, mime = await download(client, fake.base_url, media_id)
    assert (data, mime) == (b"\x89PNG fake bytes", "image/png")
    async with httpx.AsyncClient(headers={"Authorization": "Bearer wrong"}) as client:
        with pytest.raises(NotDownloaded, match="401"):
            await download(client, fake.base_url, media_id)


def test_settings_need_every_credential_and_named_numbers_are_accounts(tmp_path: Path) -> None:
    url = "nats://127.0.0.1:1"
    assert from_settings(settings_for(tmp_path, url)) is None
    with pytest.raises(ConfigError, match="verify token"):
        from_settings(
            settings_for(
                tmp_path,
                url,
                whatsapp_access_token="t",
                whatsapp_app_secret="s",
                whatsapp_phone_number_id="123",
            )
        )
    accounts = {
        "sales": {
            "access_token": "t2",
            "app_secret": "s2",
            "verify_token": "v2",
            "phone_number_id": "456",
        }
    }
    adapter = from_settings(
        settings_for(
            tmp_path,
            url,
            whatsapp_access_token="t",
            whatsapp_app_secret="s",
            whatsapp_verify_token="v",
            whatsapp_phone_number_id="123",
            whatsapp_accounts=accounts,
        )
    )
    assert isinstance(adapter, Accounts)
    assert sorted(adapter.accounts) == ["default", "sales"]
    assert "t2" not in repr(adapter) and "s2" not in repr(adapter.adapters["sales"])


async def test_each_named_number_answers_the_check_with_its_own_verify_token(
    nats_url: str, tmp_path: Path, fake: FakeWhatsApp
) -> None:
    sales = {
        "access_token": "t2",
        "app_secret": "s2",
        "verify_token": "sales-verify",
        "phone_number_id": "456",
        "api_base": fake.base_url,
    }
    with absent_address() as agent_addr:
        settings = settings_for(
            tmp_path,
            nats_url,
            agent_addr=agent_addr,
            whatsapp_accounts={"sales": sales},
            **whatsapp_settings(fake),
        )
        adapters = configured_adapters(settings)
        assert isinstance(adapters["whatsapp"], Accounts)
        async with ServiceRuntime(registry.get("gateway"), settings, asyncio.Event()) as rt:
            app = create_app(settings, rt, adapters)
            async with app.router.lifespan_context(app), client_on(app) as client:
                check = {"hub.mode": "subscribe", "hub.challenge": "42"}
                for account, token, status in [
                    ("sales", "sales-verify", 200),
                    ("sales", fake.verify_token, 403),  # another number's token
                    ("default", fake.verify_token, 200),
                    ("nobody", fake.verify_token, 404),
                ]:
                    response = await client.get(
                        f"/channels/whatsapp/{account}",
                        params={**check, "hub.verify_token": token},
                    )
                    assert response.status_code == status, (account, token)
            await adapters["whatsapp"].close()
