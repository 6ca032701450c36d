"""Inbound webhooks (docs/channels/webhooks.md): ``POST /hooks/wake`` (a
system event for the agent's main session), ``POST /hooks/agent`` (an agent turn, its reply
optionally delivered to a chat) and ``POST /hooks/<mapping>`` (a templated one of either, from
``SB_HOOKS_MAPPINGS``).

Not the gateway token: ``Authorization: Bearer <SB_HOOKS_TOKEN>`` or a mapping's own token (or
its body signature), compared in constant time, before the body is parsed. A token in the query
string is refused. Served only when a hooks token or a mapping is configured (else 404).
Each call publishes one InboundMessage on channel ``hooks``; an ``Idempotency-Key`` (or a
mapping's ``id``) becomes its message id, so a sender's retry within the INBOUND stream's
duplicate window is published once.

Hooks stay in their lane (docs/trust.md): ``/hooks/agent`` runs in a session under ``hook:``
(any other ``session_key`` is a 400: a payload must not write into a person's chat) and
delivers only to a target of ``SB_HOOKS_TARGETS``, named (``"deliver": "<name>"``) or written
out in full; a mapping's own ``deliver`` is configuration and stays.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from dataclasses import dataclass
from typing import Literal

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from switchboard.errors import ConfigError
from switchboard.sessions import AgentId, hook_key, parse_session_key
from switchboard.v1 import messages_pb2

from .channels.base import ChannelAdapter
from .channels.typing import Typing
from .config import GatewaySettings
from .conversations import Conversations
from .errors import ApiError, checked_session_key
from .hooks_auth import authenticate, message_id_for, parse_json, parse_model, verify_signature
from .hooks_config import (
    Deliver,
    HookMapping,
    bounded,
    main_session_key,
    named_target,
    parse_mappings,
    render,
)

log = logging.getLogger(__name__)
router = APIRouter(prefix="/hooks")
CHANNEL = "hooks"
ACCOUNT = "default"
_NAME = re.compile(r"[A-Za-z0-9_.@-]{1,64}")


def system_event(text: str, source: str) -> str:
    """A wake event's text as the model reads it: marked as an event, not the user speaking."""
    return f"[System event from webhook {source!r}]\n{text}"


class WakeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1)
    mode: Literal["now"] = "now"  # no heartbeat runs exist: every event runs now


class AgentBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    message: str = Field(min_length=1)
    name: str | None = Field(default=None, description="session hook:<name>; 1-64 of A-Za-z0-9_.@-")
    agent: AgentId | None = None
    session_key: str | None = Field(default=None, description="a key under hook:")
    deliver: str | Deliver | None = Field(
        default=None, description="a target of SB_HOOKS_TARGETS: its name, or written out"
    )


@dataclass(frozen=True)
class Hooks:
    """What the hooks endpoints need: the global token and the mappings (by name)."""

    token: str
    mappings: dict[str, HookMapping]


def mount(app: FastAPI, settings: GatewaySettings, channels: dict[str, ChannelAdapter]) -> None:
    """Serve ``/hooks/*`` on ``app`` when a hooks token or a mapping is configured. A target
    (``SB_HOOKS_TARGETS``) or a mapping that delivers to a channel the gateway does not serve
    is a configuration error."""
    token = settings.hooks_token.get_secret_value()
    served = ", ".join(sorted(channels)) or "none"
    for name, target in settings.hooks_targets.items():
        if target.channel not in channels:
            raise ConfigError(
                f"SB_HOOKS_TARGETS[{name!r}].channel: {target.channel!r} is not a channel this "
                f"gateway serves ({served})"
            )
    mappings = parse_mappings(
        settings.hooks_mappings.get_secret_value(),
        hooks_token=token,
        gateway_token=settings.gateway_token.get_secret_value(),
    )
    for name, mapping in mappings.items():
        if mapping.deliver is not None and mapping.deliver.channel not in channels:
            raise ConfigError(
                f"SB_HOOKS_MAPPINGS[{name!r}].deliver.channel: {mapping.deliver.channel!r} is "
                f"not a channel this gateway serves ({served})"
            )
    if token or mappings:
        app.state.hooks = Hooks(token, mappings)
        app.include_router(router)


