"""``switchboard onboard``: the first run. Asks for the model provider and its key, one chat
channel and its token (each checked with one real call), the owner's identity and the DM
policy; runs the sandbox check; shows what will run; writes ``$SB_HOME/switchboard.toml``
(docs/config-file.md). ``--non-interactive`` takes the answers from flags, and secrets only
from the environment or a file (a flag's value is visible to anyone running ``ps``)."""

from __future__ import annotations

import argparse
import os
import secrets
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from switchboard.configfile import home_of, path_for
from switchboard.configfile.errors import ConfigError

if TYPE_CHECKING:  # imported when the command runs: `switchboard --help` loads every command
    from switchboard.onboard.write import Answers

USAGE = 2
DECLINED = 1


class UsageError(Exception):
    """A flag is missing or wrong (non-interactive): exit 2 with the message."""


class Refused(Exception):
    """A credential was refused or its service unreachable (non-interactive): exit 1."""


def _secret(environ: Mapping[str, str], what: str, env: str | None, file: str | None) -> str:
    """A secret from ``--<what>-env NAME`` or ``--<what>-file PATH``; "" when neither."""
    if env:
        if not environ.get(env):
            raise UsageError(f"--{what}-env {env}: that environment variable is not set")
        return environ[env].strip()
    if file:
        try:
            return Path(file).expanduser().read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise UsageError(f"--{what}-file {file}: {exc.strerror}") from exc
    return ""


def _from_flags(args: argparse.Namespace, environ: Mapping[str, str]) -> Answers:
    """The answers of ``--non-interactive``, each credential checked like the wizard's."""
    from switchboard.onboard import DISCORD_PUBLIC_KEY, USER_ID, webhook_url
    from switchboard.onboard.checks import (
        check_channel,
        check_provider,
        platform_base,
        provider_url,
    )
    from switchboard.onboard.write import Answers

    if args.provider is None:
        raise UsageError("--provider is required with --non-interactive")
    key = _secret(environ, "api-key", args.api_key_env, args.api_key_file)
    if not key and args.provider != "compatible":
        raise UsageError("--api-key-env NAME or --api-key-file PATH is required")
    if args.provider == "compatible" and not (args.base_url and args.model):
        raise UsageError("--base-url and --model are required with --provider compatible")
    answers = Answers(args.provider, key, (args.base_url or "").rstrip("/"), args.model or "")
    outcome = check_provider(
        args.provider, key, provider_url(args.provider, environ, args.base_url or "")
    )
    if not outcome.ok:
        raise Refused(f"model provider: {outcome.detail}")
    print(f"model provider: {outcome.detail}")
    answers.channel, answers.dm_policy = args.channel, args.dm_policy
    if args.channel == "none":
        return answers
    token = _secret(environ, "token", args.token_env, args.token_file)
    if not token:
        raise UsageError(f"--token-env NAME or --token-file PATH is required for {args.channel}")
    outcome = check_channel(args.channel, token, platform_base(args.channel, environ))
    if not outcome.ok:
        raise Refused(f"{args.channel}: {outcome.detail}")
    print(f"{args.channel}: {outcome.detail}")
    answers.token, answers.bot = token, outcome.identity.get("name", "")
    if args.owner and not USER_ID[args.channel].fullmatch(args.owner):
        raise UsageError(f"--owner {args.owner}: not a {args.channel} user id")
    answers.owner = args.owner or ""
    if args.channel == "telegram":
        answers.telegram_mode = args.telegram_mode
        if args.telegram_mode == "webhook":
            if not (args.webhook_url or "").startswith("https://"):
                raise UsageError("--webhook-url https://... is required in webhook mode")
            answers.webhook_url = webhook_url(args.webhook_url)
            answers.webhook_secret = secrets.token_urlsafe(32)
    elif args.channel == "slack":
        answers.signing_secret = _secret(
            environ, "signing-secret", args.signing_secret_env, args.signing_secret_file
        )
        if not answers.signing_secret:
            raise UsageError("--signing-secret-env NAME or --signing-secret-file PATH is required")
    else:
        if not DISCORD_PUBLIC_KEY.fullmatch(args.public_key or ""):
            raise UsageError("--public-key (the application's, 64 hex digits) is required")
        answers.public_key = args.public_key
        answers.application_id = args.application_id or outcome.identity.get("id", "")
    return answers


