"""The vendored browser libraries and the shared modules (the Markdown renderer): served as files
of the package, public (they hold no data), but only those locked (and named), and exactly the
bytes the lock names (the lint's --check does the same)."""

from __future__ import annotations

import hashlib
import json
import re

from fastapi import FastAPI
from fastapi.testclient import TestClient

from switchboard_gateway.auth import TokenAuth, is_public
from switchboard_gateway.web import assets
from switchboard_gateway.web.__main__ import check
from switchboard_gateway.web.vendor_lock import LOCK, ROOT


def test_the_copies_are_as_locked() -> None:
    assert check() == []


def test_the_scripts_are_served_public_and_nothing_else_is() -> None:
    app = FastAPI()
    app.include_router(assets.router)
    app.add_middleware(TokenAuth, token="t" * 32)
    locked = json.loads(LOCK.read_text())
    client = TestClient(app)
    served = 0
    for key, digest in locked.items():
        where, _, name = key.rpartition("/web/vendor/")
        if not where or not name.endswith((".js", ".mjs", ".css")):
            continue
        reply = client.get(assets.PREFIX + name)
        assert reply.status_code == 200, name
        assert (
            hashlib.sha256(reply.content).hexdigest()
            == digest
            == hashlib.sha256((ROOT / key).read_bytes()).hexdigest()
        )
        assert reply.headers["x-content-type-options"] == "nosniff"
        assert reply.headers["content-type"].startswith(("text/javascript", "text/css"))
        served += 1
    assert served >= 20  # marked, DOMPurify, uPlot, highlight.js and its languages
    assert assets.PREFIX + "marked.esm.js" in assets.PUBLIC_PATHS
    assert is_public(assets.PREFIX + "purify.es.mjs")
    # A licence, the lock, a test's library and anything else: no route; behind the token.
    for name in ("LOCK.json", "marked.LICENSE", "axe.min.js", "../vendor_lock.py"):
        assert not is_public(assets.PREFIX + name)
        assert client.get(assets.PREFIX + name).status_code == 401


def test_the_shared_modules_are_served_public_and_import_only_locked_libraries() -> None:
    """/web/markdown.js and its style sheet: public, revalidated (they change with the gateway,
    unlike the locked libraries), importing only the vendored copies (no other host)."""
    app = FastAPI()
    app.include_router(assets.router)
    app.add_middleware(TokenAuth, token="t" * 32)
    client = TestClient(app)
    for name, kind in (("markdown.js", "text/javascript"), ("markdown.css", "text/css")):
        path = assets.OWN_PREFIX + name
        assert path in assets.PUBLIC_PATHS and is_public(path)
        reply = client.get(path)
        assert reply.status_code == 200, path
        assert reply.headers["content-type"].startswith(kind)
        assert reply.headers["cache-control"] == "no-cache"
        assert reply.headers["x-content-type-options"] == "nosniff"
        assert not re.search(r"https?://", reply.text), f"{path} refers to another host"
    script = client.get(assets.OWN_PREFIX + "markdown.js").text
    assert "export function renderMarkdown(" in script
    imported = re.findall(r'^import .* from "([^"]+)";$', script, re.MULTILINE)
    assert imported and all(p in assets.PUBLIC_PATHS for p in imported), imported
    # Not the folder, nor another name of the package: behind the token.
    for path in ("/web/static/markdown.js", "/web/assets.py", "/web/vendor_lock.py"):
        assert not is_public(path)
        assert client.get(path).status_code == 401