def _target(request: Request, deliver: Deliver | None) -> messages_pb2.DeliveryTarget | None:
    if deliver is None:
        return None
    channels: dict[str, ChannelAdapter] = request.app.state.channels
    if deliver.channel not in channels:
        served = ", ".join(sorted(channels)) or "none"
        raise ApiError(
            400,
            f"deliver.channel {deliver.channel!r} is not a channel this gateway serves "
            f"(served: {served}).",
            code="unknown_channel",
            param="deliver.channel",
        )
    return messages_pb2.DeliveryTarget(
        channel=deliver.channel,
        account=deliver.account,
        chat=messages_pb2.ChatRef(id=deliver.to, type=deliver.chat_type),
        thread_id=deliver.thread,
    )


def _configured_target(request: Request, given: str | Deliver | None) -> Deliver | None:
    """The ``SB_HOOKS_TARGETS`` target a call's ``deliver`` names or writes out; a 400 naming
    the configured targets (never what was given: a chat id is not the caller's to learn)."""
    if given is None:
        return None
    settings: GatewaySettings = request.app.state.settings
    targets = settings.hooks_targets
    found = named_target(given, targets)
    if found is not None:
        return found
    names = ", ".join(repr(n) for n in sorted(targets))
    configured = f"the configured targets are {names}" if targets else "none is configured"
    raise ApiError(
        400,
        "deliver: a hook delivers only to a target named in SB_HOOKS_TARGETS, by its name "
        f'("deliver": "<name>") or written out in full; {configured}.',
        code="unknown_target",
        param="deliver",
    )


def _hook_session(given: str) -> str:
    """A ``session_key`` a call gave: valid, and under ``hook:`` (a webhook's payload must not
    write into a person's chat, the API's sessions or a sub-agent's)."""
    key = checked_session_key(given, "session_key")
    if parse_session_key(key).kind != "hook":
        raise ApiError(
            400,
            'session_key: webhook sessions live under hook: (hook:<name>, or give "name"); '
            "a key outside it is refused.",
            code="session_key_not_hook",
            param="session_key",
        )
    return key


# --- publishing --------------------------------------------------------------------------------


async def _publish(
    request: Request,
    *,
    source: str,
    text: str,
    session_key: str,
    agent: str,
    message_id: str,
    target: messages_pb2.DeliveryTarget | None,
) -> JSONResponse:
    message = messages_pb2.InboundMessage(
        channel=CHANNEL,
        account=ACCOUNT,
        sender=f"hook:{source}",
        chat=messages_pb2.ChatRef(id=session_key, type="direct"),
        text=text,
        message_id=message_id,
        received_at_ms=int(time.time() * 1000),
        session_key=session_key,
        agent=agent,
    )
    if target is not None:
        message.deliver_to.CopyFrom(target)
    conversations: Conversations = request.app.state.conversations
    new = await conversations.publish(message)
    if target is not None and new:
        typing: Typing = request.app.state.typing
        shown = messages_pb2.InboundMessage(
            message_id=message_id,
            account=target.account,
            chat=target.chat,
            thread_id=target.thread_id,
        )
        typing.expect(request.app.state.channels[target.channel], shown)
    log.info(
        "hook accepted",
        extra={"hook": source, "session": session_key, "duplicate": not new},
    )
    return JSONResponse(
        {"ok": True, "message_id": message_id, "session_key": session_key, "duplicate": not new},
        status_code=202,
    )


def _hooks(request: Request) -> Hooks:
    hooks: Hooks = request.app.state.hooks
    return hooks


