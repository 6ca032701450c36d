"""``GET /api/config``: the gateway's effective settings, secrets redacted, and the findings of
``switchboard security audit`` computed from the gateway's environment (operators, behind the
token like every ``/api`` route), for the Control UI's Configuration page.

It is the gateway's view: the settings the gateway itself runs with (every variable the
settings catalogue lists for the gateway), and an audit of the environment the gateway process
was given. Under ``switchboard up`` every service gets the same environment, so the audit sees
what the command would; in Compose or Kubernetes each service has its own, and the audit judges
the others' settings from the gateway's (docs/web-ui.md says so).

Redaction: a setting the catalogue marks ``secret`` is shown as :data:`REDACTED` when set (its
value never leaves the process), ``""`` when not; any ``SecretStr`` nested in another value
dumps as ``**********`` too, and a URL's password is replaced."""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, SecretStr

if TYPE_CHECKING:
    from switchboard.settings_reference.model import Setting

router = APIRouter()
REDACTED = "**********"
AUDIT_TIMEOUT_S = 10.0
_URL_PASSWORD = re.compile(r"(?P<head>[a-z][a-z0-9+.-]*://[^/@:\s]*:)[^/@\s]*(?=@)", re.I)
SEVERITY_ORDER = {"critical": 0, "warning": 1, "ok": 2}


@cache
def catalogue() -> tuple[Setting, ...]:
    """The gateway's settings as the settings reference lists them (docs/configuration.md);
    imported at the first request, not at the gateway's start (it reads every settings class)."""
    from switchboard.settings_reference.model import collect, sources

    [gateway] = [s for s in sources() if s.name == "gateway"]
    return tuple(collect([gateway]))


def _scrub(value: Any) -> Any:
    """``value`` with every URL's password replaced (SecretStr already dumps redacted)."""
    if isinstance(value, str):
        return _URL_PASSWORD.sub(lambda m: m["head"] + REDACTED, value)
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items()}
    return value


def _plain(value: Any) -> Any:
    """A secret's own value (``SecretStr``), else the value."""
    return value.get_secret_value() if isinstance(value, SecretStr) else value


def effective(settings: BaseModel) -> list[dict[str, Any]]:
    """Each catalogued setting of the gateway: its variable, value (redacted), whether it is
    secret and whether it is still its default."""
    dumped = settings.model_dump(mode="json")  # nested SecretStr: "**********"
    fields = type(settings).model_fields
    rows = []
    for s in catalogue():
        if s.field not in dumped or s.field not in fields:
            continue
        current = getattr(settings, s.field)
        default = fields[s.field].get_default(call_default_factory=True)
        if s.secret:
            shown: Any = REDACTED if _plain(current) else ""
        else:
            shown = _scrub(dumped[s.field])
        rows.append(
            {
                "env": s.env,
                "value": shown,
                "secret": s.secret,
                "default": _plain(current) == _plain(default),
                "description": s.description,
            }
        )
    return rows


def audit_findings(environ: Mapping[str, str]) -> list[dict[str, str]]:
    from switchboard.cli.home import Home
    from switchboard.cli.security import audit
    from switchboard.cli.settings import LauncherSettings

    home = Home.resolve(None, LauncherSettings.from_environ(environ).home)
    findings = audit(environ, home)
    findings.sort(key=lambda f: SEVERITY_ORDER.get(f.severity, 3))
    return [
        {"severity": f.severity, "check": f.check, "detail": f.detail, "fix": f.fix}
        for f in findings
    ]


@router.get("/api/config")
async def config(request: Request) -> dict[str, Any]:
    settings: BaseModel = request.app.state.settings
    await asyncio.to_thread(catalogue)  # built once (it reads every settings class)
    findings = await asyncio.wait_for(
        asyncio.to_thread(audit_findings, dict(os.environ)), AUDIT_TIMEOUT_S
    )
    return {
        "view": "gateway",
        "settings": effective(settings),
        "audit": findings,
    }
