"""What a fired job does. ``message`` and ``heartbeat`` publish a system event on INBOUND
(``sb.inbound.cron``) with ``Nats-Msg-Id = cron:<job>:<slot ms>``, so the same slot fired
twice (a replica killed between its publish and its commit) reaches the router once; the
router and the session's lane take it from there like any message. ``webhook`` POSTs JSON
through the SSRF guard. ``watch_url`` (a guarded GET) and ``watch_file`` (a regular file of the
agent's workspace, read beneath it following no symlink) publish only when the content's
sha256 changed since the last look (the first look only records it)."""

from __future__ import annotations

import asyncio
import errno
import hashlib
import json
import os
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from nats.js import JetStreamContext

from switchboard import bus, scheduling
from switchboard.beneath import O_CLOEXEC, O_PATH, NotRegular, TooLarge, read_regular
from switchboard.net.errors import FetchError
from switchboard.net.fetch import Fetcher
from switchboard.v1 import messages_pb2

from .errors import ActionFailed
from .jobs import DEFAULT_HEARTBEAT, Job

EXCERPT_CHARS = 2000
ABSENT = "absent"  # the sha256 field of a watched file that does not exist


@dataclass(frozen=True)
class Outcome:
    result: str  # "published", "duplicate", "HTTP 200", "unchanged", "first look"...
    content_sha256: str | None = None  # a watcher's new digest (None: unchanged field)
    published: bool = False


def msg_id(job: str, slot: datetime) -> str:
    return f"{scheduling.CHANNEL}:{job}:{int(slot.timestamp() * 1000)}"


class Actions:
    def __init__(
        self,
        js: JetStreamContext,
        subjects: bus.Subjects,
        fetcher: Fetcher,
        workspace_root: Path,
        max_bytes: int,
    ) -> None:
        self.js = js
        self.subjects = subjects
        self.fetcher = fetcher
        self.workspace_root = workspace_root
        self.max_bytes = max_bytes

    async def run(self, job: Job, slot: datetime) -> Outcome:
        """Run ``job``'s action for its run due at ``slot``; :class:`ActionFailed` says why
        it failed."""
        if job.kind in ("message", "heartbeat"):
            return await self.publish(job, slot, self._text(job, slot))
        if job.kind == "webhook":
            return await self._webhook(job, slot)
        content = await self._watched(job)
        digest = hashlib.sha256(content).hexdigest() if content is not None else ABSENT
        if not job.content_sha256:
            return Outcome("first look", digest)
        if digest == job.content_sha256:
            return Outcome("unchanged")
        what = job.url or job.path
        head = f"[Watcher {job.name!r}: {what} changed at {_iso(slot)}]"
        note = f"\n{job.message}" if job.message else ""
        if content is None:
            body = "\n\nThe file no longer exists."
        else:
            text = content.decode("utf-8", errors="replace")
            body = f"\n\nNew content (first {EXCERPT_CHARS} characters):\n{text[:EXCERPT_CHARS]}"
        published = await self.publish(job, slot, head + note + body)
        return Outcome(f"changed, {published.result}", digest, published.published)

    async def publish(self, job: Job, slot: datetime, text: str) -> Outcome:
        key = job.target_session
        message = messages_pb2.InboundMessage(
            channel=scheduling.CHANNEL,
            account=scheduling.ACCOUNT,
            sender=f"cron:{job.name}",
            chat=messages_pb2.ChatRef(id=key, type="direct"),
            text=text,
            message_id=f"{job.name}:{int(slot.timestamp() * 1000)}",
            received_at_ms=int(time.time() * 1000),
            session_key=key,
            agent=job.agent,
            reply_context={scheduling.KIND_KEY: job.kind, scheduling.JOB_KEY: job.name},
        )
        if job.deliver_to.channel:
            message.deliver_to.CopyFrom(job.deliver_to)
        ack = await bus.js_publish_ack(
            self.js, self.subjects.inbound(scheduling.CHANNEL), message, msg_id(job.name, slot)
        )
        return Outcome("duplicate" if ack.duplicate else "published", published=True)

    @staticmethod
    def _text(job: Job, slot: datetime) -> str:
        if job.kind == "heartbeat":
            return f"[Heartbeat {job.name!r} at {_iso(slot)}]\n{job.message or DEFAULT_HEARTBEAT}"
        return f"[Scheduled job {job.name!r}, due {_iso(slot)}]\n{job.message}"

    async def _webhook(self, job: Job, slot: datetime) -> Outcome:
        body = job.body_json or json.dumps(
            {"job": job.name, "scheduled_at": _iso(slot), "message": job.message}
        )
        try:
            answer = await self.fetcher.post(job.url, body.encode(), "application/json")
        except FetchError as exc:
            raise ActionFailed(str(exc)) from exc
        result = f"HTTP {answer.status}"
        if answer.status >= 400:
            raise ActionFailed(f"{result} {answer.reason}".strip())
        return Outcome(result)

    async def _watched(self, job: Job) -> bytes | None:
        """The watched content (None: a watched file that does not exist)."""
        if job.kind == "watch_url":
            try:
                got = await self.fetcher.fetch(job.url, _any_content)
            except FetchError as exc:
                raise ActionFailed(str(exc)) from exc
            if got.status >= 400:
                raise ActionFailed(f"HTTP {got.status} {got.reason}".strip())
            return got.body
        root = self.workspace_root / job.agent
        return await asyncio.to_thread(read_beneath, root, job.path, self.max_bytes)


def read_beneath(root: Path, path: str, max_bytes: int) -> bytes | None:
    """The regular file ``path`` under ``root`` (None: it does not exist), read with
    :func:`switchboard.beneath.read_regular`: no ``..``, no symlink followed at all (inside the
    workspace or out: a sandboxed command may have planted one), nothing but a regular file (a
    FIFO never blocks the scheduler), at most ``max_bytes``. Anything else is an
    :class:`ActionFailed` saying why, without the host's paths."""
    try:
        dirfd = os.open(root, O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ENOTDIR, errno.ELOOP):  # O_NOFOLLOW met a symlink
            raise ActionFailed("the workspace is not a directory (nor followed if a link)") from exc
        raise ActionFailed(f"the workspace cannot be opened ({exc.strerror})") from exc
    try:
        return read_regular(dirfd, path, max_bytes)
    except FileNotFoundError:
        return None
    except NotRegular as exc:
        raise ActionFailed(f"{path} is not a regular file; a watcher reads files only") from exc
    except TooLarge as exc:
        raise ActionFailed(f"{path} is larger than the {max_bytes} bytes a watcher reads") from exc
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ActionFailed(
                f"{path} is or passes through a symbolic link; a watcher follows none"
            ) from exc
        if exc.errno == errno.EXDEV:
            raise ActionFailed(f"{path} leads outside the workspace") from exc
        raise ActionFailed(f"{path} cannot be read ({exc.strerror})") from exc
    finally:
        os.close(dirfd)


def _any_content(content_type: str, status: int) -> None:
    """A watcher hashes whatever the URL answers."""


def _iso(slot: datetime) -> str:
    return slot.isoformat(timespec="seconds").replace("+00:00", "Z")
