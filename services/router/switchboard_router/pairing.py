"""DM and group pairing (docs/trust.md): an unknown sender under the DM
policy ``pairing`` gets a code, and so does an unknown group under the group policy
``pairing`` (posted into the group); the operator approves or denies it (gRPC
``RouterAdmin``, the admin API, ``switchboard pairing``); an approved sender's (or group's)
next message runs. A sender approved as an owner (``--owner``) is one of the owners
(``PairedSender.role``).

A group is recorded as the sender ``group:<chat id>`` (:func:`group_sender`): its requests and
approvals share the keys, the expiry and the pending limit of the channel's DM requests, and
the request's ``chat_id`` is the group's.

State lives in the NATS KV bucket ``sb_pairing`` so every router replica sees the same:

- ``req.<channel>.<code>``: a pending :class:`PairingRequest` (expires ``ttl_s`` after it was
  made; an expired one counts as absent and is removed when met);
- ``pending.<channel>.<sender hash>``: the code of the sender's pending request, so a sender who
  writes again gets no second code;
- ``paired.<channel>.<sender hash>``: an approved :class:`PairedSender`.

Sender ids are hashed into keys (KV keys allow few characters); the values keep them whole.

**Per account** (a channel with two bots or workspaces, ``InboundMessage.account``): a request,
its pending marker and an approval belong to the account the sender wrote to, so an approval on
one bot admits nobody on another. The account ``default`` (and none) hashes the sender alone, as
before accounts existed; a named account hashes ``<account>/<sender>`` (:func:`_sender_key`).
Codes stay unique per channel: ``switchboard pairing approve <channel> <code>`` needs no account.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from dataclasses import dataclass

from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

from switchboard import trust
from switchboard.v1 import messages_pb2, router_pb2

from .errors import NotFound, PairingError

# No 0/O, 1/I/L: codes are read aloud and typed.
ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 8
_CODE = re.compile(rf"^[{ALPHABET}]{{{CODE_LENGTH}}}$")
_CHANNEL = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
GROUP_PREFIX = "group:"
DEFAULT_ACCOUNT = "default"


def group_sender(chat_id: str) -> str:
    """The pairing store's sender for a group chat."""
    return GROUP_PREFIX + chat_id


def is_group(sender: str) -> bool:
    return sender.startswith(GROUP_PREFIX)


def channel_token(channel: str) -> str:
    if not _CHANNEL.match(channel):
        raise PairingError(f"not a channel name: {channel!r}")
    return channel


def normalize_code(code: str) -> str:
    value = code.strip().upper().replace("-", "")
    if not _CODE.match(value):
        raise PairingError(f"a pairing code is {CODE_LENGTH} letters and digits")
    return value


def _sender_key(sender: str, account: str = "") -> str:
    scoped = sender if account in ("", DEFAULT_ACCOUNT) else f"{account}/{sender}"
    return hashlib.sha256(scoped.encode()).hexdigest()[:32]


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class Asked:
    """The outcome of an unknown sender's message: its request, and whether it is new (then
    the sender is sent the code) or the limit of pending requests was reached (no code)."""

    request: router_pb2.PairingRequest | None
    new: bool
    limited: bool = False


