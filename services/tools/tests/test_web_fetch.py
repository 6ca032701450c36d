"""web_fetch against real local servers: text extraction, caching, redirects, address pinning
(plain HTTP and TLS with SNI) and limits. 127.0.0.2 plays a public host (allow-listed)."""

from __future__ import annotations

import gzip
import json
import shutil
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from switchboard_tools.builtin import builtin_registry
from switchboard_tools.net.settings import WebSettings
from switchboard_tools.registry import ToolContext, ToolOutput, ToolRegistry
from switchboard_tools.sandbox import ProcessSandbox
from switchboard_tools.tools.web_fetch import WebFetchTool
from tests.fakes.web import MapResolver, Reply, Seen, WebServer, redirect

PAGE = """<!doctype html><html><head><title>  The  Title </title>
<style>body { color: red }</style><script>var secret = "js";</script></head>
<body><nav><a href="/">Home</a> <a href="/about">About</a></nav>
<h1>Main heading</h1><p>First   paragraph with a <a href="/x">link text</a>.</p>
<div hidden>hidden text</div><noscript>enable js</noscript>
<h2>List</h2><ul><li>one</li><li>two &amp; three</li></ul>
<table><tr><th>k</th><th>v</th></tr><tr><td>a</td><td>1</td></tr></table>
<pre>  keep
    indent</pre><footer>copyright</footer></body></html>"""


class Web:
    def __init__(self, site: WebServer, ctx: ToolContext) -> None:
        self.site = site
        self.ctx = ctx
        self.resolver = MapResolver({"docs.example": ["127.0.0.2"]})
        self.now = 1000.0
        self.use()

    def use(self, ssl_context: ssl.SSLContext | None = None, **settings: Any) -> None:
        options: dict[str, Any] = {"web_fetch_allow_cidrs": ["127.0.0.2/32"], **settings}
        tool = WebFetchTool(
            WebSettings(**options),
            resolver=self.resolver,
            ssl_context=ssl_context,
            clock=lambda: self.now,
        )
        self.registry = ToolRegistry([tool])

    async def fetch(self, url: str, **args: Any) -> ToolOutput:
        payload = json.dumps({"url": url, **args})
        return await self.registry.execute("web_fetch", payload, self.ctx)


@pytest.fixture
def site() -> Iterator[WebServer]:
    with WebServer("127.0.0.2", {"/": Reply(body=PAGE)}) as server:
        yield server


@pytest.fixture
def web(site: WebServer, ctx: ToolContext) -> Web:
    return Web(site, ctx)


async def test_html_becomes_readable_text(web: Web) -> None:
    out = await web.fetch(web.site.url("/"))
    assert not out.is_error, out.content
    assert out.content == (
        f"URL: {web.site.url('/')}\n\n"
        "Title: The Title\n\n# Main heading\n\nFirst paragraph with a link text.\n\n## List\n\n"
        "- one\n- two & three\n\nk | v\na | 1\n\n  keep\n    indent"
    )
    assert out.details == {
        "final_url": web.site.url("/"),
        "status": 200,
        "content_type": "text/html",
        "bytes": len(PAGE.encode()),
        "redirects": 0,
        "cached": False,
        "truncated": False,
    }


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        ('{"a": [1, 2]}', "application/json"),
        ("plain <b>text</b> stays", "text/plain; charset=utf-8"),
        ("name,value\nx,1", "text/csv"),
        ('{"x": 1}', "application/vnd.api+json"),
    ],
)
async def test_text_and_json_pass_through(web: Web, body: str, content_type: str) -> None:
    web.site.route("/t", Reply(body=body, content_type=content_type))
    out = await web.fetch(web.site.url("/t"))
    assert out.content.endswith(f"\n\n{body}")


async def test_binary_content_refused(web: Web) -> None:
    web.site.route("/img", Reply(body=b"\x89PNG\r\n\x1a\n" + b"\0" * 100, content_type="image/png"))
    web.site.route("/raw", Reply(body=b"\0\1\2\3" * 100, content_type=None))
    for path, shown in (("/img", "image/png"), ("/raw", "unlabelled binary data")):
        out = await web.fetch(web.site.url(path))
        assert out.is_error
        assert out.content == (
            f"refused: the response is binary content ({shown}); "
            "web_fetch only reads HTML, text and JSON"
        )


async def test_unlabelled_html_is_sniffed_and_charset_honoured(web: Web) -> None:
    web.site.route("/u", Reply(body=b"<!DOCTYPE html><p>caf\xe9</p>", content_type=None))
    web.site.route(
        "/l",
        Reply(body="<p>café</p>".encode("latin-1"), content_type="text/html; charset=ISO-8859-1"),
    )
    web.site.route(
        "/m",
        Reply(
            body='<meta charset="windows-1252"><p>caf\xe9</p>'.encode("cp1252"),
            content_type="text/html",
        ),
    )
    assert (await web.fetch(web.site.url("/u"))).content.endswith("\n\ncaf\ufffd")
    assert (await web.fetch(web.site.url("/l"))).content.endswith("\n\ncafé")
    assert (await web.fetch(web.site.url("/m"))).content.endswith("\n\ncafé")


async def test_gzip_body_is_decoded(web: Web) -> None:
    web.site.route(
        "/gz", Reply(body=gzip.compress(b"<p>zipped</p>"), headers={"Content-Encoding": "gzip"})
    )
    out = await web.fetch(web.site.url("/gz"))
    assert out.content.endswith("\n\nzipped")
    assert web.site.requests[-1].headers["accept-encoding"] == "gzip, deflate"


