"""The admin commands' way to the running system: its gateway's HTTP API with its token
(``SB_GATEWAY_URL`` or loopback on ``SB_HTTP_PORT``; ``SB_GATEWAY_TOKEN`` or the token file of
``$SB_HOME``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from switchboard.cli.home import Home
from switchboard.cli.settings import LauncherSettings

NOT_RUNNING = "is the system running? (`switchboard up`)"


class AdminError(Exception):
    """The command cannot be carried out; the text is for the user."""


@dataclass(frozen=True)
class Gateway:
    url: str
    token: str

    @classmethod
    def from_environment(cls, home_arg: str | None = None) -> Gateway:
        settings = LauncherSettings.from_environ(os.environ)
        url = settings.gateway_url or f"http://127.0.0.1:{settings.http_port}"
        if settings.gateway_token is not None and settings.gateway_token.get_secret_value():
            return cls(url.rstrip("/"), settings.gateway_token.get_secret_value())
        home = Home.resolve(home_arg, settings.home)
        try:
            token = home.token_file.read_text().strip()
        except OSError:
            token = ""
        if not token:
            raise AdminError(
                f"no gateway token: set SB_GATEWAY_TOKEN or start the system "
                f"(`switchboard up` writes {home.token_file})"
            )
        return cls(url.rstrip("/"), token)

    def call(self, method: str, route: str, **params: str) -> Any:
        """One request; the JSON answer, or :class:`AdminError` with the API's message."""
        return self.send(method, route, params)

    def send(
        self,
        method: str,
        route: str,
        params: Mapping[str, str],
        content: bytes | None = None,
        content_type: str = "",
    ) -> Any:
        """:meth:`call` with a body (``content`` of ``content_type``), given more time."""
        headers = {"Authorization": f"Bearer {self.token}"}
        if content_type:
            headers["Content-Type"] = content_type
        try:
            response = httpx.request(
                method,
                f"{self.url}{route}",
                params={k: v for k, v in params.items() if v},
                headers=headers,
                content=content,
                timeout=10.0 if content is None else 300.0,
            )
        except httpx.HTTPError as exc:
            raise AdminError(
                f"cannot reach the gateway at {self.url}: {exc}; {NOT_RUNNING}"
            ) from None
        if response.status_code >= 400:
            try:
                message = response.json()["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = response.text[:200]
            raise AdminError(f"{response.status_code}: {message}")
        return response.json()
