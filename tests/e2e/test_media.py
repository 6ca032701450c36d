"""Media end to end: `switchboard up` (media included, one stack for the module), the agent
against the fake OpenAI-compatible model. An OpenAI API request with an ``image_url`` data URL
reaches the model as an image part of bounded size in the Chat Completions wire format; a bad
image is a 400 in OpenAI's error shape and nothing else happens."""

from __future__ import annotations

import base64
import io
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from tests.fakes.llm import FakeLLM, FakeRequest, Reply
from tests.support import media_files
from tests.support.stack import Stack, start_stack, stop_stack


def describe_images(req: FakeRequest) -> Reply:
    """Answers with the number of images in the last user message."""
    last = [m for m in req.messages if m.get("role") == "user"][-1]
    content = last.get("content")
    parts = content if isinstance(content, list) else []
    images = [p for p in parts if isinstance(p, dict) and p.get("type") == "image_url"]
    return Reply(text=f"I see {len(images)} image(s).")


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    with FakeLLM(describe_images) as fake:
        yield fake


@pytest.fixture(scope="module")
def services(llm: FakeLLM) -> Iterator[Stack]:
    # Not under pytest's tmp tree (see tests/support/servers.py: pgserver and root).
    home = Path(tempfile.mkdtemp(prefix="sb-media-"))
    env = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": f"{llm.base_url}/v1"}
    stack = start_stack(home / "home", env, timeout=120)
    try:
        yield stack
    finally:
        stop_stack(stack)
        shutil.rmtree(home, ignore_errors=True)


def stored(stack: Stack) -> set[Path]:
    return set((stack.home / "media").glob("*/*"))


def data_url(data: bytes, mime: str = "image/jpeg") -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def ask(services: Stack, parts: list[dict[str, Any]]) -> httpx.Response:
    return httpx.post(
        f"{services.url}/v1/chat/completions",
        headers={"Authorization": f"Bearer {services.token}"},
        json={"model": "switchboard", "messages": [{"role": "user", "content": parts}]},
        timeout=120,
    )


def model_images(llm: FakeLLM) -> list[Image.Image]:
    """The images of the model's last request, decoded from their data URLs."""
    last = [m for m in llm.calls[-1].request.messages if m.get("role") == "user"][-1]
    found: list[Image.Image] = []
    for part in last["content"]:
        if part.get("type") == "image_url":
            url = part["image_url"]["url"]
            head, _, payload = url.partition(",")
            assert head == "data:image/jpeg;base64", head
            found.append(Image.open(io.BytesIO(base64.b64decode(payload))))
    return found


def test_an_image_url_data_url_reaches_the_model_resized(services: Stack, llm: FakeLLM) -> None:
    photo = media_files.jpeg(2400, 1600, gps=True)  # larger than the model's 1568 px
    response = ask(
        services,
        [
            {"type": "text", "text": "What is in this picture?"},
            {"type": "image_url", "image_url": {"url": data_url(photo), "detail": "auto"}},
        ],
    )
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == "I see 1 image(s)."
    (image,) = model_images(llm)
    assert image.format == "JPEG" and image.size == (1568, 1045)
    assert not image.getexif()  # the GPS position did not travel to the model
    user = [m for m in llm.calls[-1].request.messages if m.get("role") == "user"][-1]
    texts = [p["text"] for p in user["content"] if p.get("type") == "text"]
    assert texts[0] == "What is in this picture?"
    assert any(t.startswith("[image media:") for t in texts)


def test_an_image_alone_is_a_message(services: Stack, llm: FakeLLM) -> None:
    response = ask(
        services,
        [{"type": "image_url", "image_url": {"url": data_url(media_files.png(), "image/png")}}],
    )
    assert response.status_code == 200, response.text
    (image,) = model_images(llm)
    assert image.size == (16, 16)


@pytest.mark.parametrize(
    ("url", "why"),
    [
        (data_url(media_files.truncated_jpeg()), "truncated"),
        (data_url(media_files.zip_polyglot()), "polyglot"),
        (data_url(media_files.png_bomb(), "image/png"), "decompression bomb"),
        ("data:image/png;base64,@@@", "base64"),
        ("http://127.0.0.1:1/cat.png", "refused"),
        ("file:///etc/passwd", "data: or http(s)"),
    ],
)
def test_bad_images_are_a_400(services: Stack, llm: FakeLLM, url: str, why: str) -> None:
    before, files = len(llm.calls), stored(services)
    response = ask(
        services,
        [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": url}}],
    )
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == "messages"
    assert why in error["message"], error
    assert len(llm.calls) == before  # nothing reached the model
    assert stored(services) == files  # nothing stored