async def test_truncated_to_max_chars(web: Web) -> None:
    web.site.route("/long", Reply(body="x" * 5000, content_type="text/plain"))
    out = await web.fetch(web.site.url("/long"), max_chars=100)
    assert out.details["truncated"] is True
    assert out.content.endswith("x" * 100 + "\n\n[truncated: showing 100 of 5000 characters]")


async def test_max_chars_is_bounded(web: Web) -> None:
    for bad in (0, 99, 100_001):
        out = await web.fetch(web.site.url("/"), max_chars=bad)
        assert out.details["error"] == "invalid_arguments"


async def test_cache_hit_then_expiry(web: Web) -> None:
    url = web.site.url("/")
    first = await web.fetch(url)
    second = await web.fetch(url)
    assert second.details["cached"] is True
    assert second.content == first.content
    assert len(web.site.requests) == 1
    other = await web.fetch(url, max_chars=500)  # another max_chars is another entry
    assert other.details["cached"] is False
    web.now += 86400  # the default TTL: a day
    third = await web.fetch(url)
    assert third.details["cached"] is False
    assert len(web.site.requests) == 3


async def test_cache_keyed_by_final_url(web: Web) -> None:
    web.site.route("/old", redirect("/"))
    assert (await web.fetch(web.site.url("/old"))).details["redirects"] == 1
    again = await web.fetch(web.site.url("/"))
    assert again.details["cached"] is True
    assert [r.path for r in web.site.requests] == ["/old", "/"]


async def test_errors_are_not_cached_and_show_status(web: Web) -> None:
    web.site.route("/missing", Reply(404, "<h1>No such page</h1>"))
    for _ in range(2):
        out = await web.fetch(web.site.url("/missing"))
        assert out.is_error
        assert (
            out.content == f"HTTP 404 Not Found from {web.site.url('/missing')}\n\n# No such page"
        )
        assert out.details["status"] == 404
    assert len(web.site.requests) == 2


async def test_relative_redirects_up_to_the_cap(web: Web) -> None:
    for n in range(5):
        web.site.route(f"/r{n}", redirect(f"r{n + 1}" if n % 2 else f"/r{n + 1}", 301 + n % 2))
    web.site.route("/r5", Reply(body="<p>arrived</p>"))
    out = await web.fetch(web.site.url("/r0"))
    assert not out.is_error, out.content
    assert out.details["final_url"] == web.site.url("/r5")
    assert out.details["redirects"] == 5
    assert {r.method for r in web.site.requests} == {"GET"}


async def test_connects_to_the_pinned_address_with_the_original_host(web: Web) -> None:
    url = web.site.url("/", host="docs.example")
    out = await web.fetch(url)
    assert not out.is_error, out.content
    assert out.details["final_url"] == url
    assert web.resolver.calls == ["docs.example"]
    assert web.site.requests[0].headers["host"] == f"docs.example:{web.site.port}"


async def test_next_vetted_address_when_the_first_does_not_answer(web: Web) -> None:
    web.use(web_fetch_allow_cidrs=["127.0.0.2/32", "127.0.0.9/32"])
    web.resolver.mapping = {"two.example": ["127.0.0.9", "127.0.0.2"]}  # nothing on .9
    out = await web.fetch(web.site.url("/", host="two.example"))
    assert not out.is_error, out.content
    assert len(web.site.requests) == 1


async def test_timeout(web: Web) -> None:
    def slow(seen: Seen) -> Reply:
        time.sleep(1.0)
        return Reply(body="late")

    web.site.route("/slow", slow)
    web.use(web_fetch_timeout_s=0.2)
    out = await web.fetch(web.site.url("/slow"))
    assert out.content == f"fetching {web.site.url('/slow')} timed out after 0.2s"


def _certificate(directory: Path, name: str) -> tuple[str, str]:
    cert, key = str(directory / f"{name}.pem"), str(directory / f"{name}.key")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", key, "-out", cert, "-days", "1", "-subj", f"/CN={name}",
         "-addext", f"subjectAltName=DNS:{name}"],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    return cert, key


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
async def test_tls_uses_the_name_for_sni_and_verification(web: Web, tmp_path: Path) -> None:
    cert, key = _certificate(tmp_path, "docs.example")
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    sni: list[str | None] = []

    def record_sni(sock: ssl.SSLObject, name: str | None, context: ssl.SSLContext) -> None:
        sni.append(name)

    server_ctx.sni_callback = record_sni
    web.use(ssl_context=ssl.create_default_context(cafile=cert))
    web.resolver.mapping = {"docs.example": ["127.0.0.2"], "other.example": ["127.0.0.2"]}
    with WebServer("127.0.0.2", {"/": Reply(body="<p>over tls</p>")}, tls=server_ctx) as secure:
        out = await web.fetch(secure.url("/", host="docs.example"))
        assert not out.is_error, out.content
        assert out.content.endswith("\n\nover tls")
        assert secure.requests[0].headers["host"] == f"docs.example:{secure.port}"
        assert sni == ["docs.example"]
        # Same address, another name: the certificate is checked against the name asked for.
        wrong = await web.fetch(secure.url("/", host="other.example"))
        assert wrong.is_error
        assert "could not connect to other.example" in wrong.content
        assert "certificate verify failed" in wrong.content
        assert len(secure.requests) == 1


async def test_builtin_registry_offers_web_tools_that_refuse_loopback(ctx: ToolContext) -> None:
    registry = builtin_registry(ProcessSandbox())
    for name in ("web_fetch", "web_search"):
        tool = registry.get(name)
        assert tool is not None and tool.groups == ("web",)
    out = await registry.execute("web_fetch", '{"url": "http://127.0.0.1:9/"}', ctx)
    assert out.content == "refused: 127.0.0.1 is a loopback address"
