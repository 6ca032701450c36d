"""Webhook configuration (``POST /hooks/*``, see :mod:`.hooks_api` and docs/channels/webhooks.md):
the mappings of ``SB_HOOKS_MAPPINGS``, their validation at start, the delivery targets of
``SB_HOOKS_TARGETS`` (the only chats ``/hooks/agent`` may deliver to, docs/trust.md), and the
small template language their messages, session keys and ids are written in.

``SB_HOOKS_MAPPINGS`` is a JSON object ``{name: mapping}``; each mapping is served at
``POST /hooks/<name>``::

    {"github": {"signature": {"secret": "..."}, "action": "agent",
                "message": "Push to {{payload.repository.full_name}} by {{payload.pusher.name}}",
                "id": "{{headers.x-github-delivery}}",
                "deliver": {"channel": "slack", "to": "C0123456"}}}

Templates substitute ``{{payload}}``, ``{{payload.a.b}}`` (list items by index:
``{{payload.commits.0.id}}``) and ``{{headers.<name>}}`` once, left to right: no expressions, no
attribute access, no code, and a substituted value is never expanded again. A missing field
renders empty; objects and lists render as compact JSON.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, TypeAdapter, ValidationError

from switchboard import tokens
from switchboard.sessions import AgentId, direct_key

VARIABLE = "SB_HOOKS_MAPPINGS"
TARGETS_VARIABLE = "SB_HOOKS_TARGETS"
_TARGET_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
RESERVED = frozenset({"wake", "agent"})  # the built-in endpoints
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
_PLACEHOLDER = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_REFERENCE = re.compile(r"\s*(payload|headers)((?:\.[^.{}\s]+)*)\s*")
# Headers a template cannot read: credentials would end up in the transcript.
HIDDEN_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})
TRUNCATED = " …[truncated]"
MAX_PLACEHOLDERS = 50  # per template


def main_session_key(agent: str) -> str:
    """The session a ``wake`` event goes to: the agent's own session for system events
    (``<agent>:hooks:main``)."""
    return direct_key(agent, "hooks", "main")


class Deliver(BaseModel):
    """Where the reply of a hook's run is sent: a chat on a channel the gateway serves."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    channel: str = Field(min_length=1, max_length=64)
    to: str = Field(min_length=1, max_length=256, description="the chat id on the platform")
    account: str = Field(default="default", min_length=1, max_length=64)
    thread: str = Field(default="", max_length=256, description="a thread in that chat")
    chat_type: Literal["direct", "group"] = "direct"


class Signature(BaseModel):
    """An HMAC-SHA256 of the raw body in a header, as GitHub signs (``X-Hub-Signature-256:
    sha256=<hex>``): for senders that cannot send a bearer token."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    secret: SecretStr
    header: str = Field(default="x-hub-signature-256", min_length=1, max_length=100)
    prefix: str = Field(default="sha256=", max_length=32)


class HookMapping(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    action: Literal["agent", "wake"]
    message: str = Field(min_length=1, max_length=10_000)  # template
    token: SecretStr | None = None  # its own bearer token (else SB_HOOKS_TOKEN's)
    signature: Signature | None = None  # or a signed body instead of a bearer token
    session_key: str = Field(default="", max_length=300)  # template; agent action only
    agent: AgentId | None = None
    deliver: Deliver | None = None  # agent action only
    id: str = Field(default="", max_length=300)  # template of the idempotency key


_MAPPINGS = TypeAdapter(dict[str, HookMapping])


class HooksConfigError(ValueError):
    """``SB_HOOKS_MAPPINGS`` (or ``SB_HOOKS_TOKEN``) is unusable; the message never holds a
    secret's value."""


def _where(loc: tuple[int | str, ...]) -> str:
    name, *rest = [str(x) for x in loc] or ["?"]
    return f"{VARIABLE}[{name!r}]" + "".join(f".{x}" for x in rest)


def _describe(error: ValidationError) -> str:
    """The problems without the values given (a token may be among them)."""
    parts = [f"{_where(e['loc'])}: {e['msg']}" for e in error.errors()[:5]]
    return "; ".join(parts)


def check_template(template: str, where: str) -> None:
    found = list(_PLACEHOLDER.finditer(template))
    if len(found) > MAX_PLACEHOLDERS:
        raise HooksConfigError(f"{where}: more than {MAX_PLACEHOLDERS} {{{{...}}}} references")
    for match in found:
        ref = _REFERENCE.fullmatch(match[1])
        if ref is None or (ref[1] == "headers" and not ref[2]):
            raise HooksConfigError(
                f"{where}: {{{{{match[1][:40]}}}}} is not a field reference: use "
                "{{payload}}, {{payload.a.b}} or {{headers.<name>}}"
            )