def _global_token(request: Request) -> str:
    token = _hooks(request).token
    if not token:  # only mappings with their own tokens are configured
        raise ApiError(404, "Not found: SB_HOOKS_TOKEN is not set.", code="not_served")
    return token


def _checked_text(text: str, limit: int, param: str) -> str:
    if len(text) > limit:
        raise ApiError(
            400,
            f"Too much text: {len(text)} characters, at most {limit} (SB_HOOKS_MAX_MESSAGE_CHARS).",
            code="too_much_text",
            param=param,
        )
    return text


@router.post("/wake", status_code=202)
async def wake(request: Request) -> JSONResponse:
    authenticate(request, _global_token(request))
    body = parse_model(WakeBody, await request.body())
    settings: GatewaySettings = request.app.state.settings
    text = _checked_text(body.text, settings.hooks_max_message_chars, "text")
    agent = settings.default_agent
    return await _publish(
        request,
        source="wake",
        text=system_event(text, "wake"),
        session_key=main_session_key(agent),
        agent=agent,
        message_id=message_id_for(request, "wake"),
        target=None,
    )


@router.post("/agent", status_code=202)
async def agent_turn(request: Request) -> JSONResponse:
    authenticate(request, _global_token(request))
    body = parse_model(AgentBody, await request.body())
    settings: GatewaySettings = request.app.state.settings
    text = _checked_text(body.message, settings.hooks_max_message_chars, "message")
    if body.name is not None and _NAME.fullmatch(body.name) is None:
        raise ApiError(400, "name: 1-64 characters of A-Za-z0-9_.@-", param="name")
    name = body.name or uuid.uuid4().hex
    key = _hook_session(body.session_key) if body.session_key is not None else hook_key(name)
    return await _publish(
        request,
        source=body.name or "agent",
        text=text,
        session_key=key,
        agent=body.agent or settings.default_agent,
        message_id=message_id_for(request, "agent"),
        target=_target(request, _configured_target(request, body.deliver)),
    )


@router.post("/{name}", status_code=202)
async def mapped(name: str, request: Request) -> JSONResponse:
    mapping = _hooks(request).mappings.get(name)
    if mapping is None:
        raise ApiError(404, f"No webhook mapping {name!r} is configured.", code="unknown_hook")
    if mapping.signature is not None:
        body = await request.body()
        verify_signature(request, mapping.signature, body)
    else:
        own = mapping.token.get_secret_value() if mapping.token is not None else ""
        authenticate(request, own or _global_token(request))
        body = await request.body()
    payload = parse_json(body)
    headers = {k.lower(): v for k, v in request.headers.items()}
    settings: GatewaySettings = request.app.state.settings
    limit = settings.hooks_max_message_chars
    text = render(mapping.message, payload, headers, limit)
    if not text.strip():
        raise ApiError(400, f"Mapping {name!r} rendered an empty message from this payload.")
    agent = mapping.agent or settings.default_agent
    if mapping.action == "wake":
        key, text = main_session_key(agent), bounded(system_event(text, name), limit)
    else:
        key = _mapped_session_key(name, render(mapping.session_key, payload, headers, 300))
    return await _publish(
        request,
        source=name,
        text=text,
        session_key=key,
        agent=agent,
        message_id=message_id_for(request, name, render(mapping.id, payload, headers, 200)),
        target=_target(request, mapping.deliver),
    )


def _mapped_session_key(name: str, rendered: str) -> str:
    """A mapping's session: ``hook:<name>`` by default; a rendered key stays under ``hook:``
    (a payload field cannot steer the run into a person's chat session)."""
    if not rendered:
        return hook_key(name)
    key = rendered if rendered.startswith("hook:") else f"hook:{rendered}"
    try:
        return checked_session_key(key, "session_key")
    except ApiError as exc:
        raise ApiError(400, f"Mapping {name!r} rendered an unusable key. {exc.message}") from None
