"""Several Slack workspaces on one gateway (issue 27): ``SB_SLACK_ACCOUNTS`` names them; each is
its own :class:`~.slack.SlackAdapter` (events at ``/channels/slack/<name>`` verified with its
own signing secret), served together by :class:`~.accounts.Accounts`. The single-workspace
settings (``SB_SLACK_BOT_TOKEN``, ``SB_SLACK_SIGNING_SECRET``) stay the account ``default``."""

from __future__ import annotations

from dataclasses import dataclass, field

from switchboard.errors import ConfigError

from ..accounts_config import DEFAULT
from ..config import GatewaySettings


@dataclass(frozen=True)
class Workspace:
    """One account's workspace as the adapter is built with it, checked."""

    account: str
    token: str = field(repr=False)
    secret: str = field(repr=False)
    api_base: str


def configured_workspaces(settings: GatewaySettings) -> list[Workspace]:
    """The ``default`` workspace of the single-workspace settings and the named ones."""
    workspaces: list[Workspace] = []
    token = settings.slack_bot_token.get_secret_value()
    secret = settings.slack_signing_secret.get_secret_value()
    if token or secret:
        if not token or not secret:
            given, missing = (
                ("SB_SLACK_BOT_TOKEN", "SB_SLACK_SIGNING_SECRET")
                if token
                else ("SB_SLACK_SIGNING_SECRET", "SB_SLACK_BOT_TOKEN")
            )
            raise ConfigError(
                f"{given} is set but {missing} is not: Slack needs both (or neither, to not "
                "serve it)."
            )
        workspaces.append(Workspace(DEFAULT, token, secret, settings.slack_api_base))
    for name, account in settings.slack_accounts.items():  # names checked (config.py)
        token = account.bot_token.get_secret_value()
        secret = account.signing_secret.get_secret_value()
        if not token.strip() or not secret.strip():
            raise ConfigError(f"SB_SLACK_ACCOUNTS {name!r} needs a bot_token and a signing_secret")
        workspaces.append(
            Workspace(name, token, secret, account.api_base or settings.slack_api_base)
        )
    return workspaces
