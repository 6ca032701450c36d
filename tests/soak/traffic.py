"""Mixed traffic against the gateway (through the proxy the chaos driver cuts): OpenAI API
calls, the sessions API, signed Telegram, Slack and Discord webhooks (with the platforms'
retries of an update already taken), WebChat sockets, memory documents. Each conversation
sends its next message once the previous one was taken (or given up on), so a session's
messages have an order to check; a platform retries a call that failed, as the real ones do,
until a deadline."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import WebSocketException

from tests.soak.ledger import Ledger, Sent
from tests.soak.model import ANSWERED, REMEMBER_WORD, TOOL_WORD
from tests.soak.system import System

RETRY_FOR_S = 120.0  # a platform retries a failed delivery this long (within INBOUND's dedupe)
TELEGRAM_HOOK = "/channels/telegram/default"
SLACK_HOOK = "/channels/slack/default"
DISCORD_HOOK = "/channels/discord/default"


def conversation_number(conversation: str) -> int:
    """``c<kind>x<i>`` -> a number unique to the conversation."""
    kind, _, index = conversation[1:].partition("x")
    return 10_000 + int(kind) * 1000 + int(index)


def discord_channel(conversation: str) -> str:
    """The DM channel (a snowflake) a Discord conversation's slash commands come from."""
    return f"46{conversation_number(conversation):017d}"


@dataclass(frozen=True)
class Load:
    """Conversations per channel and the pause between a conversation's messages."""

    per_channel: int = 3
    think_s: tuple[float, float] = (1.0, 5.0)
    memory_every_s: float = 5.0
    platform_retry_p: float = 0.3  # a taken update is sent again (a platform's retry)


