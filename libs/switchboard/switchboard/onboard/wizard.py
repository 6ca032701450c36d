"""The wizard's questions, in order: the model provider and its key, one channel and its token,
the owner's identity there and the DM policy. Each credential is checked with one real call
before the next question; a refused one is asked again. Nothing here prints a secret."""

from __future__ import annotations

import secrets
from collections.abc import Mapping

from . import CHANNELS, DISCORD_PUBLIC_KEY, DM_POLICIES, USER_ID, webhook_url
from .checks import Outcome, check_channel, check_provider, platform_base, provider_url
from .prompts import Prompter
from .write import Answers

PROVIDER_LABELS = {
    "anthropic": "Anthropic (Claude)",
    "openai": "OpenAI",
    "compatible": "an OpenAI-compatible server (Ollama, vLLM, OpenRouter...: its base URL)",
}
CHANNEL_LABELS = {
    "telegram": "Telegram (a bot from @BotFather)",
    "slack": "Slack (a bot token xoxb-... and the app's signing secret)",
    "discord": "Discord (a bot token and the application's public key)",
    "none": "none: WebChat and the OpenAI-compatible API only",
}
WHERE_IS_MY_ID = {
    "telegram": "your numeric user id (message @userinfobot on Telegram to see it)",
    "slack": "your member id (U...: your profile, ⋮, Copy member ID)",
    "discord": "your user id (Developer Mode on, right-click yourself, Copy User ID)",
}
MODELS_SHOWN = 10


class Stopped(Exception):
    """The person declined to go on (a service unreachable, a replacement refused)."""


def _retry(prompter: Prompter, outcome: Outcome) -> None:
    """After a failed check: a refused credential is asked again; an unreachable service is
    asked again only if the person wants to."""
    prompter.say(f"  ✗ {outcome.detail}")
    if outcome.refused:
        prompter.say("  Check it and type it again.")
    elif not prompter.confirm("  Try again?", True):
        raise Stopped(outcome.detail)


def ask_provider(prompter: Prompter, environ: Mapping[str, str]) -> Answers:
    options = [(p, label) for p, label in PROVIDER_LABELS.items()]
    provider = prompter.choose("Which model provider?", options, "anthropic")
    base_url = ""
    if provider == "compatible":
        while not base_url.startswith(("http://", "https://")):
            base_url = prompter.line("Its base URL (e.g. http://localhost:11434/v1)").rstrip("/")
    url = provider_url(provider, environ, base_url)
    while True:
        key = prompter.secret(
            "API key" + (" (empty for a server without one)" if provider == "compatible" else ""),
            allow_empty=provider == "compatible",
        )
        outcome = check_provider(provider, key, url)
        if outcome.ok:
            break
        _retry(prompter, outcome)
    prompter.say(f"  ✓ {outcome.detail}")
    if outcome.models:
        shown = ", ".join(outcome.models[:MODELS_SHOWN])
        more = (
            f" and {len(outcome.models) - MODELS_SHOWN} more"
            if len(outcome.models) > MODELS_SHOWN
            else ""
        )
        prompter.say(f"  Models: {shown}{more}")
    default = outcome.models[0] if provider == "compatible" and outcome.models else ""
    question = "Model" + ("" if provider == "compatible" else " (empty: Switchboard's default)")
    model = prompter.line(question, default)
    while provider == "compatible" and not model:  # a server has no default model of ours
        model = prompter.line("Model (its id on that server)")
    if model and outcome.models and model not in outcome.models:
        prompter.say(f"  (note: {model} is not among the models the provider lists)")
    return Answers(provider=provider, api_key=key, base_url=base_url, model=model)


