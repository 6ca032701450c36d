"""Telegram's wire rules for the fake Bot API (:mod:`tests.fakes.telegram`): error answers,
parameters as JSON, form or query, and the HTML parse mode as its documentation states it: the
visible text of a message sent with ``parse_mode=HTML``, or :class:`HtmlError` where Telegram
answers "can't parse entities".

The rules (core.telegram.org/bots/api#html-style): only the tags ``b strong i em u ins s
strike del span(class="tg-spoiler") tg-spoiler a(href) tg-emoji code pre blockquote``, each
closed in order; ``<``, ``>`` and ``&`` that are not part of a tag or an entity must be
escaped; the named entities ``&lt; &gt; &amp; &quot;`` and numeric ones are the only entities.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

TAGS = frozenset(
    {"b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "span", "tg-spoiler", "a"}
    | {"tg-emoji", "code", "pre", "blockquote"}
)
NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}


@dataclass(frozen=True)
class Uploaded:
    """A file sent in a ``multipart/form-data`` call (``sendPhoto`` with the bytes)."""

    filename: str
    content_type: str
    data: bytes


@dataclass(frozen=True)
class Sent:
    """A message Telegram accepted: what the chat shows (``text``: visible text after the
    markup is parsed; ``raw``: the ``text`` parameter as sent)."""

    method: str
    chat_id: int
    message_id: int
    text: str
    raw: str
    parse_mode: str | None
    reply_to: int | None  # reply_parameters.message_id
    thread_id: int | None  # message_thread_id
    file_id: str | None  # a media message's file
    params: dict[str, Any]
    upload: Uploaded | None = None  # the file's bytes when it was uploaded


@dataclass(frozen=True)
class ApiCall:
    """Any call and its answer (``at``: ``time.monotonic()`` on arrival)."""

    method: str
    params: dict[str, Any]
    status: int
    description: str
    at: float


class HtmlError(ValueError):
    """What Telegram says after "can't parse entities: "."""


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.text: list[str] = []
        self.open: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []  # every start tag, in order

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in TAGS:
            raise HtmlError(f'Unsupported start tag "{tag}"')
        if tag == "a" and not dict(attrs).get("href"):
            raise HtmlError('Can\'t find "href" attribute of the tag "a"')
        self.open.append(tag)
        self.tags.append((tag, dict(attrs)))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        raise HtmlError(f'Unsupported self-closing tag "{tag}"')

    def handle_endtag(self, tag: str) -> None:
        if not self.open:
            raise HtmlError(f'Unexpected end tag "{tag}"')
        expected = self.open.pop()
        if expected != tag:
            raise HtmlError(f'Unmatched end tag "{tag}", expected "</{expected}>"')

    def handle_data(self, data: str) -> None:
        for reserved in "<>&":
            if reserved in data:
                raise HtmlError(f"Character '{reserved}' is reserved and must be escaped")
        self.text.append(data)

    def handle_entityref(self, name: str) -> None:
        if name not in NAMED:
            raise HtmlError(f'Unsupported HTML entity "&{name};"')
        self.text.append(NAMED[name])

    def handle_charref(self, name: str) -> None:
        self.text.append(html.unescape(f"&#{name};"))

    def unknown_decl(self, data: str) -> None:
        raise HtmlError("Unsupported declaration")

    def handle_comment(self, data: str) -> None:
        raise HtmlError("Unsupported comment")


def parse(markup: str) -> _Parser:
    parser = _Parser()
    parser.feed(markup)
    parser.close()
    rest = parser.rawdata if hasattr(parser, "rawdata") else ""
    if rest:  # an unfinished tag ("<b" at the end)
        raise HtmlError("Unclosed start tag")
    if parser.open:
        raise HtmlError(f'Can\'t find end tag corresponding to start tag "{parser.open[-1]}"')
    return parser


def visible_text(markup: str) -> str:
    """The text a chat shows for ``markup``; :class:`HtmlError` if Telegram refuses it."""
    return "".join(parse(markup).text)


class Refused(Exception):
    """A Bot API error answer: ``error_code``, ``description``, ``parameters``."""

    def __init__(self, code: int, description: str, parameters: dict[str, int] | None = None):
        super().__init__(description)
        self.code, self.description, self.parameters = code, description, parameters or {}


def refusal(code: int, description: str, retry_after: int | None) -> Refused:
    if not description:
        description = {
            400: "Bad Request: chat not found",
            403: "Forbidden: bot was blocked by the user",
            429: f"Too Many Requests: retry after {retry_after or 1}",
            500: "Internal Server Error",
            502: "Bad Gateway",
        }.get(code, "Error")
    if code == 429 and retry_after is None:
        retry_after = 1
    return Refused(code, description, {"retry_after": retry_after} if retry_after else None)


def ok(result: object, description: str | None = None) -> JSONResponse:
    body: dict[str, Any] = {"ok": True, "result": result}
    if description:
        body["description"] = description
    return JSONResponse(body)


def error_response(refused: Refused) -> JSONResponse:
    body: dict[str, Any] = {
        "ok": False,
        "error_code": refused.code,
        "description": refused.description,
    }
    if refused.parameters:
        body["parameters"] = dict(refused.parameters)
    return JSONResponse(body, status_code=refused.code)


def int_param(params: dict[str, Any], name: str) -> int | None:
    value = params.get(name)
    if isinstance(value, bool):
        return None
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        raise Refused(400, f"Bad Request: wrong parameter {name}") from None


async def params_of(request: Request) -> dict[str, Any]:
    params: dict[str, Any] = dict(request.query_params)
    content_type = request.headers.get("content-type", "")
    if content_type.startswith("application/json"):
        body = json.loads(await request.body() or b"{}")
        if not isinstance(body, dict):
            raise ValueError("not an object")
        params.update(body)
    elif content_type.startswith(("application/x-www-form-urlencoded", "multipart/form-data")):
        form = await request.form()
        for key, value in form.items():
            if isinstance(value, str):
                params[key] = value
            else:  # an uploaded file
                data = await value.read()
                params[key] = Uploaded(value.filename or "", value.content_type or "", data)
    return params
