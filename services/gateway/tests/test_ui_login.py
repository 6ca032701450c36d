"""The Control UI's login (ui/login.py) with the gateway's TokenAuth: the cookie it sets, and
every way a cookie request is refused (no cookie, a bad MAC, expired, no or a wrong CSRF token,
the CSRF token of another login, the gateway token changed since)."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import SecretStr

from switchboard_gateway import ui
from switchboard_gateway.auth import TokenAuth, is_public
from switchboard_gateway.errors import install_error_handlers
from switchboard_gateway.ui import login

TOKEN = "gw-" + "a" * 40
PROTECTED = "/api/probe"


class CountingFailures(login.FailedLogins):
    def __init__(self) -> None:
        super().__init__(delay_s=0.0)
        self.waits = 0

    async def wait(self) -> None:
        self.waits += 1
        await super().wait()


def make_app(token: str = TOKEN) -> FastAPI:
    app = FastAPI()
    app.state.settings = SimpleNamespace(gateway_token=SecretStr(token))
    app.state.ui_failed_logins = CountingFailures()

    @app.get(PROTECTED)
    async def probe() -> dict[str, bool]:
        return {"ok": True}

    app.include_router(ui.router)
    install_error_handlers(app)
    app.add_middleware(TokenAuth, token=token)
    return app


@pytest.fixture
def client() -> Iterator[TestClient]:
    with TestClient(make_app()) as c:
        yield c


def logged_in(client: TestClient) -> str:
    """Log ``client`` in; its CSRF token."""
    reply = client.post("/ui/login", json={"token": TOKEN})
    assert reply.status_code == 200, reply.text
    return str(reply.json()["csrf"])


def test_login_sets_a_strict_http_only_cookie_and_answers_a_csrf_token(
    client: TestClient,
) -> None:
    reply = client.post("/ui/login", json={"token": TOKEN})
    assert reply.status_code == 200, reply.text
    assert set(reply.json()) == {"csrf"}
    cookie = reply.headers["set-cookie"]
    attributes = {a.strip().split("=")[0].lower() for a in cookie.split(";")}
    assert {"httponly", "max-age", "path"} <= attributes
    assert "samesite=strict" in cookie.lower()
    assert "max-age=43200" in cookie.lower()
    assert "secure" not in attributes  # plain http here
    assert TOKEN not in cookie
    assert reply.headers["cache-control"] == "no-store"
    value = client.cookies[login.COOKIE]
    expiry, nonce, mac = value.split(".")
    assert expiry.isdigit() and nonce and mac
    assert reply.json()["csrf"] == login.csrf_token(TOKEN, nonce)


def test_behind_https_the_cookie_is_secure(client: TestClient) -> None:
    reply = client.post("/ui/login", json={"token": TOKEN}, headers={"X-Forwarded-Proto": "https"})
    assert reply.status_code == 200
    assert "secure" in {a.strip().lower() for a in reply.headers["set-cookie"].split(";")}


def test_the_cookie_and_its_csrf_token_stand_for_the_bearer_token(client: TestClient) -> None:
    csrf = logged_in(client)
    reply = client.get(PROTECTED, headers={login.CSRF_HEADER: csrf})
    assert reply.status_code == 200, reply.text
    # The bearer token works as before, with or without a cookie.
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    assert client.get(PROTECTED, headers=bearer).status_code == 200
    client.cookies.clear()
    assert client.get(PROTECTED, headers=bearer).status_code == 200


def test_a_wrong_token_is_refused_after_the_failure_wait(client: TestClient) -> None:
    failures: CountingFailures = client.app.state.ui_failed_logins  # type: ignore[attr-defined]
    for body in ({"token": "wrong"}, {"token": TOKEN + "x"}, {"token": TOKEN[:-1]}):
        reply = client.post("/ui/login", json=body)
        assert reply.status_code == 401, reply.text
        assert reply.json()["error"]["message"] == "Wrong gateway token."
        assert "set-cookie" not in reply.headers
    assert failures.waits == 3
    assert client.post("/ui/login", json={}).status_code == 400
    assert client.post("/ui/login", json={"token": ""}).status_code == 400
    assert client.post("/ui/login", content=b"token=" + TOKEN.encode()).status_code == 400
    assert failures.waits == 3  # malformed bodies never reach the comparison
    assert client.get(PROTECTED, headers={login.CSRF_HEADER: "x"}).status_code == 401


def test_no_cookie_is_refused(client: TestClient) -> None:
    csrf = logged_in(client)
    client.cookies.clear()
    reply = client.get(PROTECTED, headers={login.CSRF_HEADER: csrf})
    assert reply.status_code == 401
    assert reply.json()["error"]["message"].startswith("Missing bearer token")
    assert client.get("/ui/session").status_code == 401


def test_a_cookie_with_a_bad_mac_is_refused(client: TestClient) -> None:
    csrf = logged_in(client)
    expiry, nonce, mac = client.cookies[login.COOKIE].split(".")
    forged = {
        f"{expiry}.{nonce}.{mac[:-2]}AA",  # the MAC changed
        f"{int(expiry) + 3600}.{nonce}.{mac}",  # a later expiry under the old MAC
        f"{expiry}.other{nonce}.{mac}",  # another nonce under the old MAC
        f"{expiry}.{nonce}",
        "garbage",
    }
    for value in forged:
        client.cookies.clear()
        client.cookies.set(login.COOKIE, value)
        reply = client.get(PROTECTED, headers={login.CSRF_HEADER: csrf})
        assert reply.status_code == 401, value
        assert reply.json()["error"]["message"] == login.BAD_COOKIE.message
        assert client.get("/ui/session").status_code == 401


def test_an_expired_cookie_is_refused(client: TestClient) -> None:
    value, csrf = login.issue(TOKEN, now=0.0)  # expired in 1970
    client.cookies.set(login.COOKIE, value)
    reply = client.get(PROTECTED, headers={login.CSRF_HEADER: csrf})
    assert reply.status_code == 401
    assert reply.json()["error"]["message"] == login.BAD_COOKIE.message
    assert client.get("/ui/session").status_code == 401
    fresh, fresh_csrf = login.issue(TOKEN)
    client.cookies.set(login.COOKIE, fresh)
    assert client.get(PROTECTED, headers={login.CSRF_HEADER: fresh_csrf}).status_code == 200


def test_a_cookie_without_its_csrf_token_is_refused(client: TestClient) -> None:
    csrf = logged_in(client)
    for headers in ({}, {login.CSRF_HEADER: ""}, {login.CSRF_HEADER: csrf[:-1]}):
        for method in ("GET", "POST", "DELETE"):
            reply = client.request(method, PROTECTED, headers=headers)
            assert reply.status_code == 403, (method, headers)
            assert reply.json()["error"]["message"] == login.BAD_CSRF.message


def test_the_csrf_token_of_another_login_is_refused(client: TestClient) -> None:
    first = logged_in(client)
    second = logged_in(client)  # a new cookie, a new nonce
    assert first != second
    assert client.get(PROTECTED, headers={login.CSRF_HEADER: first}).status_code == 403
    assert client.get(PROTECTED, headers={login.CSRF_HEADER: second}).status_code == 200


def test_a_new_gateway_token_ends_every_ui_session(client: TestClient) -> None:
    csrf = logged_in(client)
    value = client.cookies[login.COOKIE]
    with TestClient(make_app(token=TOKEN + "-new")) as other:
        other.cookies.set(login.COOKIE, value)
        reply = other.get(PROTECTED, headers={login.CSRF_HEADER: csrf})
        assert reply.status_code == 401
        assert reply.json()["error"]["message"] == login.BAD_COOKIE.message
        assert other.get("/ui/session").status_code == 401


def test_session_gives_the_csrf_token_back_and_logout_clears_the_cookie(
    client: TestClient,
) -> None:
    csrf = logged_in(client)
    reply = client.get("/ui/session")
    assert reply.status_code == 200
    assert reply.json() == {"csrf": csrf}
    out = client.post("/ui/logout")
    assert out.status_code == 200
    assert login.COOKIE not in client.cookies
    assert client.get("/ui/session").status_code == 401
    assert client.get(PROTECTED, headers={login.CSRF_HEADER: csrf}).status_code == 401


def test_the_pages_are_public_with_a_strict_policy(client: TestClient) -> None:
    for path in ("/ui", "/ui/app.js", "/ui/api.js", "/ui/ui.css", "/ui/pages/sessions.js"):
        assert is_public(path), path
        reply = client.get(path)
        assert reply.status_code == 200, path
        policy = reply.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "unsafe-inline" not in policy
        assert "frame-ancestors 'none'" in policy
        assert reply.headers["x-content-type-options"] == "nosniff"
        assert reply.headers["referrer-policy"] == "no-referrer"
    page = client.get("/ui").text
    assert "<script>" not in page and "style=" not in page
    assert not is_public("/ui/nothing.js")
    assert client.get("/ui/nothing.js").status_code == 401
