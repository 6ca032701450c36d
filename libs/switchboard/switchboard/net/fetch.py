"""A guarded HTTP GET (and a POST, for webhooks): every hop is vetted by the :class:`SsrfGuard`
and connects to the vetted address it pinned; redirects of a GET are followed by hand (capped)
and the body is read up to a cap.

Pinning: the request URL carries the vetted IP address while the ``Host`` header keeps the
original ``host[:port]`` and, for https, the ``sni_hostname`` request extension makes httpcore
send the original name as TLS SNI and verify the certificate against it. httpx never resolves
the name itself, so a DNS answer that changes between check and connect cannot redirect us.
Environment proxies are ignored (``trust_env=False``): a proxy would resolve the name again.

httpx is imported by the first request, not with this module: the services that may fetch
(tools, media, scheduler) import it at start, and httpx's own import brings its command line's
(rich, pygments, click; with httpcore about 75 ms of a start-up, docs/startup.md).
"""

from __future__ import annotations

import functools
import ssl
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import FetchError, Refused, TooLarge
from .ssrf import SsrfGuard, Target

if TYPE_CHECKING:
    import httpx

_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_MAX_ERROR_TEXT = 200
USER_AGENT = "Switchboard/1.0 (self-hosted assistant)"
# What web_fetch reads; other callers (media) pass their own.
READABLE = "text/html,application/xhtml+xml,text/plain,application/json;q=0.9,*/*;q=0.5"


@dataclass(frozen=True)
class FetchLimits:
    max_bytes: int
    max_redirects: int
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 20.0


@dataclass(frozen=True)
class Fetched:
    url: str  # the final URL, after redirects
    status: int
    reason: str
    content_type: str
    body: bytes
    redirects: int


def size_text(n: int) -> str:
    if n >= 1024 * 1024 and n % (1024 * 1024) == 0:
        return f"{n // (1024 * 1024)} MiB"
    if n >= 1024:
        return f"{n / 1024:g} KiB"
    return f"{n} bytes"