def _interactive(path: Path, environ: Mapping[str, str]) -> Answers | None:
    from switchboard.onboard.prompts import Prompter
    from switchboard.onboard.wizard import ask_channel, ask_owner, ask_provider

    prompter = Prompter()
    prompter.say(f"Switchboard's first run: this writes {path}.\n")
    if path.exists() and not prompter.confirm(
        f"{path} exists. Replace it (the old one is kept as {path.name}.bak)?", False
    ):
        return None
    answers = ask_provider(prompter, environ)
    prompter.say()
    ask_channel(prompter, answers, environ)
    prompter.say()
    ask_owner(prompter, answers)
    return answers


def run(args: argparse.Namespace) -> int:
    from switchboard.cli.doctor import check_sandbox
    from switchboard.onboard.wizard import Stopped, summary
    from switchboard.onboard.write import SECRETS_DIR, settings, validate, write

    path = path_for(home_of(args.home, os.environ))
    environ = os.environ
    try:
        if args.non_interactive:
            if path.exists() and not args.force:
                raise UsageError(f"{path} exists: --force replaces it (keeping a .bak)")
            answers = _from_flags(args, environ)
        else:
            found = _interactive(path, environ)
            if found is None:
                print("Nothing was written.")
                return DECLINED
            answers = found
        sandbox = check_sandbox(environ)
        state = "OK" if sandbox.ok else "WARN"
        print(f"\nSandbox: {state}: {sandbox.detail}")
        if not sandbox.ok and sandbox.fix:
            print(f"  fix: {sandbox.fix}")
        validate(path, answers, environ)  # before the summary: a refused file is never offered
        names = [f"{SECRETS_DIR}/{key}" for _, key in settings(answers)[1]]
        print("\nSummary:")
        for line in summary(answers, str(path), names):
            print(f"  {line}")
        if not args.non_interactive:
            from switchboard.onboard.prompts import Prompter

            if not Prompter().confirm("Write it?", True):
                print("Nothing was written.")
                return DECLINED
        written = write(path, answers, environ)
    except UsageError as exc:
        print(f"switchboard onboard: {exc}", file=sys.stderr)
        return USAGE
    except (Refused, Stopped) as exc:
        print(f"switchboard onboard: {exc}; nothing was written", file=sys.stderr)
        return DECLINED
    except ConfigError as exc:
        print(f"switchboard onboard: the file would be refused:\n{exc}", file=sys.stderr)
        return DECLINED
    except (EOFError, KeyboardInterrupt):
        print("\nswitchboard onboard: stopped; nothing was written", file=sys.stderr)
        return DECLINED
    if written.backup is not None:
        print(f"The previous file is {written.backup}.")
    print(f"Wrote {written.path}. Next: `switchboard up`.")
    return 0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "onboard",
        help="first run: write $SB_HOME/switchboard.toml, each credential checked",
        description="Ask for a model provider, a chat channel and the owner, check each "
        "credential with one real call, and write $SB_HOME/switchboard.toml. Secrets are "
        "never taken as flag values: --*-env NAME or --*-file PATH.",
    )
    add = parser.add_argument
    add("--home", help="data dir (default: $SB_HOME or ~/.switchboard)")
    add("--non-interactive", action="store_true", help="take every answer from the flags")
    add("--force", action="store_true", help="non-interactive: replace an existing file")
    add("--provider", choices=["anthropic", "openai", "compatible"])
    add("--api-key-env", metavar="NAME", help="the model key is in this environment variable")
    add("--api-key-file", metavar="PATH", help="the model key is in this file")
    add("--base-url", help="compatible: the server's base URL (…/v1)")
    add("--model", help="the model's id (default: the provider's default)")
    add("--channel", choices=["telegram", "slack", "discord", "none"], default="none")
    add("--token-env", metavar="NAME", help="the channel's bot token is in this variable")
    add("--token-file", metavar="PATH", help="the channel's bot token is in this file")
    add("--telegram-mode", choices=["webhook", "polling"], default="polling")
    add("--webhook-url", help="telegram webhook mode: the gateway's public https URL")
    add("--signing-secret-env", metavar="NAME", help="slack: the signing secret's variable")
    add("--signing-secret-file", metavar="PATH", help="slack: the signing secret's file")
    add("--public-key", help="discord: the application's public key")
    add("--application-id", help="discord: the application's id (default: the bot's)")
    add("--owner", help="the owner's user id on the channel")
    add("--dm-policy", choices=["pairing", "allowlist", "open"], default="pairing")
    parser.set_defaults(func=run)
