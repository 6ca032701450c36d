"""web_search against fake Tavily, Brave and SearXNG servers speaking the real wire formats;
each test checks what our client sent (auth header, parameters) and what the model reads."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Literal

import pytest
from pydantic import SecretStr, ValidationError

from switchboard_tools.config import ToolsSettings
from switchboard_tools.net.settings import WebSettings
from switchboard_tools.registry import ToolContext, ToolOutput, ToolRegistry
from switchboard_tools.tools.web_search import WebSearchTool
from tests.fakes.web import Reply, WebServer, brave, searxng, tavily

KEY = "sk-very-secret-key-123"
HITS = [
    ("Python <strong>asyncio</strong>", "https://docs.python.org/3/library/asyncio.html",
     "asyncio is a library to write <strong>concurrent</strong> code &amp; more."),
    ("Second", "https://example.org/2", "second snippet"),
    ("Third", "https://example.org/3", "third snippet"),
]  # fmt: skip


@pytest.fixture
def server() -> Iterator[WebServer]:
    with WebServer("127.0.0.1") as s:
        yield s


async def search(ctx: ToolContext, settings: WebSettings, args: dict[str, Any]) -> ToolOutput:
    registry = ToolRegistry([WebSearchTool(settings)])
    return await registry.execute("web_search", json.dumps(args), ctx)


def assert_no_key(out: ToolOutput) -> None:
    assert KEY not in out.content
    assert KEY not in json.dumps(out.details)


async def test_tavily(server: WebServer, ctx: ToolContext) -> None:
    server.route("/search", tavily(HITS))
    settings = WebSettings(
        web_search_provider="tavily", tavily_api_key=SecretStr(KEY), tavily_base_url=server.url("")
    )
    out = await search(ctx, settings, {"query": "python asyncio", "count": 2})
    assert not out.is_error, out.content
    (seen,) = server.requests
    assert (seen.method, seen.path) == ("POST", "/search")
    assert seen.headers["authorization"] == f"Bearer {KEY}"
    assert seen.headers["content-type"] == "application/json"
    assert seen.json() == {"query": "python asyncio", "max_results": 2, "search_depth": "basic"}
    assert out.content == (
        "Results for 'python asyncio' (tavily):\n"
        "\n1. Python asyncio\n   https://docs.python.org/3/library/asyncio.html\n"
        "   asyncio is a library to write concurrent code & more.\n"
        "\n2. Second\n   https://example.org/2\n   second snippet"
    )
    assert out.details["provider"] == "tavily"
    assert [r["url"] for r in out.details["results"]] == [h[1] for h in HITS[:2]]
    assert_no_key(out)


async def test_brave(server: WebServer, ctx: ToolContext) -> None:
    server.route("/res/v1/web/search", brave(HITS))
    settings = WebSettings(
        web_search_provider="brave", brave_api_key=SecretStr(KEY), brave_base_url=server.url("/")
    )
    out = await search(ctx, settings, {"query": "python asyncio"})
    assert not out.is_error, out.content
    (seen,) = server.requests
    assert (seen.method, seen.path) == ("GET", "/res/v1/web/search")
    assert seen.query == {"q": ["python asyncio"], "count": ["5"]}
    assert seen.headers["x-subscription-token"] == KEY
    assert seen.headers["accept"] == "application/json"
    assert "authorization" not in seen.headers
    assert len(out.details["results"]) == 3
    assert out.details["results"][0] == {
        "title": "Python asyncio",
        "url": HITS[0][1],
        "snippet": "asyncio is a library to write concurrent code & more.",
    }
    assert_no_key(out)


async def test_searxng(server: WebServer, ctx: ToolContext) -> None:
    server.route("/searx/search", searxng(HITS))
    settings = WebSettings(web_search_provider="searxng", searxng_url=server.url("/searx"))
    out = await search(ctx, settings, {"query": "ü & co", "count": 1})
    assert not out.is_error, out.content
    (seen,) = server.requests
    assert (seen.method, seen.path) == ("GET", "/searx/search")
    assert seen.query == {"q": ["ü & co"], "format": ["json"]}
    assert [r["title"] for r in out.details["results"]] == ["Python asyncio"]


async def test_no_results(server: WebServer, ctx: ToolContext) -> None:
    server.route("/search", tavily([]))
    settings = WebSettings(
        web_search_provider="tavily", tavily_api_key=SecretStr(KEY), tavily_base_url=server.url("")
    )
    out = await search(ctx, settings, {"query": "nothing"})
    assert (out.is_error, out.content) == (False, "No results for 'nothing'.")


async def test_not_configured(ctx: ToolContext) -> None:
    out = await search(ctx, WebSettings(), {"query": "x"})
    assert out.is_error
    assert "SB_WEB_SEARCH_PROVIDER" in out.content
    for setting in ("SB_TAVILY_API_KEY", "SB_BRAVE_API_KEY", "SB_SEARXNG_URL"):
        assert setting in out.content


@pytest.mark.parametrize(
    ("provider", "setting"),
    [("tavily", "SB_TAVILY_API_KEY"), ("brave", "SB_BRAVE_API_KEY"), ("searxng", "SB_SEARXNG_URL")],
)
async def test_provider_without_credentials(
    ctx: ToolContext, provider: Literal["tavily", "brave", "searxng"], setting: str
) -> None:
    out = await search(ctx, WebSettings(web_search_provider=provider), {"query": "x"})
    assert out.is_error
    assert out.content.endswith(f"{setting} is not set")


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (
            Reply(401, '{"detail": "bad key"}', "application/json"),
            "(HTTP 401); check SB_BRAVE_API_KEY",
        ),
        (Reply(429, "slow down", "text/plain"), "rate limiting us (HTTP 429)"),
        (Reply(500, "oops", "text/plain"), "answered HTTP 500"),
        (Reply(200, "<html>not json</html>"), "not JSON"),
        (Reply(200, '{"web": {"results": 5}}', "application/json"), "unexpected response"),
    ],
)
async def test_provider_errors_are_readable(
    server: WebServer, ctx: ToolContext, reply: Reply, expected: str
) -> None:
    server.route("/res/v1/web/search", reply)
    settings = WebSettings(
        web_search_provider="brave", brave_api_key=SecretStr(KEY), brave_base_url=server.url("")
    )
    out = await search(ctx, settings, {"query": "x"})
    assert out.is_error
    assert out.details["error"] == "tool_error"
    assert expected in out.content
    assert_no_key(out)


async def test_searxng_without_json_format(server: WebServer, ctx: ToolContext) -> None:
    server.route("/search", Reply(403, "Forbidden"))
    settings = WebSettings(web_search_provider="searxng", searxng_url=server.url(""))
    out = await search(ctx, settings, {"query": "x"})
    assert "enable the json format" in out.content


async def test_provider_unreachable(ctx: ToolContext) -> None:
    settings = WebSettings(web_search_provider="searxng", searxng_url="http://127.0.0.1:9")
    out = await search(ctx, settings, {"query": "x"})
    assert out.is_error
    assert out.content.startswith("the searxng search request failed:")


async def test_invalid_arguments(ctx: ToolContext) -> None:
    settings = WebSettings(web_search_provider="searxng", searxng_url="http://127.0.0.1:9")
    for args in ({}, {"query": ""}, {"query": "x", "count": 11}, {"query": "x", "extra": 1}):
        out = await search(ctx, settings, args)
        assert out.details["error"] == "invalid_arguments", args
    out = await search(ctx, settings, {"query": "   "})
    assert out.content == "query must not be blank"


def test_settings_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SB_WEB_SEARCH_PROVIDER", "brave")
    monkeypatch.setenv("SB_BRAVE_API_KEY", KEY)
    monkeypatch.setenv("SB_WEB_FETCH_ALLOW_CIDRS", '["10.20.0.0/16", "fd00::/8"]')
    monkeypatch.setenv("SB_WEB_FETCH_CACHE_TTL_S", "60")
    settings = ToolsSettings()
    assert settings.web_search_provider == "brave"
    assert settings.brave_api_key is not None
    assert settings.brave_api_key.get_secret_value() == KEY
    assert KEY not in repr(settings) and KEY not in str(settings.model_dump())
    assert settings.web_fetch_allow_cidrs == ["10.20.0.0/16", "fd00::/8"]
    assert settings.web_fetch_cache_ttl_s == 60
    assert settings.tavily_base_url == "https://api.tavily.com"
    monkeypatch.setenv("SB_WEB_FETCH_ALLOW_CIDRS", '["not-a-cidr"]')
    with pytest.raises(ValidationError, match="not a CIDR"):
        ToolsSettings()
    monkeypatch.setenv("SB_WEB_FETCH_ALLOW_CIDRS", "[]")
    monkeypatch.setenv("SB_WEB_SEARCH_PROVIDER", "google")
    with pytest.raises(ValidationError):
        ToolsSettings()
