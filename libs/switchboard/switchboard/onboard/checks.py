"""The wizard's one real call per credential: the provider's models endpoint for a model key,
the platform's identity call for a channel token. Each says whether the credential was refused
(ask again), the service could not be reached (say so), or what it answered (the models, the
bot's name). httpx is imported on the first call: ``switchboard --help`` does not load it.

The base URLs are the settings the services read (``ANTHROPIC_BASE_URL``, ``OPENAI_BASE_URL``,
``SB_TELEGRAM_API_BASE``...), with their defaults, so a test points them at its fakes the way
it points the running system at them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import create_model

from switchboard import host, registry
from switchboard.settings import ModelSettings, Settings

if TYPE_CHECKING:
    import httpx

ANTHROPIC_URL = "https://api.anthropic.com"
OPENAI_URL = "https://api.openai.com/v1"
ANTHROPIC_VERSION = "2023-06-01"
TIMEOUT_S = 15.0
# The gateway's settings naming each platform's API base URL.
BASES = {
    "telegram": "telegram_api_base",
    "slack": "slack_api_base",
    "discord": "discord_api_base",
}


@dataclass(frozen=True)
class Outcome:
    ok: bool
    refused: bool  # the service answered that the credential is not valid: ask again
    detail: str  # what to tell the person; never the credential
    models: tuple[str, ...] = ()
    identity: dict[str, str] = field(default_factory=dict)  # id, name of the bot


def provider_url(provider: str, environ: Mapping[str, str], base_url: str = "") -> str:
    """The base URL the agent would use: ``base_url`` (an OpenAI-compatible server), else the
    provider's setting, else the provider's own."""
    model = ModelSettings.from_environ(environ)
    if provider == "anthropic":
        return (model.anthropic_base_url.strip() or ANTHROPIC_URL).rstrip("/")
    return (base_url.strip() or model.openai_base_url.strip() or OPENAI_URL).rstrip("/")


def platform_base(channel: str, environ: Mapping[str, str]) -> str:
    """The gateway's ``<channel>_api_base`` as the gateway would read it from ``environ``: its
    own default, the variable's value when set (only that field is read: the gateway's other
    settings are not the wizard's concern)."""
    name = BASES[channel]
    gateway = host.settings_class(registry.get("gateway"))
    default = gateway.model_fields[name].default
    fields: dict[str, Any] = {name: (str, default)}
    one = create_model("PlatformBase", __base__=Settings, **fields)
    return str(getattr(one.from_environ(environ), name)).rstrip("/")


def _call(url: str, headers: dict[str, str], method: str = "GET") -> httpx.Response | str:
    """The response, or why there was none."""
    import httpx

    try:
        with httpx.Client(timeout=TIMEOUT_S, follow_redirects=False) as client:
            return client.request(method, url, headers=headers)
    except httpx.HTTPError as exc:
        return f"could not reach {url}: {type(exc).__name__}: {exc}"


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def check_provider(provider: str, key: str, url: str) -> Outcome:
    """``GET <url>/v1/models`` (Anthropic: ``x-api-key``) or ``GET <url>/models`` (OpenAI and
    compatible servers: a bearer key, none for a keyless local server)."""
    if provider == "anthropic":
        headers = {"x-api-key": key, "anthropic-version": ANTHROPIC_VERSION}
        endpoint = f"{url}/v1/models"
    else:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        endpoint = f"{url}/models"
    response = _call(endpoint, headers)
    if isinstance(response, str):
        return Outcome(False, False, response)
    if response.status_code in (401, 403):
        return Outcome(False, True, f"{endpoint} refused the key (HTTP {response.status_code})")
    body = _json(response)
    data = body.get("data") if isinstance(body, dict) else None
    if response.status_code != 200 or not isinstance(data, list):
        return Outcome(False, False, f"{endpoint} answered HTTP {response.status_code}, not a list")
    models = tuple(str(m["id"]) for m in data if isinstance(m, dict) and "id" in m)
    return Outcome(True, False, f"the key works: {len(models)} model(s) at {url}", models)


def check_channel(channel: str, token: str, base: str) -> Outcome:
    """The platform's identity call with the bot's token: Telegram ``getMe``, Slack
    ``auth.test``, Discord ``GET /users/@me``."""
    method = "GET"
    if channel == "telegram":
        endpoint, headers = f"{base}/bot{token}/getMe", {}
        shown = f"{base}/bot<token>/getMe"  # the token is in Telegram's path: never printed
    elif channel == "slack":
        endpoint = shown = f"{base}/auth.test"
        headers, method = {"Authorization": f"Bearer {token}"}, "POST"  # Slack's method
    else:
        endpoint = shown = f"{base}/users/@me"
        headers = {"Authorization": f"Bot {token}"}
    response = _call(endpoint, headers, method)
    if isinstance(response, str):
        return Outcome(False, False, response.replace(endpoint, shown).replace(token, "<token>"))
    body = _json(response)
    body = body if isinstance(body, dict) else {}
    if channel == "slack" and response.status_code == 200 and body.get("ok") is False:
        error = str(body.get("error", ""))
        refused = error in ("invalid_auth", "not_authed", "account_inactive", "token_revoked")
        return Outcome(False, refused, f"{shown} refused the token ({error})")
    if response.status_code in (401, 403, 404) and channel != "slack":
        # Telegram answers 404 for a token of the wrong shape, 401 for an unknown one.
        return Outcome(False, True, f"{shown} refused the token (HTTP {response.status_code})")
    if response.status_code != 200:
        return Outcome(False, False, f"{shown} answered HTTP {response.status_code}")
    return _identity(channel, body)


def _identity(channel: str, body: dict[str, Any]) -> Outcome:
    if channel == "telegram":
        result = body.get("result")
        me: dict[str, Any] = result if isinstance(result, dict) else {}
        found = {"id": str(me.get("id", "")), "name": "@" + str(me.get("username", ""))}
    elif channel == "slack":
        found = {
            "id": str(body.get("user_id", "")),
            "name": f"{body.get('user')} in {body.get('team')}",
        }
    else:
        found = {"id": str(body.get("id", "")), "name": str(body.get("username", ""))}
    return Outcome(True, False, f"the token works: the bot is {found['name']}", identity=found)
