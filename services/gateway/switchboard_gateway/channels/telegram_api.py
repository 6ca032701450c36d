"""The Telegram Bot API over httpx: ``call(method, params)`` -> the answer's ``result``.

The bot token is part of every Bot API URL (``/bot<token>/<method>``). This client never holds
it in a URL: its requests go to ``/botTOKEN/<method>`` and the transport puts the token in only
as a request leaves, so httpx's request log, a response's ``request.url`` and any exception we
log show the placeholder.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

import httpx

from switchboard import jsonsafe

log = logging.getLogger(__name__)

PLACEHOLDER = "botTOKEN"  # stands for bot<token> in every URL the client builds
UPLOAD_TIMEOUT_S = 60.0


class BotApiError(Exception):
    """Telegram answered ``{"ok": false, "error_code", "description", "parameters"}``:
    ``code``, ``description`` and the parameters ``retry_after`` (429) and
    ``migrate_to_chat_id`` (a group that became a supergroup)."""

    def __init__(
        self,
        code: int,
        description: str,
        retry_after: float | None = None,
        migrate_to_chat_id: int | None = None,
    ) -> None:
        super().__init__(f"{code} {description}")
        self.code = code
        self.description = description
        self.retry_after = retry_after
        self.migrate_to_chat_id = migrate_to_chat_id


class _TokenTransport(httpx.AsyncBaseTransport):
    """Puts the token in place of ``/botTOKEN/`` as a request leaves."""

    def __init__(self, token: str) -> None:
        self._token = token.encode()
        self._inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.raw_path.replace(
            f"/{PLACEHOLDER}/".encode(), b"/bot" + self._token + b"/", 1
        )
        real = httpx.Request(
            request.method,
            request.url.copy_with(raw_path=path),
            headers=request.headers,
            stream=request.stream,
            extensions=request.extensions,
        )
        return await self._inner.handle_async_request(real)

    async def aclose(self) -> None:
        await self._inner.aclose()


class BotApi:
    """A bot's Bot API client (``open`` before use, ``close`` after)."""

    def __init__(self, api_base: str, token: str, *, timeout_s: float = 15.0) -> None:
        self.api_base = api_base.rstrip("/")
        self._token = token
        self._timeout_s = timeout_s
        self._http: httpx.AsyncClient | None = None

    def __repr__(self) -> str:  # never the token
        return f"BotApi(api_base={self.api_base!r})"

    def open(self) -> None:
        if self._http is None:
            self._http = httpx.AsyncClient(
                base_url=f"{self.api_base}/{PLACEHOLDER}/",
                transport=_TokenTransport(self._token),
                timeout=self._timeout_s,
                follow_redirects=False,
            )

    async def close(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def call(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        """One Bot API call; its ``result``. :class:`BotApiError` when Telegram refuses it;
        ``httpx.HTTPError`` (never holding the token) when it cannot be reached."""
        if self._http is None:
            raise RuntimeError("the Telegram client is not open")
        timeout = (
            httpx.Timeout(timeout_s, connect=10.0) if timeout_s is not None else self._http.timeout
        )
        response = await self._http.post(method, json=dict(params or {}), timeout=timeout)
        return result_of(response)

    async def upload(
        self,
        method: str,
        params: Mapping[str, Any],
        field: str,
        file: tuple[str, bytes, str],
        timeout_s: float = UPLOAD_TIMEOUT_S,
    ) -> Any:
        """A ``multipart/form-data`` call sending ``file`` (name, bytes, type) as ``field``
        (``sendPhoto``'s ``photo``...); other parameters as form fields (objects as JSON)."""
        if self._http is None:
            raise RuntimeError("the Telegram client is not open")
        data = {
            key: value if isinstance(value, str) else json.dumps(value)
            for key, value in params.items()
        }
        response = await self._http.post(
            method,
            data=data,
            files={field: file},
            timeout=httpx.Timeout(timeout_s, connect=10.0),
        )
        return result_of(response)

    async def fetch_file(self, file_path: str, max_bytes: int) -> bytes:
        """A file ``getFile`` named (``GET /file/bot<token>/<file_path>``), at most
        ``max_bytes``; :class:`BotApiError` when it is not there or larger."""
        if self._http is None:
            raise RuntimeError("the Telegram client is not open")
        url = f"{self.api_base}/file/{PLACEHOLDER}/{file_path}"
        async with self._http.stream("GET", url) as response:
            if response.status_code != 200:
                raise BotApiError(response.status_code, "the file could not be downloaded")
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > max_bytes:
                    raise BotApiError(400, f"the file is larger than {max_bytes} bytes")
        return bytes(body)


def result_of(response: httpx.Response) -> Any:
    """The ``result`` of a Bot API answer; :class:`BotApiError` for an error or a body that is
    not a Bot API answer (a proxy's HTML page...). Bounded JSON: polling's updates come this
    way too."""
    try:
        body = jsonsafe.loads(response.content)
    except jsonsafe.JsonRefused:
        body = None
    if not isinstance(body, dict):
        raise BotApiError(response.status_code, "the answer is not a Bot API object")
    if body.get("ok") is True:
        return body.get("result")
    code = body.get("error_code")
    parameters = body.get("parameters")
    parameters = parameters if isinstance(parameters, dict) else {}
    retry, migrate = parameters.get("retry_after"), parameters.get("migrate_to_chat_id")
    raise BotApiError(
        code if isinstance(code, int) and not isinstance(code, bool) else response.status_code,
        str(body.get("description", ""))[:200],
        float(retry) if isinstance(retry, int | float) and not isinstance(retry, bool) else None,
        migrate if isinstance(migrate, int) and not isinstance(migrate, bool) else None,
    )


def second_try(exc: BotApiError, params: dict[str, Any], plain: object) -> dict[str, Any] | None:
    """The ``sendMessage`` params to try once more after ``exc``: as plain text (``plain``)
    when Telegram could not parse our HTML, in the supergroup a group became; None when
    there is nothing to try."""
    if exc.code == 400 and "can't parse entities" in exc.description and "parse_mode" in params:
        log.warning("telegram could not parse a reply's HTML (%s); sent as plain text", exc)
        again = {k: v for k, v in params.items() if k != "parse_mode"}
        key = "caption" if "caption" in params else "text"  # a file's caption, or a message
        again[key] = plain if isinstance(plain, str) and plain.strip() else params[key]
        return again
    if exc.migrate_to_chat_id is not None:
        return {**params, "chat_id": exc.migrate_to_chat_id}
    return None


def describe(exc: BaseException) -> str:
    """An error in a few words safe to log (never a URL)."""
    return str(exc) if isinstance(exc, BotApiError) else type(exc).__name__
