"""Slack files into the media service: a message's files arrive as their ``url_private``
(:mod:`.slack_events`), which only the bot token opens (``Authorization: Bearer xoxb-...``,
scope ``files:read``). The gateway downloads each one whose origin is one of Slack's file
hosts (``SB_SLACK_FILE_ORIGINS``, ``https://files.slack.com``) through the shared SSRF guard
(no redirects: Slack answers a refused token with a redirect to its sign-in page, and the token
never follows one), at most :data:`MAX_FILE_BYTES`, and ingests it; the reference becomes a
``media:<sha256>?mime=...`` one. When anything fails the message keeps the URL (and is still
published): the agent says an attachment could not be loaded. The token is never logged."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import httpx

from switchboard.media import MediaClient, MediaServiceError, media_ref
from switchboard.net.errors import FetchError
from switchboard.net.fetch import Fetcher, FetchLimits
from switchboard.net.ssrf import SsrfGuard
from switchboard.v1 import messages_pb2

log = logging.getLogger(__name__)
MAX_FILE_BYTES = 20 * 1024 * 1024
DEFAULT_ORIGINS = ("https://files.slack.com",)


class NotDownloaded(Exception):
    """Slack did not give the file (its answer's status)."""


def _origin(url: str) -> str:
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        return ""
    port = f":{parsed.port}" if parsed.port is not None else ""
    return f"{parsed.scheme}://{parsed.host}{port}".lower()


def _status_ok(content_type: str, status: int) -> None:
    if status != 200:
        raise NotDownloaded(f"slack answered {status}")


class SlackFiles:
    def __init__(
        self,
        bot_token: str,
        origins: Sequence[str] = DEFAULT_ORIGINS,
        allow_cidrs: Sequence[str] = (),
    ) -> None:
        self._auth = {"Authorization": f"Bearer {bot_token}"}
        self.origins = frozenset(o.rstrip("/").lower() for o in origins)
        self.fetcher = Fetcher(
            SsrfGuard(allow_cidrs),
            FetchLimits(max_bytes=MAX_FILE_BYTES, max_redirects=0),
            accept="*/*",
        )

    def __repr__(self) -> str:  # never the token
        return f"SlackFiles(origins={sorted(self.origins)!r})"

    def wanted(self, ref: str) -> bool:
        return _origin(ref) in self.origins

    async def ingest(self, media: MediaClient, message: messages_pb2.InboundMessage) -> None:
        """Replace the message's Slack file URLs by media references where possible (in
        place)."""
        for n, ref in enumerate(message.media):
            if not self.wanted(ref):
                continue
            name = ref.rsplit("/", 1)[-1][:128]
            try:
                fetched = await self.fetcher.fetch(ref, _status_ok, self._auth)
                stored = await media.ingest_bytes(fetched.body, name=name)
            except (FetchError, NotDownloaded, MediaServiceError) as exc:
                # FetchError's text names the host, never the token (it is a header).
                log.warning("slack file not ingested (%s); passed on as a link", exc)
                continue
            message.media[n] = media_ref(stored.sha256, stored.mime, name)
