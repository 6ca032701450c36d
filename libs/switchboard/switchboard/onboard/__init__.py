"""``switchboard onboard``: the first run's questions, each credential checked with one real call,
written as ``$SB_HOME/switchboard.toml`` through configfile's own validation (docs/config-file.md).

- :mod:`.checks`: the provider's models endpoint, the platform's identity call;
- :mod:`.prompts`: the terminal's questions (secrets without echo);
- :mod:`.wizard`: the questions in order, and the summary;
- :mod:`.write`: the answers as the file and its secret files.
"""

from __future__ import annotations

import re

# What a channel's user id looks like (the owner's identity is "<channel>:<id>", docs/trust.md).
USER_ID = {
    "telegram": re.compile(r"[0-9]{1,20}"),
    "slack": re.compile(r"[UW][A-Z0-9]{2,30}"),
    "discord": re.compile(r"[0-9]{15,25}"),
}
DISCORD_PUBLIC_KEY = re.compile(r"[0-9a-fA-F]{64}")
PROVIDERS = ("anthropic", "openai", "compatible")
CHANNELS = ("telegram", "slack", "discord", "none")
DM_POLICIES = ("pairing", "allowlist", "open")


def webhook_url(public: str) -> str:
    """Telegram's webhook: the gateway's public URL and the default account's path."""
    return f"{public.rstrip('/')}/channels/telegram/default"