class PairingStore:
    def __init__(self, kv: KeyValue, ttl_s: float, max_pending: int) -> None:
        self.kv = kv
        self.ttl_ms = int(ttl_s * 1000)
        self.max_pending = max_pending

    async def paired_sender(
        self, channel: str, sender: str, account: str = ""
    ) -> router_pb2.PairedSender | None:
        """The approval of ``sender`` on ``channel``'s ``account`` (one KV get), None when there
        is none."""
        key = f"paired.{channel_token(channel)}.{_sender_key(sender, account)}"
        try:
            entry = await self.kv.get(key)
        except KeyNotFoundError:
            return None
        if not entry.value:
            return None
        paired = router_pb2.PairedSender()
        paired.ParseFromString(entry.value)
        return paired

    async def is_paired(self, channel: str, sender: str, account: str = "") -> bool:
        return await self.paired_sender(channel, sender, account) is not None

    async def ask(self, msg: messages_pb2.InboundMessage, sender: str) -> Asked:
        """The pending request of ``sender`` on ``msg.channel`` (and its account), made if
        there is none."""
        channel = channel_token(msg.channel)
        pending_key = f"pending.{channel}.{_sender_key(sender, msg.account)}"
        existing = await self._pending_code(pending_key)
        if existing is not None:
            request = await self._request(channel, existing)
            if request is not None:
                return Asked(request, new=False)
        if len(await self.requests(channel)) >= self.max_pending:
            return Asked(None, new=False, limited=True)
        now = _now_ms()
        request = router_pb2.PairingRequest(
            channel=channel,
            account=msg.account,
            sender=sender,
            code="".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH)),
            chat_id=msg.chat.id,
            text=msg.text[:200],
            created_at_ms=now,
            expires_at_ms=now + self.ttl_ms,
        )
        try:
            # create-if-absent: of two replicas seeing the sender at once, one wins
            await self.kv.create(pending_key, request.code.encode())
        except KeyWrongLastSequenceError:
            raced = await self._pending_code(pending_key)
            won = await self._request(channel, raced) if raced else None
            return Asked(won, new=False)
        await self.kv.put(f"req.{channel}.{request.code}", request.SerializeToString())
        return Asked(request, new=True)

    async def _pending_code(self, key: str) -> str | None:
        try:
            entry = await self.kv.get(key)
        except KeyNotFoundError:
            return None
        return entry.value.decode() if entry.value else None

    async def _request(self, channel: str, code: str) -> router_pb2.PairingRequest | None:
        try:
            entry = await self.kv.get(f"req.{channel}.{code}")
        except KeyNotFoundError:
            entry = None
        request = router_pb2.PairingRequest()
        if entry is not None and entry.value:
            request.ParseFromString(entry.value)
            if request.expires_at_ms > _now_ms():
                return request
            await self._forget(request)  # expired
        return None

    async def _forget(self, request: router_pb2.PairingRequest) -> None:
        for key in (
            f"req.{request.channel}.{request.code}",
            f"pending.{request.channel}.{_sender_key(request.sender, request.account)}",
        ):
            await self.kv.delete(key)  # a delete marker: fine when the key is gone already

    async def _keys(self, prefix: str) -> list[str]:
        """The keys under ``prefix``, deleted ones included (their readers skip them), from
        the bucket's stream's own list of subjects: one request to the server. ``kv.keys()``
        depends on a watcher's first pass over the bucket, and once in CI a request that
        ``put`` had stored was missing from a listing made right after."""
        kv = self.kv
        info = await kv._js.stream_info(kv._stream, subjects_filter=f"{kv._pre}{prefix}>")
        return sorted(s.removeprefix(kv._pre) for s in (info.state.subjects or {}))

    async def requests(self, channel: str = "") -> list[router_pb2.PairingRequest]:
        prefix = f"req.{channel_token(channel)}." if channel else "req."
        found = []
        for key in await self._keys(prefix):
            _, chan, code = key.split(".", 2)
            request = await self._request(chan, code)
            if request is not None:
                found.append(request)
        return sorted(found, key=lambda r: r.created_at_ms)

    async def approve(
        self, channel: str, code: str, by: str, owner: bool = False
    ) -> router_pb2.PairedSender:
        """Admit the sender (or group) of request ``code``; ``owner``: as one of the owners
        (not for a group: a group is never an owner, docs/trust.md)."""
        channel = channel_token(channel)
        request = await self._request(channel, normalize_code(code))
        if request is None:
            raise NotFound(f"no pending pairing request {code!r} on {channel}")
        group = is_group(request.sender)
        if owner and group:
            raise PairingError("a group cannot be approved as an owner: approve it without owner")
        role = trust.Role.OWNER if owner else trust.Role.MEMBER if group else trust.Role.USER
        paired = router_pb2.PairedSender(
            channel=channel,
            account=request.account,
            sender=request.sender,
            approved_by=by,
            approved_at_ms=_now_ms(),
            role=str(role),
        )
        await self.kv.put(
            f"paired.{channel}.{_sender_key(request.sender, request.account)}",
            paired.SerializeToString(),
        )
        await self._forget(request)
        return paired

    async def deny(self, channel: str, code: str) -> router_pb2.PairingRequest:
        channel = channel_token(channel)
        request = await self._request(channel, normalize_code(code))
        if request is None:
            raise NotFound(f"no pending pairing request {code!r} on {channel}")
        await self._forget(request)
        return request

    async def paired(self, channel: str = "") -> list[router_pb2.PairedSender]:
        prefix = f"paired.{channel_token(channel)}." if channel else "paired."
        found = []
        for key in await self._keys(prefix):
            try:
                entry = await self.kv.get(key)
            except KeyNotFoundError:
                continue
            if entry.value:
                sender = router_pb2.PairedSender()
                sender.ParseFromString(entry.value)
                found.append(sender)
        return sorted(found, key=lambda s: s.approved_at_ms)

    async def revoke(self, channel: str, sender: str, account: str = "") -> router_pb2.PairedSender:
        """Take back ``sender``'s approval on ``channel``'s ``account`` (none: ``default``)."""
        key = f"paired.{channel_token(channel)}.{_sender_key(sender, account)}"
        try:
            entry = await self.kv.get(key)
        except KeyNotFoundError:
            entry = None
        if entry is None or not entry.value:
            where = channel if account in ("", DEFAULT_ACCOUNT) else f"{channel} ({account})"
            raise NotFound(f"{sender!r} is not paired on {where}")
        paired = router_pb2.PairedSender()
        paired.ParseFromString(entry.value)
        await self.kv.delete(key)
        return paired