def ask_channel(prompter: Prompter, answers: Answers, environ: Mapping[str, str]) -> None:
    options = [(c, CHANNEL_LABELS[c]) for c in CHANNELS]
    channel = answers.channel = prompter.choose("Which chat channel?", options, "telegram")
    if channel == "none":
        return
    base = platform_base(channel, environ)
    while True:
        token = prompter.secret(f"The {channel.capitalize()} bot token")
        outcome = check_channel(channel, token, base)
        if outcome.ok:
            break
        _retry(prompter, outcome)
    prompter.say(f"  ✓ {outcome.detail}")
    answers.token, answers.bot = token, outcome.identity.get("name", "")
    if channel == "telegram":
        _telegram(prompter, answers)
    elif channel == "slack":
        answers.signing_secret = prompter.secret("The Slack app's signing secret")
    else:
        while not DISCORD_PUBLIC_KEY.fullmatch(answers.public_key):
            answers.public_key = prompter.line("The application's public key (64 hex digits)")
        answers.application_id = prompter.line(
            "The application's id", outcome.identity.get("id", "")
        )
        answers.discord_gateway = prompter.confirm(
            "Hold Discord's gateway connection (needed for DMs and mentions)?", True
        )


def _telegram(prompter: Prompter, answers: Answers) -> None:
    modes = [
        ("webhook", "webhook: Telegram calls this gateway at a public https URL"),
        ("polling", "polling: the gateway asks Telegram (no public URL needed)"),
    ]
    answers.telegram_mode = prompter.choose(
        "How should Telegram reach Switchboard?", modes, "polling"
    )
    if answers.telegram_mode == "webhook":
        while not answers.webhook_url.startswith("https://"):
            base = prompter.line("The gateway's public https URL (e.g. https://bot.example.com)")
            answers.webhook_url = webhook_url(base) if base else ""
        # Telegram sends it back on every call: made here, never shown.
        answers.webhook_secret = secrets.token_urlsafe(32)


def ask_owner(prompter: Prompter, answers: Answers) -> None:
    if answers.channel != "none":
        pattern = USER_ID[answers.channel]
        prompter.say(
            f"Your identity on {answers.channel.capitalize()}: {WHERE_IS_MY_ID[answers.channel]}."
        )
        prompter.say("  (empty: none now; pair later with `switchboard pairing approve --owner`)")
        while True:
            owner = prompter.line("Your user id")
            if not owner or pattern.fullmatch(owner):
                break
            prompter.say(f"  That does not look like a {answers.channel} user id.")
        answers.owner = owner
    policies = [
        ("pairing", "pairing: a stranger gets a code; you approve it (recommended)"),
        ("allowlist", "allowlist: only the ids you list (and you)"),
        ("open", "open: anyone who finds the bot"),
    ]
    answers.dm_policy = prompter.choose(
        "Who may message the assistant directly?", policies, DM_POLICIES[0]
    )


def summary(answers: Answers, where: str, secret_files: list[str]) -> list[str]:
    """What ``switchboard up`` will run with this file; names where secrets go, never them."""
    model = answers.model or "the provider's default model"
    via = {"anthropic": "Anthropic", "openai": "OpenAI", "compatible": answers.base_url}
    lines = [
        f"Model: {model} via {via[answers.provider]}"
        + (" (key checked)" if answers.api_key else " (no key)"),
    ]
    if answers.channel == "none":
        lines.append("Channel: none (WebChat and the OpenAI-compatible API on the gateway)")
    else:
        how = f", {answers.telegram_mode}" if answers.channel == "telegram" else ""
        lines.append(f"Channel: {answers.channel} as {answers.bot}{how} (token checked)")
        if answers.webhook_url:
            lines.append(f"Webhook: {answers.webhook_url} (a new secret token)")
        owner = f"{answers.channel}:{answers.owner}" if answers.owner else "none yet"
        lines.append(f"Owner: {owner}")
    lines.append(f"Direct messages: {answers.dm_policy}")
    lines.append(
        "Services: gateway, router, agent, tools (sandboxed), memory, scheduler, media"
        " (`switchboard up`)"
    )
    lines.append(f"File: {where}")
    lines.append(f"Secrets: {', '.join(secret_files) or 'none'} (0600, not shown)")
    return lines
