"""The wizard's answers as ``switchboard.toml``, checked by configfile's own validation before
anything is written.

Secrets are written as ``file:secrets/<key>`` references to files of their own under
``$SB_HOME/secrets`` (0600, in a 0700 folder), not as values in the file: the file then holds
nothing secret, so it can be shown, copied or pasted into a bug report as it is (``config
show`` has nothing to hide), and the keys sit where ``switchboard up`` keeps its other
credentials and where ``security audit`` checks their modes. Replacing a key is replacing one
file."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomlkit

from switchboard.configfile.edit import write_atomic
from switchboard.configfile.load import check, load

SECRETS_DIR = "secrets"
FILE_MODE = 0o644  # nothing secret in it: the secrets are references
SECRET_MODE = 0o600


@dataclass
class Answers:
    """What the wizard (or the flags) chose. Secret fields are never in ``repr``."""

    provider: str  # anthropic | openai | compatible
    api_key: str = field(default="", repr=False)
    base_url: str = ""  # an OpenAI-compatible server's (…/v1); "" for the others
    model: str = ""  # the model's id; "": the provider's default model
    channel: str = "none"  # telegram | slack | discord | none
    token: str = field(default="", repr=False)
    bot: str = ""  # the bot's name the identity call gave (for the summary)
    telegram_mode: str = "webhook"
    webhook_url: str = ""
    webhook_secret: str = field(default="", repr=False)
    signing_secret: str = field(default="", repr=False)  # Slack's
    public_key: str = ""  # Discord's application public key
    application_id: str = ""  # Discord's
    discord_gateway: bool = True
    owner: str = ""  # the owner's user id on the channel ("": none yet)
    dm_policy: str = "pairing"

    @property
    def provider_key(self) -> str:
        return "anthropic" if self.provider == "anthropic" else "openai"


@dataclass(frozen=True)
class Written:
    path: Path
    backup: Path | None
    secret_files: tuple[Path, ...]


def settings(answers: Answers) -> tuple[dict[str, dict[str, Any]], dict[tuple[str, str], str]]:
    """The file's tables (secrets left out) and the secrets by (section, key)."""
    agent: dict[str, Any] = {}
    secrets: dict[tuple[str, str], str] = {}
    kind = answers.provider_key
    if answers.model:
        agent["model"] = f"{kind}:{answers.model}"
    if answers.base_url:
        agent["openai_base_url"] = answers.base_url
    if answers.api_key:
        secrets[("agent", f"{kind}_api_key")] = answers.api_key
    gateway: dict[str, Any] = {}
    channel = answers.channel
    if channel != "none":
        secrets[("gateway", f"{channel}_bot_token")] = answers.token
    if channel == "telegram":
        gateway["telegram_mode"] = answers.telegram_mode
        if answers.telegram_mode == "webhook":
            gateway["telegram_webhook_url"] = answers.webhook_url
            secrets[("gateway", "telegram_webhook_secret")] = answers.webhook_secret
    elif channel == "slack":
        secrets[("gateway", "slack_signing_secret")] = answers.signing_secret
    elif channel == "discord":
        gateway["discord_public_key"] = answers.public_key
        gateway["discord_application_id"] = answers.application_id
        gateway["discord_gateway"] = answers.discord_gateway
    router: dict[str, Any] = {"dm_policy": answers.dm_policy}
    if channel != "none" and answers.owner:
        router["owners"] = [f"{channel}:{answers.owner}"]
    tables = {"agent": agent, "gateway": gateway, "router": router}
    return {name: table for name, table in tables.items() if table}, secrets


def render(answers: Answers, *, literal: bool) -> str:
    """The file's text: secrets as ``file:`` references, or (``literal``, only to validate it
    in memory) as their values."""
    tables, secrets = settings(answers)
    document = tomlkit.document()
    document.add(tomlkit.comment("Written by `switchboard onboard` (docs/config-file.md)."))
    document.add(
        tomlkit.comment("Secrets are files in secrets/ (0600), named by file: references.")
    )
    for section in ("agent", "gateway", "router"):
        table = tomlkit.table()
        for key, value in tables.get(section, {}).items():
            table[key] = value
        for (where, key), value in secrets.items():
            if where == section:
                table[key] = value if literal else f"file:{SECRETS_DIR}/{key}"
        if table:
            document[section] = table
    return tomlkit.dumps(document)


def validate(path: Path, answers: Answers, environ: Mapping[str, str]) -> None:
    """configfile's validation of the file as it will be read, secrets included (checked in
    memory, as a 0600 file holding them); ConfigError with every problem."""
    check(path, render(answers, literal=True), environ, SECRET_MODE)


def write(path: Path, answers: Answers, environ: Mapping[str, str]) -> Written:
    """Validate, then write the secrets and the file (an existing file kept as ``.bak``), then
    read it back as every command will."""
    validate(path, answers, environ)
    home = path.parent
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    backup = None
    if path.exists():
        backup = path.with_name(path.name + ".bak")
        shutil.copy2(path, backup)
    folder = home / SECRETS_DIR
    folder.mkdir(mode=0o700, exist_ok=True)
    folder.chmod(0o700)
    written = []
    for (_, key), value in settings(answers)[1].items():
        written.append(folder / key)
        write_atomic(folder / key, value + "\n", SECRET_MODE)
    write_atomic(path, render(answers, literal=False), FILE_MODE)
    load(path, environ)
    return Written(path, backup, tuple(written))