def describe(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= _MAX_ERROR_TEXT else text[: _MAX_ERROR_TEXT - 3] + "..."


class _Inflater:
    """gzip/deflate decoding that never produces more than it is asked for (no zip bombs)."""

    def __init__(self) -> None:
        self._z = zlib.decompressobj(wbits=47)  # 32 + 15: gzip or zlib header, detected

    def feed(self, chunk: bytes, room: int) -> bytes:
        try:
            return self._z.decompress(chunk, room)
        except zlib.error as exc:
            raise FetchError("the response body could not be decompressed") from exc


async def read_capped(response: httpx.Response, limit: int) -> bytes:
    """The (decoded) body, or :class:`Refused` as soon as it exceeds ``limit`` bytes."""
    too_big = TooLarge(f"the response is larger than the {size_text(limit)} limit")
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_big
    encoding = response.headers.get("content-encoding", "").strip().lower()
    if encoding not in ("", "identity", "gzip", "x-gzip", "deflate"):
        raise FetchError(f"unsupported content-encoding {encoding!r}")
    inflater = _Inflater() if encoding not in ("", "identity") else None
    body = bytearray()
    async for chunk in response.aiter_raw():
        # Ask the inflater for one byte more than fits: getting it means the body is too big.
        body += inflater.feed(chunk, limit + 1 - len(body)) if inflater else chunk
        if len(body) > limit:
            raise too_big
    return bytes(body)


class Fetcher:
    """GETs URLs through the guard. ``fetch``'s ``accept(content_type, status)`` may raise to
    refuse a body before it is downloaded (binary content, say)."""

    def __init__(
        self,
        guard: SsrfGuard,
        limits: FetchLimits,
        ssl_context: ssl.SSLContext | None = None,
        *,
        user_agent: str = USER_AGENT,
        accept: str = READABLE,
    ) -> None:
        self._guard = guard
        self._headers = {
            "User-Agent": user_agent,
            "Accept": accept,
            "Accept-Encoding": "gzip, deflate",
        }
        self._limits = limits
        self._ssl_context = ssl_context

    def _ssl(self) -> ssl.SSLContext:
        return self._ssl_context or default_ssl_context()

    async def fetch(
        self,
        url: str,
        accept: Callable[[str, int], None],
        credentials: Mapping[str, str] | None = None,
    ) -> Fetched:
        """GET ``url``. ``credentials`` (an ``Authorization`` header...) go to ``url`` only:
        never to where it redirects."""
        import httpx

        async with httpx.AsyncClient(
            verify=self._ssl(), trust_env=False, follow_redirects=False
        ) as client:
            current: str | httpx.URL = url
            for hop in range(self._limits.max_redirects + 1):
                target = await self._check(current, hop)
                response = await self._send(client, target, extra=credentials if hop == 0 else None)
                try:
                    location = response.headers.get("location")
                    if response.status_code in _REDIRECTS and location:
                        if hop == self._limits.max_redirects:
                            raise Refused(
                                f"too many redirects (more than {self._limits.max_redirects})"
                            )
                        current = _join(target.url, location)
                        continue
                    content_type = response.headers.get("content-type", "")
                    accept(content_type, response.status_code)
                    body = await self._read(response)
                    return Fetched(
                        url=str(target.url),
                        status=response.status_code,
                        reason=response.reason_phrase,
                        content_type=content_type,
                        body=body,
                        redirects=hop,
                    )
                finally:
                    await response.aclose()
        raise AssertionError("unreachable: the loop returns or raises")

    async def post(self, url: str, body: bytes, content_type: str) -> Fetched:
        """POST ``body`` to ``url`` through the guard (a webhook). Redirects are not followed:
        a 3xx answer is returned as it is."""
        import httpx

        async with httpx.AsyncClient(
            verify=self._ssl(), trust_env=False, follow_redirects=False
        ) as client:
            target = await self._check(url, 0)
            response = await self._send(client, target, "POST", body, content_type)
            try:
                return Fetched(
                    url=str(target.url),
                    status=response.status_code,
                    reason=response.reason_phrase,
                    content_type=response.headers.get("content-type", ""),
                    body=await self._read(response),
                    redirects=0,
                )
            finally:
                await response.aclose()

    async def _check(self, url: str | httpx.URL, hop: int) -> Target:
        try:
            return await self._guard.check(url)
        except Refused as exc:
            if hop == 0:
                raise
            raise Refused(f"redirected to {url}, but {exc.reason}") from exc

    async def _read(self, response: httpx.Response) -> bytes:
        import httpx

        try:
            return await read_capped(response, self._limits.max_bytes)
        except httpx.TransportError as exc:
            raise FetchError(f"reading the response failed: {describe(exc)}") from exc

    async def _send(
        self,
        client: httpx.AsyncClient,
        target: Target,
        method: str = "GET",
        body: bytes | None = None,
        content_type: str = "",
        extra: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """GET (or ``method``) the pinned addresses in turn until one connects."""
        import httpx

        limits = self._limits
        timeout = httpx.Timeout(limits.read_timeout_s, connect=limits.connect_timeout_s)
        extensions: dict[str, object] = {"timeout": timeout.as_dict()}
        if target.url.scheme == "https":
            extensions["sni_hostname"] = target.host
        failure: Exception | None = None
        for address in target.addresses:
            headers = {"Host": target.host_header, **self._headers, **(extra or {})}
            if content_type:
                headers["Content-Type"] = content_type
            request = httpx.Request(
                method,
                target.pinned_url(address),
                headers=headers,
                content=body,
                extensions=extensions,
            )
            try:
                return await client.send(request, stream=True)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                failure = exc  # try the next vetted address
            except httpx.TransportError as exc:
                raise FetchError(f"fetching {target.url} failed: {describe(exc)}") from exc
        assert failure is not None  # the guard never returns a target without addresses
        raise FetchError(
            f"could not connect to {target.host_header}: {describe(failure)}"
        ) from failure


@functools.cache
def default_ssl_context() -> ssl.SSLContext:
    """The system-trust TLS context, built on first use (loading the CA bundle is slow)."""
    import httpx

    return httpx.create_ssl_context()


def _join(base: httpx.URL, location: str) -> httpx.URL:
    import httpx

    try:
        return base.join(location)
    except httpx.InvalidURL as exc:
        raise FetchError(f"the server redirected to an invalid URL ({describe(exc)})") from exc
