"""``POST /channels/{channel}/{account}``: a platform's webhook. Authenticated by the
platform's own signature or secret (the adapter verifies it), not by the gateway token. A
channel the gateway does not serve, or an account its adapter is not configured with, is 404
before any verification work."""

from __future__ import annotations

import time

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from ..conversations import Conversations
from ..errors import ApiError
from .accounts import Accounts
from .base import ChannelAdapter, ChannelError, InboundRequest, served_accounts
from .typing import Typing

router = APIRouter()


@router.post("/channels/{channel}/{account}")
async def receive(channel: str, account: str, request: Request) -> JSONResponse:
    adapters: dict[str, ChannelAdapter] = request.app.state.channels
    adapter = adapters.get(channel)
    if adapter is None:
        raise ApiError(404, f"No channel {channel!r} is configured.", code="unknown_channel")
    accounts = served_accounts(adapter)
    if accounts is not None and account not in accounts:  # before any verification work
        raise ApiError(
            404,
            f"No account {account[:64]!r} is configured on channel {channel!r}.",
            code="unknown_account",
        )
    call = InboundRequest(
        channel,
        account,
        {k.lower(): v for k, v in request.headers.items()},
        await request.body(),
        int(time.time() * 1000),
    )
    try:
        adapter.verify(call)
        inbound = adapter.parse(call)
    except ChannelError as exc:
        raise ApiError(exc.status, exc.message, code="channel_refused") from exc
    conversations: Conversations = request.app.state.conversations
    typing: Typing = request.app.state.typing
    for message in inbound.messages:
        message.channel, message.account = channel, account
        message.received_at_ms = message.received_at_ms or call.received_at_ms
        fetch = getattr(adapter, "fetch_attachments", None)  # attachments into media first
        if fetch is not None:
            await fetch(message)
        # Before publishing: under load the run's start event can arrive before the ack.
        typing.expect(adapter, message)
        await conversations.publish(message)
    return JSONResponse(inbound.reply if inbound.reply is not None else {"ok": True})


@router.get("/channels/{channel}/{account}")
async def challenge(channel: str, account: str, request: Request) -> PlainTextResponse:
    """A platform's check of its webhook URL (WhatsApp's ``hub.challenge``), answered by an
    adapter with ``challenge(query) -> str``; 404 for any other."""
    adapters: dict[str, ChannelAdapter] = request.app.state.channels
    served = adapters.get(channel)
    adapter: object = None
    if isinstance(served, Accounts):
        adapter = served.adapters.get(account)
    elif served is not None and account in (served_accounts(served) or ()):
        adapter = served
    answer = getattr(adapter, "challenge", None)
    if answer is None:
        raise ApiError(404, "No webhook check on this channel.", code="unknown_channel")
    try:
        text: str = answer(dict(request.query_params))
    except ChannelError as exc:
        raise ApiError(exc.status, exc.message, code="channel_refused") from exc
    return PlainTextResponse(text)
