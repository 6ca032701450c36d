"""The media service as its callers see it: the agent's attachments (image blocks, transcripts,
and a readable note when the service is down or a file expired) and its ``image`` tool asking
the model (the fake OpenAI-compatible one, through the real provider) about an image."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import nats
import pytest
from PIL import Image

from switchboard import bus, rpc
from switchboard.embedded import free_port
from switchboard.media import MediaClient, media_ref
from switchboard.v1 import messages_pb2
from switchboard_agent.media.attachments import AgentMedia
from switchboard_agent.media.image_tool import ImageTool
from switchboard_agent.outbound.publisher import OutboundPublisher
from switchboard_agent.providers.anthropic import AnthropicModel
from switchboard_agent.providers.base import ModelRequest
from switchboard_agent.providers.errors import ModelError
from switchboard_agent.providers.openai import OpenAIChatModel
from switchboard_agent.tools.client import CallRequest
from switchboard_agent.tools.local import LocalContext
from switchboard_agent.tools.message import MessageTool
from tests.fakes.llm import FakeLLM, FakeRequest, Reply, text_only
from tests.support import media_files
from tests.support.streams import outbound_parts

from .media_harness import media_service

SUBJECTS = bus.Subjects()


async def test_attachments_become_blocks_or_notes(
    nats_url: str, database_url: str, tmp_path: Path
) -> None:
    async with media_service(nats_url, database_url, tmp_path) as m:
        agent = AgentMedia(m.client, max_edge=100)
        photo = await m.client.ingest_bytes(media_files.jpeg(400, 200))
        voice = await m.client.ingest_bytes(media_files.ogg_voice())
        refs = [
            media_ref(photo.sha256, photo.mime),
            media_ref(voice.sha256, voice.mime),  # transcription is not configured here
            media_ref("f" * 64, "image/png"),  # never stored (or expired)
            "telegram:photo:AgACAgGone",
        ]
        image, reference, voice_note, expired, other = await agent.blocks(refs)
        assert image["type"] == "image" and image["source"]["media_type"] == "image/jpeg"
        decoded = Image.open(io.BytesIO(base64.b64decode(image["source"]["data"])))
        assert decoded.size == (100, 50)
        assert reference["text"] == f"[image {media_ref(photo.sha256, 'image/jpeg')}]"
        assert "voice note" in voice_note["text"]
        assert "SB_TRANSCRIPTION_API_KEY" in voice_note["text"]
        assert expired["text"] == "[an image was attached but has expired]"
        assert other["text"] == "[a photo was attached but could not be loaded]"


async def test_a_media_service_that_is_down_is_a_note() -> None:
    channel = rpc.channel(f"127.0.0.1:{free_port()}", "media-down-token-" + "x" * 20)
    try:
        agent = AgentMedia(MediaClient(channel), max_edge=1568)
        (block,) = await agent.blocks([media_ref("a" * 64, "image/jpeg")])
        assert block["type"] == "text"
        assert block["text"].startswith("[an image was attached but could not be loaded")
        assert "media service is unavailable" in block["text"]
    finally:
        await channel.close()


async def test_the_image_tool_asks_the_model(
    nats_url: str, database_url: str, tmp_path: Path
) -> None:
    seen: list[FakeRequest] = []

    def look(req: FakeRequest) -> Reply:
        seen.append(req)
        return Reply(text="a red and blue flag")

    with FakeLLM(look) as llm:
        model = OpenAIChatModel("gpt-4o-mini", "sk-test", f"{llm.base_url}/v1", max_retries=0)
        async with media_service(nats_url, database_url, tmp_path) as m:
            tool = ImageTool(AgentMedia(m.client, max_edge=64), model)
            photo = await m.client.ingest_bytes(media_files.jpeg(256, 128))
            ctx = LocalContext("run_1", "main:openai:ada", "main", messages_pb2.LaneItem())
            result = await tool.run(
                ctx,
                CallRequest(
                    "call_1",
                    "image",
                    {"image": media_ref(photo.sha256, photo.mime), "prompt": "what is it?"},
                ),
            )
            assert not result.is_error and result.content == "a red and blue flag"
            content = seen[0].messages[-1]["content"]
            assert [p["type"] for p in content] == ["image_url", "text"]
            assert content[1]["text"] == "what is it?"
            refused = await tool.run(
                ctx, CallRequest("call_2", "image", {"image": "/etc/passwd", "prompt": "x"})
            )
            assert refused.is_error and "media:<sha256> reference or an http(s) URL" in (
                refused.content
            )


async def test_the_message_tool_sends_only_files_the_service_knows(
    nats_url: str, database_url: str, tmp_path: Path
) -> None:
    """A known reference travels on the OUTBOUND part with the type the service sniffed (not
    the one the model wrote); an unknown one is a tool error and nothing is published."""
    nc = await nats.connect(nats_url)
    try:
        await bus.ensure_streams(nc.jetstream(), SUBJECTS)
        async with media_service(nats_url, database_url, tmp_path) as m:
            tool = MessageTool(OutboundPublisher(nc.jetstream(), SUBJECTS), media=m.client)
            photo = await m.client.ingest_bytes(media_files.png(8, 8))
            item = messages_pb2.LaneItem(
                session_key="main:telegram:42",
                agent="main",
                message=messages_pb2.InboundMessage(
                    channel="telegram", chat=messages_pb2.ChatRef(id="42"), message_id="m-1"
                ),
            )
            ctx = LocalContext("run_m", item.session_key, "main", item)
            unknown = media_ref("e" * 64, "image/png")
            refused = await tool.run(
                ctx, CallRequest("call_0", "message", {"text": "x", "media": [unknown]})
            )
            assert refused.is_error and "is not stored (or has expired)" in refused.content
            assert await outbound_parts(nc.jetstream()) == []

            claimed = media_ref(photo.sha256, "image/gif", "dot.png")  # the model's claim
            result = await tool.run(
                ctx, CallRequest("call_1", "message", {"text": "look", "media": [claimed]})
            )
            assert not result.is_error, result.content
            assert result.content == "sent to telegram chat 42 with 1 file(s)"
            [(_, part)] = await outbound_parts(nc.jetstream())
            assert list(part.media) == [media_ref(photo.sha256, "image/png", "dot.png")]
            assert part.text == "look"
    finally:
        await nc.close()


async def test_an_image_block_reaches_anthropic_in_its_wire_format(
    nats_url: str, database_url: str, tmp_path: Path
) -> None:
    """The agent's image block (from the real media service) goes to the fake Anthropic API
    through the real provider as Anthropic's base64 image source, and the fake checks it as
    Anthropic does (a block it would refuse is a 400)."""
    with FakeLLM(text_only("a flag")) as llm:
        model = AnthropicModel("claude-test", "sk-ant-test", llm.base_url, max_retries=0)
        async with media_service(nats_url, database_url, tmp_path) as m:
            photo = await m.client.ingest_bytes(media_files.jpeg(300, 150))
            block = await AgentMedia(m.client, max_edge=100).image_block(photo.sha256)
        content = [block, {"type": "text", "text": "what is it?"}]
        request = ModelRequest("", [{"role": "user", "content": content}], max_tokens=64)
        assert [e async for e in model.stream(request)][-1].text == "a flag"
        sent = llm.calls[0].request.body["messages"][0]["content"]
        assert sent[1] == {"type": "text", "text": "what is it?"}
        image = sent[0]
        assert image["type"] == "image" and set(image["source"]) == {"type", "media_type", "data"}
        assert (image["source"]["type"], image["source"]["media_type"]) == ("base64", "image/jpeg")
        decoded = Image.open(io.BytesIO(base64.b64decode(image["source"]["data"])))
        assert (decoded.format, decoded.size) == ("JPEG", (100, 50))

        wrong = {**block, "source": {**block["source"], "media_type": "image/png"}}
        bad = ModelRequest("", [{"role": "user", "content": [wrong]}], max_tokens=64)
        with pytest.raises(ModelError) as refused:
            [e async for e in model.stream(bad)]
        assert "does not match the provided media type image/png" in refused.value.message
