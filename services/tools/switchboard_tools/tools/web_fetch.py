"""web_fetch: GET a public http(s) URL through the SSRF guard and return its readable text."""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable
from typing import Any, ClassVar

from switchboard.net.errors import FetchError
from switchboard.net.fetch import Fetched, Fetcher, FetchLimits
from switchboard.net.ssrf import Resolver, SsrfGuard
from switchboard_tools.errors import ToolError
from switchboard_tools.net.cache import TTLCache
from switchboard_tools.net.readable import content_kind, media_type, readable_text, truncate
from switchboard_tools.net.settings import WebSettings
from switchboard_tools.registry import Tool, ToolContext, ToolOutput

DEFAULT_MAX_CHARS = 20_000
MAX_CHARS = 100_000
_ERROR_EXCERPT = 1_000


def _accept(content_type: str, status: int) -> None:
    """Refuse a successful binary response before its body is downloaded."""
    if status < 400 and content_kind(content_type) == "binary":
        raise ToolError(
            f"refused: the response is binary content ({media_type(content_type)}); "
            "web_fetch only reads HTML, text and JSON"
        )


class WebFetchTool(Tool):
    name: ClassVar[str] = "web_fetch"
    description: ClassVar[str] = (
        "Fetch a public web page (http or https, GET) and return its readable text: HTML is "
        "reduced to title, headings, paragraphs, list items and link text; plain text and JSON "
        "are returned as is; binary content is refused. Internal, private and loopback "
        "addresses are refused. Output is cut at `max_chars`. Results are cached for a day."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "url": {
                "type": "string",
                "minLength": 1,
                "maxLength": 4096,
                "description": "Absolute http:// or https:// URL.",
            },
            "max_chars": {
                "type": "integer",
                "minimum": 100,
                "maximum": MAX_CHARS,
                "description": f"Most characters of text to return. Default {DEFAULT_MAX_CHARS}.",
            },
        },
        "required": ["url"],
        "additionalProperties": False,
    }
    groups: ClassVar[tuple[str, ...]] = ("web",)

    def __init__(
        self,
        settings: WebSettings | None = None,
        *,
        resolver: Resolver | None = None,
        ssl_context: ssl.SSLContext | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        s = settings if settings is not None else WebSettings.model_construct()
        guard = SsrfGuard(s.web_fetch_allow_cidrs, resolver)
        limits = FetchLimits(
            max_bytes=s.web_fetch_max_bytes, max_redirects=s.web_fetch_max_redirects
        )
        self._fetcher = Fetcher(guard, limits, ssl_context)
        self._timeout_s = s.web_fetch_timeout_s
        self._cache: TTLCache[ToolOutput] = TTLCache(
            s.web_fetch_cache_entries, s.web_fetch_cache_ttl_s, clock
        )

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        url = str(args["url"]).strip()
        max_chars = int(args.get("max_chars", DEFAULT_MAX_CHARS))
        hit = self._cache.get((url, max_chars))
        if hit is not None:
            return ToolOutput(hit.content, details={**hit.details, "cached": True})

        deadline = asyncio.timeout(self._timeout_s)
        try:
            async with deadline:
                fetched = await self._fetcher.fetch(url, _accept)
        except TimeoutError as exc:
            if not deadline.expired():
                raise
            raise ToolError(f"fetching {url} timed out after {self._timeout_s:g}s") from exc
        except FetchError as exc:  # written for the model: a host and a reason, no secrets
            raise ToolError(str(exc)) from exc

        # Parsing a large page takes a while: keep the event loop free for other calls.
        output = await asyncio.to_thread(self._render, fetched, max_chars)
        if not output.is_error:
            self._cache.put((url, max_chars), output)
            self._cache.put((fetched.url, max_chars), output)
        return output

    @staticmethod
    def _render(fetched: Fetched, max_chars: int) -> ToolOutput:
        details: dict[str, Any] = {
            "final_url": fetched.url,
            "status": fetched.status,
            "content_type": media_type(fetched.content_type),
            "bytes": len(fetched.body),
            "redirects": fetched.redirects,
            "cached": False,
        }
        if fetched.status >= 400:
            excerpt = ""
            if content_kind(fetched.content_type) in ("html", "text"):
                excerpt, _ = truncate(
                    readable_text(fetched.body, fetched.content_type), _ERROR_EXCERPT
                )
            head = f"HTTP {fetched.status} {fetched.reason} from {fetched.url}".rstrip()
            return ToolOutput(
                f"{head}\n\n{excerpt}".rstrip(),
                is_error=True,
                details={**details, "truncated": False, "error": "http_status"},
            )
        text = readable_text(fetched.body, fetched.content_type).strip() or "(no readable text)"
        shown, truncated = truncate(text, max_chars)
        return ToolOutput(
            f"URL: {fetched.url}\n\n{shown}", details={**details, "truncated": truncated}
        )
