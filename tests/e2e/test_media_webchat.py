"""WebChat files both ways, through the WebSocket protocol: every service a real process, a
``websockets`` client. An image attached to ``send`` (base64 in the frame) is ingested and
reaches the model as an image block; the model sends it back with the ``message`` tool and the
page gets a ``message`` event whose file it fetches from ``GET /api/media/<sha256>`` (with the
gateway token only). A file the media service refuses is a ``bad_attachment`` error."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect

from tests.e2e.media_scripts import send_back
from tests.fakes.llm import FakeLLM
from tests.support import media_files
from tests.support.services import ServiceProcesses, with_fake_model

WAIT_S = 60.0


@pytest.fixture
def services(tmp_path: Path, nats_url: str, database_url: str) -> Iterator[ServiceProcesses]:
    with with_fake_model(tmp_path, nats_url, database_url, send_back, {}) as procs:
        yield procs


class Socket:
    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.events: list[dict[str, Any]] = []
        self.ids = iter(range(1, 1000))

    async def request(self, method: str, **params: Any) -> dict[str, Any]:
        rid = f"r{next(self.ids)}"
        await self.ws.send(
            json.dumps({"type": "req", "id": rid, "method": method, "params": params})
        )
        while True:
            frame = json.loads(await asyncio.wait_for(self.ws.recv(), WAIT_S))
            if frame.get("type") == "event":
                self.events.append(frame)
            elif frame.get("id") == rid:
                return dict(frame)

    async def event(self, name: str) -> dict[str, Any]:
        """The payload of the first ``name`` event (kept or still to come)."""
        async with asyncio.timeout(WAIT_S):
            while True:
                for frame in self.events:
                    if frame["event"] == name:
                        return dict(frame["payload"])
                frame = json.loads(await self.ws.recv())
                if frame.get("type") == "event":
                    self.events.append(frame)


async def scenario(services: ServiceProcesses) -> tuple[dict[str, Any], dict[str, Any]]:
    url = services.url.replace("http://", "ws://") + "/webchat/ws"
    image = base64.b64encode(media_files.png(40, 20)).decode()
    async with connect(url, max_size=None) as ws:
        chat = Socket(ws)
        connected = await chat.request("connect", token=services.token)
        assert connected["ok"], connected
        refused = await chat.request(
            "send", text="and this?", attachments=[{"data": base64.b64encode(b"%PDF-1.4").decode()}]
        )
        bad = await chat.request("send", text="x", attachments=[{"data": "not base64!"}])
        assert (bad["ok"], bad["error"]["code"]) == (False, "bad_attachment")
        sent = await chat.request(
            "send",
            text="what is this?",
            attachments=[{"data": image, "name": "dot.png", "mime": "image/png"}],
        )
        assert sent["ok"], sent
        return refused, await chat.event("message")


def test_an_attached_image_reaches_the_model_and_comes_back(services: ServiceProcesses) -> None:
    llm: FakeLLM = services.llm  # type: ignore[attr-defined]
    png = media_files.png(40, 20)
    sha = hashlib.sha256(png).hexdigest()
    refused, shown = asyncio.run(scenario(services))

    assert refused["ok"] is False and refused["error"]["code"] == "bad_attachment"
    assert "Attachment 1" in refused["error"]["message"]
    # The model saw the image as a block, and its reference next to it.
    [first] = [c for c in llm.calls if "what is this?" in json.dumps(c.request.messages)][:1]
    user = [m for m in first.request.messages if m.get("role") == "user"][-1]
    assert [p["type"] for p in user["content"]][:2] == ["text", "image_url"]
    # The message tool's message, shown by the page, with the file's URL.
    assert shown["text"] == "here it is"
    [item] = shown["media"]
    assert item["mime"] == "image/png" and item["url"] == f"/api/media/{sha}"
    assert item["ref"].startswith(f"media:{sha}?mime=image%2Fpng")

    auth = {"Authorization": f"Bearer {services.token}"}
    got = httpx.get(services.url + item["url"], headers=auth, timeout=30)
    assert got.status_code == 200 and got.content == png
    assert got.headers["content-type"] == "image/png"
    assert got.headers["x-content-type-options"] == "nosniff"
    assert httpx.get(services.url + item["url"], timeout=30).status_code == 401
    missing = httpx.get(f"{services.url}/api/media/{'0' * 64}", headers=auth, timeout=30)
    assert missing.status_code == 404
    bad = httpx.get(f"{services.url}/api/media/..%2Fetc", headers=auth, timeout=30)
    assert bad.status_code in (400, 404)