def parse_mappings(raw: str, *, hooks_token: str, gateway_token: str) -> dict[str, HookMapping]:
    """The mappings of ``SB_HOOKS_MAPPINGS`` (``raw``: its JSON), checked: names, templates,
    strong tokens and secrets, and a way to authenticate each (its own token, a signature, or
    ``SB_HOOKS_TOKEN``)."""
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:  # the position only: the text may hold a token
        raise HooksConfigError(
            f"{VARIABLE} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    except (ValueError, RecursionError):
        raise HooksConfigError(f"{VARIABLE} is not valid JSON") from None
    if not isinstance(data, dict):
        raise HooksConfigError(f'{VARIABLE} must be a JSON object {{"<name>": {{...}}}}')
    try:
        mappings = _MAPPINGS.validate_python(data)
    except ValidationError as exc:
        raise HooksConfigError(_describe(exc)) from None
    for name, mapping in mappings.items():
        _check_mapping(name, mapping, hooks_token=hooks_token, gateway_token=gateway_token)
    return mappings


def _check_mapping(name: str, m: HookMapping, *, hooks_token: str, gateway_token: str) -> None:
    where = _where((name,))
    if _NAME.fullmatch(name) is None:
        raise HooksConfigError(f"{where}: a mapping name is 1-64 characters of a-z 0-9 _ -")
    if name in RESERVED:
        raise HooksConfigError(f"{where}: {name!r} is a built-in endpoint (/hooks/{name})")
    secrets = {"token": m.token, "signature.secret": m.signature.secret if m.signature else None}
    for field, secret in secrets.items():
        if secret is not None:
            value = secret.get_secret_value()
            tokens.require_strong(f"{where}.{field}", value)
            if value == gateway_token:
                raise HooksConfigError(f"{where}.{field} must not be the gateway token")
    if m.token is not None and m.signature is not None:
        raise HooksConfigError(f"{where}: give a token or a signature, not both")
    if m.token is None and m.signature is None and not hooks_token:
        raise HooksConfigError(
            f"{where} has no token or signature and SB_HOOKS_TOKEN is not set: "
            "nothing would authenticate its calls"
        )
    if m.action == "wake" and (m.session_key or m.deliver is not None):
        raise HooksConfigError(
            f"{where}: a wake mapping goes to the agent's main session; "
            "session_key and deliver are for action 'agent'"
        )
    for field in ("message", "session_key", "id"):
        check_template(getattr(m, field), f"{where}.{field}")


def check_hooks_token(hooks_token: str, gateway_token: str) -> None:
    if hooks_token:
        tokens.require_strong("SB_HOOKS_TOKEN", hooks_token)
        if hooks_token == gateway_token:
            raise HooksConfigError(
                "SB_HOOKS_TOKEN must differ from SB_GATEWAY_TOKEN: "
                "webhook senders must not hold the gateway's token"
            )


# --- delivery targets (SB_HOOKS_TARGETS) ------------------------------------------------------


def check_target_names(targets: dict[str, Deliver]) -> None:
    """Target names are what a caller writes (``"deliver": "<name>"``): 1-64 of A-Za-z0-9_-."""
    for name in targets:
        if _TARGET_NAME.fullmatch(name) is None:
            raise HooksConfigError(
                f"{TARGETS_VARIABLE}: {name[:64]!r} is not a target name (1-64 of A-Z a-z 0-9 _ -)"
            )


def named_target(given: str | Deliver, targets: dict[str, Deliver]) -> Deliver | None:
    """The configured target ``given`` names or spells out in full (every field equal, the
    defaults included); None when it is neither."""
    if isinstance(given, str):
        return targets.get(given)
    return given if given in targets.values() else None


# --- templates ---------------------------------------------------------------------------------


def _lookup(root: Any, path: list[str]) -> Any:
    value = root
    for key in path:
        if isinstance(value, dict):
            value = value.get(key)
        elif isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        else:
            return None
    return value


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def bounded(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, marked when cut."""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - len(TRUNCATED))] + TRUNCATED


def render(template: str, payload: Any, headers: dict[str, str], limit: int) -> str:
    """``template`` with each ``{{payload...}}``/``{{headers.<name>}}`` replaced by the field
    (empty when missing), at most ``limit`` characters. Header names are lower case."""

    def substitute(match: re.Match[str]) -> str:
        ref = _REFERENCE.fullmatch(match[1])
        if ref is None:  # refused when the mapping was loaded; never evaluated
            return ""
        path = [p for p in ref[2].split(".") if p]
        if ref[1] == "headers":
            name = ".".join(path).lower()
            return "" if name in HIDDEN_HEADERS else headers.get(name, "")
        # One value never grows the message past its bound (a whole payload can be megabytes).
        return bounded(_text(_lookup(payload, path)), limit)

    return bounded(_PLACEHOLDER.sub(substitute, template), limit)
