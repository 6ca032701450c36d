"""web_search: search the web through the provider the operator configured (Tavily, Brave or a
SearXNG instance).

Provider hosts come from operator settings, not from the model, so these requests do not go
through the SSRF guard (a SearXNG instance on the local network is a normal set-up). API keys
are SecretStr values: they are sent only in the provider's auth header and never logged or
echoed in results or errors.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from switchboard.net.fetch import default_ssl_context, describe
from switchboard_tools.errors import ToolError
from switchboard_tools.net.settings import WebSettings
from switchboard_tools.registry import Tool, ToolContext, ToolOutput

DEFAULT_COUNT = 5
MAX_COUNT = 10
_SNIPPET_CHARS = 500

if TYPE_CHECKING:  # httpx is imported by the first search (its import brings its command
    import httpx  # line's rich and pygments: ~90 modules of every start-up, docs/startup.md)
_TAGS = re.compile(r"<[^>]+>")
_SPACE = re.compile(r"\s+")
_NOT_CONFIGURED = (
    "web_search is not configured: set SB_WEB_SEARCH_PROVIDER to 'tavily' (with "
    "SB_TAVILY_API_KEY), 'brave' (with SB_BRAVE_API_KEY) or 'searxng' (with SB_SEARXNG_URL)"
)


@dataclass(frozen=True)
class SearchResult:
    title: str
    url: str
    snippet: str


def _clean(value: Any, limit: int = _SNIPPET_CHARS) -> str:
    """Provider text as one plain line: tags (Brave marks matches with <strong>) and entities
    removed, whitespace collapsed, cut at ``limit``."""
    text = _SPACE.sub(" ", html.unescape(_TAGS.sub("", str(value or "")))).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _results(items: Any, snippet_key: str, count: int) -> list[SearchResult]:
    if not isinstance(items, list):
        raise ToolError("the search provider sent an unexpected response (no result list)")
    found: list[SearchResult] = []
    for item in items:
        if isinstance(item, dict) and item.get("url"):
            found.append(
                SearchResult(
                    title=_clean(item.get("title"), 200) or str(item["url"]),
                    url=str(item["url"]),
                    snippet=_clean(item.get(snippet_key)),
                )
            )
    return found[:count]


def _secret(settings: WebSettings, provider: str) -> str:
    secret = settings.tavily_api_key if provider == "tavily" else settings.brave_api_key
    if secret is None or not secret.get_secret_value():
        raise ToolError(
            f"web_search is configured for {provider} but SB_{provider.upper()}_API_KEY is not set"
        )
    return secret.get_secret_value()


class WebSearchTool(Tool):
    name: ClassVar[str] = "web_search"
    description: ClassVar[str] = (
        "Search the web. Returns up to `count` results, each with title, URL and a snippet. "
        "Use web_fetch to read a result."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "minLength": 1,
                "maxLength": 400,
                "description": "What to search for.",
            },
            "count": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_COUNT,
                "description": f"Number of results. Default {DEFAULT_COUNT}.",
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    groups: ClassVar[tuple[str, ...]] = ("web",)

    def __init__(self, settings: WebSettings | None = None) -> None:
        self._settings = settings if settings is not None else WebSettings.model_construct()

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        query = str(args["query"]).strip()
        if not query:
            raise ToolError("query must not be blank")
        count = int(args.get("count", DEFAULT_COUNT))
        provider = self._settings.web_search_provider
        if provider is None:
            raise ToolError(_NOT_CONFIGURED)
        import httpx

        async with httpx.AsyncClient(
            timeout=self._settings.web_search_timeout_s, verify=default_ssl_context()
        ) as client:
            try:
                if provider == "tavily":
                    results = await self._tavily(client, query, count)
                elif provider == "brave":
                    results = await self._brave(client, query, count)
                else:
                    results = await self._searxng(client, query, count)
            except httpx.TransportError as exc:
                raise ToolError(f"the {provider} search request failed: {describe(exc)}") from exc
        return self._render(provider, query, results)

    async def _tavily(
        self, client: httpx.AsyncClient, query: str, count: int
    ) -> list[SearchResult]:
        key = _secret(self._settings, "tavily")
        response = await client.post(
            f"{self._settings.tavily_base_url.rstrip('/')}/search",
            json={"query": query, "max_results": count, "search_depth": "basic"},
            headers={"Authorization": f"Bearer {key}"},
        )
        return _results(_json(response, "tavily").get("results"), "content", count)

    async def _brave(self, client: httpx.AsyncClient, query: str, count: int) -> list[SearchResult]:
        key = _secret(self._settings, "brave")
        response = await client.get(
            f"{self._settings.brave_base_url.rstrip('/')}/res/v1/web/search",
            params={"q": query, "count": count},
            headers={"X-Subscription-Token": key, "Accept": "application/json"},
        )
        web = _json(response, "brave").get("web") or {}
        items = web.get("results", []) if isinstance(web, dict) else None
        return _results(items, "description", count)

    async def _searxng(
        self, client: httpx.AsyncClient, query: str, count: int
    ) -> list[SearchResult]:
        base = self._settings.searxng_url
        if not base:
            raise ToolError("web_search is configured for searxng but SB_SEARXNG_URL is not set")
        response = await client.get(
            f"{base.rstrip('/')}/search",
            params={"q": query, "format": "json"},
            headers={"Accept": "application/json"},
        )
        # SearXNG has no result-count parameter: it returns a page, which is cut to `count`.
        return _results(_json(response, "searxng").get("results"), "content", count)

    @staticmethod
    def _render(provider: str, query: str, results: list[SearchResult]) -> ToolOutput:
        details: dict[str, Any] = {
            "provider": provider,
            "query": query,
            "results": [r.__dict__ for r in results],
        }
        if not results:
            return ToolOutput(f"No results for {query!r}.", details=details)
        lines = [f"Results for {query!r} ({provider}):"]
        for n, r in enumerate(results, 1):
            lines.append(f"\n{n}. {r.title}\n   {r.url}")
            if r.snippet:
                lines.append(f"   {r.snippet}")
        return ToolOutput("\n".join(lines), details=details)


def _json(response: httpx.Response, provider: str) -> dict[str, Any]:
    status = response.status_code
    if status in (401, 403):
        hint = (
            "enable the json format in the instance's settings.yml (search.formats)"
            if provider == "searxng"
            else f"check SB_{provider.upper()}_API_KEY"
        )
        raise ToolError(
            f"the {provider} search provider refused the request (HTTP {status}); {hint}"
        )
    if status == 429:
        raise ToolError(f"the {provider} search provider is rate limiting us (HTTP 429); try later")
    if status >= 400:
        raise ToolError(f"the {provider} search provider answered HTTP {status}")
    try:
        data = response.json()
    except ValueError as exc:
        raise ToolError(f"the {provider} search provider sent a response that is not JSON") from exc
    if not isinstance(data, dict):
        raise ToolError(f"the {provider} search provider sent an unexpected response")
    return data