class Traffic:
    def __init__(self, system: System, ledger: Ledger, rng: random.Random, load: Load) -> None:
        self.system = system
        self.ledger = ledger
        self.rng = rng
        self.load = load
        self.stopping = asyncio.Event()
        self.webchat_seen: set[str] = set()  # markers answered in a live WebChat event
        self.background: set[asyncio.Task[None]] = set()
        self.client: httpx.AsyncClient | None = None

    # ---- running

    async def run(self) -> None:
        """Until :meth:`stop`; then the messages in flight finish (their retries included)."""
        headers = {"Authorization": f"Bearer {self.system.token}"}
        limits = httpx.Limits(max_connections=100, keepalive_expiry=2.0)
        async with httpx.AsyncClient(
            base_url=self.system.url, headers=headers, limits=limits, timeout=30
        ) as client:
            self.client = client
            kinds: list[Callable[[str], Coroutine[Any, Any, None]]] = [
                self.openai,
                self.api,
                self.telegram,
                self.slack,
                self.discord,
                self.webchat,
            ]
            tasks = [
                asyncio.create_task(kind(f"c{k}x{i}"))
                for k, kind in enumerate(kinds)
                for i in range(self.load.per_channel)
            ]
            tasks.append(asyncio.create_task(self.memory_documents()))
            await asyncio.gather(*tasks)
            if self.background:
                await asyncio.gather(*self.background)

    def stop(self) -> None:
        self.stopping.set()

    async def pause(self) -> None:
        """The think time between two messages of a conversation (ends early on stop)."""
        low, high = self.load.think_s
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stopping.wait(), self.rng.uniform(low, high))

    def new(self, channel: str, conversation: str) -> tuple[Sent, str]:
        roll = self.rng.random()
        kind = "tool" if roll < 0.25 else "remember" if roll < 0.35 else "plain"
        item = self.ledger.new(channel, conversation, kind)
        word = {"tool": TOOL_WORD, "remember": REMEMBER_WORD, "plain": "hello"}[kind]
        return item, f"{word} {item.marker} from {conversation}"

    async def retried(
        self, item: Sent, call: Callable[[int], Awaitable[httpx.Response]], ok: int = 200
    ) -> httpx.Response | None:
        """``call(attempt)`` until it answers ``ok`` (accepted) or a 4xx other than 408/429
        (refused), for RETRY_FOR_S at most (unknown)."""
        deadline = time.monotonic() + RETRY_FOR_S
        delay = 0.3
        while True:
            item.attempts += 1
            try:
                response = await call(item.attempts - 1)
            except (httpx.HTTPError, OSError) as exc:
                item.detail = type(exc).__name__
            else:
                if response.status_code == ok:
                    item.status = "accepted"
                    return response
                item.detail = f"HTTP {response.status_code}"
                if 400 <= response.status_code < 500 and response.status_code not in (408, 429):
                    item.status = "refused"
                    item.detail += f": {response.text[:200]}"
                    return None
            if time.monotonic() > deadline:
                item.status = "unknown"
                return None
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)

    def again(self, item: Sent, resend: Callable[[], Awaitable[Any]]) -> None:
        """Sometimes a platform sends a taken update again, a moment later."""
        if self.rng.random() >= self.load.platform_retry_p:
            return
        wait = self.rng.uniform(0.0, 3.0)

        async def later() -> None:
            await asyncio.sleep(wait)
            item.platform_retries += 1
            with contextlib.suppress(httpx.HTTPError, OSError):
                await resend()  # a lost copy is no loss: the first delivery was taken

        task = asyncio.create_task(later())
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    # ---- the channels

    async def openai(self, conversation: str) -> None:
        """Synchronous: the answer is the response. Not retried (no idempotency key)."""
        assert self.client is not None
        while not self.stopping.is_set():
            item, text = self.new("openai", conversation)
            item.attempts = 1
            try:
                response = await self.client.post(
                    "/v1/chat/completions",
                    headers={"X-Switchboard-Session": conversation},
                    json={"model": "switchboard", "messages": [{"role": "user", "content": text}]},
                    timeout=180,
                )
            except (httpx.HTTPError, OSError) as exc:
                item.status, item.detail = "unknown", type(exc).__name__
            else:
                if response.status_code == 200:
                    item.status = "accepted"
                    item.reply = str(response.json()["choices"][0]["message"]["content"])
                elif 400 <= response.status_code < 500 and response.status_code not in (408, 429):
                    item.status, item.detail = "refused", f"HTTP {response.status_code}"
                else:
                    item.status, item.detail = "unknown", f"HTTP {response.status_code}"
            await self.pause()

    async def api(self, conversation: str) -> None:
        """POST /api/sessions/{key}/messages with an Idempotency-Key: retried safely."""
        assert self.client is not None
        client = self.client
        key = f"main:soak:{conversation}"
        while not self.stopping.is_set():
            item, text = self.new("api", conversation)

            async def call(_: int, text: str = text, mark: str = item.marker) -> httpx.Response:
                return await client.post(
                    f"/api/sessions/{key}/messages",
                    json={"text": text},
                    headers={"Idempotency-Key": mark},
                )

            await self.retried(item, call, ok=202)
            await self.pause()

    async def telegram(self, conversation: str) -> None:
        assert self.client is not None and self.system.fakes is not None
        client, updates = self.client, self.system.fakes.updates
        user = updates.user(7_000_000 + conversation_number(conversation), "Soak", conversation)
        while not self.stopping.is_set():
            item, text = self.new("telegram", conversation)
            body, headers = updates.webhook(updates.message(text, user=user))

            async def call(_: int, body: bytes = body, h: dict[str, str] = headers) -> Any:
                return await client.post(TELEGRAM_HOOK, content=body, headers=h)

            if await self.retried(item, call) is not None:
                self.again(item, lambda call=call: call(0))  # type: ignore[misc]
            await self.pause()

    async def slack(self, conversation: str) -> None:
        assert self.client is not None and self.system.fakes is not None
        client, events = self.client, self.system.fakes.events
        user, channel = f"U{conversation.upper()}", f"D{conversation.upper()}"
        while not self.stopping.is_set():
            item, text = self.new("slack", conversation)
            envelope = events.envelope(events.message(user, text, channel))

            async def call(attempt: int, envelope: dict[str, Any] = envelope) -> Any:
                body, headers = events.request(envelope, retry_num=attempt or None)
                return await client.post(SLACK_HOOK, content=body, headers=headers)

            if await self.retried(item, call) is not None:
                self.again(item, lambda call=call, item=item: call(item.attempts))  # type: ignore[misc]
            await self.pause()

    async def discord(self, conversation: str) -> None:
        assert self.system.fakes is not None
        discord = self.system.fakes.discord
        channel, user = discord_channel(conversation), "41" + discord_channel(conversation)[2:]
        url = self.system.url + DISCORD_HOOK
        while not self.stopping.is_set():
            item, text = self.new("discord", conversation)
            payload = discord.interactions.slash_command(text, user_id=user, channel_id=channel)

            async def call(_: int, payload: dict[str, Any] = payload) -> httpx.Response:
                return await asyncio.to_thread(discord.send_interaction, url, payload)

            if await self.retried(item, call) is not None:
                self.again(item, lambda call=call: call(0))  # type: ignore[misc]
            await self.pause()

    async def webchat(self, conversation: str) -> None:
        """One socket per conversation, opened again when it drops; a send whose response
        never came is unknown (WebChat has no idempotency key: it is not sent again)."""
        ws_url = self.system.url.replace("http://", "ws://") + "/webchat/ws"
        socket: ClientConnection | None = None
        ids = iter(range(1, 1_000_000))
        while not self.stopping.is_set():
            item, text = self.new("webchat", conversation)
            deadline = time.monotonic() + RETRY_FOR_S
            while item.status == "pending":
                item.attempts += 1
                try:
                    if socket is None:
                        socket = await asyncio.wait_for(connect(ws_url), 10)
                        connected = await self._request(socket, f"c{next(ids)}", "connect",
                                                        token=self.system.token,
                                                        session=conversation)  # fmt: skip
                        if not connected.get("ok"):
                            raise WebSocketException(str(connected.get("error")))
                    answer = await self._request(socket, f"r{next(ids)}", "send", text=text)
                except (OSError, TimeoutError, WebSocketException) as exc:
                    item.detail = type(exc).__name__
                    if socket is not None:
                        await socket.close()
                        socket = None
                    if time.monotonic() > deadline:
                        item.status = "unknown"
                    elif getattr(exc, "_soak_sent", False):
                        item.status = "unknown"  # the send went out; its answer was lost
                    else:
                        await asyncio.sleep(1.0)
                    continue
                if answer.get("ok"):
                    item.status = "accepted"
                else:
                    error = answer.get("error") or {}
                    item.detail = str(error.get("code"))
                    if item.detail == "unavailable" and time.monotonic() < deadline:
                        await asyncio.sleep(1.0)
                        continue
                    item.status = "unknown" if item.detail == "unavailable" else "refused"
            await self.pause()
        if socket is not None:
            await socket.close()

    async def _request(
        self, socket: ClientConnection, rid: str, method: str, **params: Any
    ) -> dict[str, Any]:
        """Send a request and read frames up to its response (noting answered markers in the
        events on the way); an error after the frame went out is marked ``_soak_sent``."""
        await socket.send(json.dumps({"type": "req", "id": rid, "method": method,
                                      "params": params}))  # fmt: skip
        try:
            while True:
                frame = json.loads(await asyncio.wait_for(socket.recv(), 30))
                self._note_event(frame)
                if frame.get("type") == "res" and frame.get("id") == rid:
                    return dict(frame)
        except (OSError, TimeoutError, WebSocketException) as exc:
            if method == "send":
                exc._soak_sent = True  # type: ignore[union-attr]
            raise

    def _note_event(self, frame: dict[str, Any]) -> None:
        if frame.get("type") != "event" or frame.get("event") != "lifecycle":
            return
        payload = frame.get("payload") or {}
        found = ANSWERED.search(str(payload.get("text", "")))
        if found:
            self.webchat_seen.update(found.group(1).split())

    async def memory_documents(self) -> None:
        """A small document into memory every few seconds (the memory API); searched later."""
        assert self.client is not None
        client = self.client
        while not self.stopping.is_set():
            mark = self.ledger.next_marker()
            doc = f"# Soak note\n\nsoak note {mark} written\n"
            item = Sent(mark, "memory", "memory", "document")

            async def call(_: int, mark: str = mark, doc: str = doc) -> httpx.Response:
                return await client.post(
                    "/api/memory/documents",
                    params={"path": f"soak/{mark}.md"},
                    content=doc.encode(),
                    headers={"Content-Type": "text/markdown"},
                    timeout=60,
                )

            await self.retried(item, call)
            self.ledger.memory_docs[mark] = item.status
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), self.load.memory_every_s)
