"""The checks of ``switchboard security audit`` about people (docs/trust.md): who reaches the
agent through which chat, with which tools, and how far they see."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from switchboard.cli.audit import CRITICAL, OK, RISKY_TOOLS, WARNING, Config, Finding

# A chat channel is served when the gateway has a bot token or named accounts for it (read from
# the environment, so that a gateway refusing its other settings still has its channels audited).
CHAT_CHANNELS = {
    "telegram": ("SB_TELEGRAM_BOT_TOKEN", "SB_TELEGRAM_ACCOUNTS"),
    "slack": ("SB_SLACK_BOT_TOKEN", "SB_SLACK_ACCOUNTS"),
    "discord": ("SB_DISCORD_BOT_TOKEN", "SB_DISCORD_ACCOUNTS"),
}


def served_channels(config: Config) -> list[str]:
    return [
        channel
        for channel, names in CHAT_CHANNELS.items()
        if any(config.environ.get(name, "").strip() not in ("", "{}") for name in names)
    ]


def _value(policy: Any) -> str:
    return str(getattr(policy, "value", policy))


def group_tools(config: Config) -> list[str]:
    """The risky tools a group run may use: those the agent's own policy and the group layer
    (SB_GROUP_TOOL_PROFILE) both allow, for the default agent."""
    agent = config.get("agent")
    if agent is None:
        return []
    from switchboard_agent.tools.policy import ToolPolicy, group_layer

    rules = agent.tool_rules()
    base = rules.per_agent.get("main", rules.default)
    layer: ToolPolicy = group_layer(agent)
    return [
        tool
        for tool, groups in RISKY_TOOLS.items()
        if (base is None or base.check(tool, groups).allowed) and layer.check(tool, groups).allowed
    ]


def _scopes(router: Any, channel: str) -> list[tuple[str, str]]:
    """(what to call it, account) for ``channel`` and each account with settings of its own
    (``channel_security.<channel>.accounts``): ``telegram``, ``telegram/family``."""
    found = getattr(router, "channel_security", {}).get(channel)
    accounts = sorted(getattr(found, "accounts", None) or ())
    return [(channel, ""), *((f"{channel}/{name}", name) for name in accounts)]


def _setting(channel: str, account: str, field: str) -> str:
    """Where ``field`` of a channel (``SB_TELEGRAM_GROUPS``) or of one of its accounts (in the
    router's ``channel_security``) is set."""
    if account:
        return f"channel_security.{channel}.accounts.{account}.{field}"
    return f"SB_{channel.upper()}_{field.upper()}"


def check_groups(config: Config) -> Iterable[Finding]:
    router = config.get("router")
    if router is None:
        return
    channels = served_channels(config)
    risky = group_tools(config)
    shown = ", ".join(t if t != "github__any" else "MCP tools" for t in risky)
    for channel in channels:
        for name, account in _scopes(router, channel):
            yield _group_finding(router, channel, account, name, shown)
    if risky and channels:
        yield Finding(
            WARNING,
            "group tools",
            f"runs in admitted groups may use {shown} (SB_GROUP_TOOL_PROFILE)",
            "SB_GROUP_TOOL_PROFILE=group (no file writes, commands, session tools or jobs)",
        )


def _group_finding(router: Any, channel: str, account: str, name: str, shown: str) -> Finding:
    """What the group policy of ``channel`` (of its ``account``, called ``name``) lets in."""
    policy = _value(router.group_policy_for(channel, account))
    groups = _setting(channel, account, "groups")
    if policy != "open":
        return Finding(OK, "groups", f"{name}: groups are admitted by {policy}")
    if shown:
        return Finding(
            CRITICAL,
            "groups",
            f"{name}: every group that adds the bot reaches the agent"
            f" ({_setting(channel, account, 'group_policy')} or SB_GROUP_POLICY is open),"
            f" and group runs may use {shown}",
            f"SB_GROUP_POLICY=allowlist with {groups}='[\"<group id>\"]' (or pairing), or"
            " SB_GROUP_TOOL_PROFILE=group",
        )
    return Finding(
        WARNING,
        "groups",
        f"{name}: every group that adds the bot reaches the agent (with the group tool profile)",
        f"SB_GROUP_POLICY=allowlist with {groups}, or pairing",
    )


def check_direct(config: Config) -> Iterable[Finding]:
    router = config.get("router")
    if router is None:
        return
    channels = served_channels(config)
    for channel in channels:
        for name, account in _scopes(router, channel):
            if _value(router.dm_policy_for(channel, account)) == "open":
                yield Finding(
                    WARNING,
                    "direct messages",
                    f"{name}: anyone who writes to the bot gets a conversation with the agent"
                    " (DM policy open; each in a workspace and memory of their own)",
                    f"{_setting(channel, account, 'dm_policy')}=pairing (the default) or allowlist",
                )
    owners = list(getattr(router, "owners", ())) + list(getattr(router, "approvers", ()))
    if channels and not owners:
        yield Finding(
            WARNING,
            "owners",
            "no owner is configured on the chat channels: your own chats run as a paired"
            " user's (no USER.md or MEMORY.md, a workspace of their own)",
            "SB_OWNERS='[\"telegram:<your id>\"]', or switchboard pairing approve --owner",
        )


def check_visibility(config: Config) -> Iterable[Finding]:
    agent = config.get("agent")
    if agent is None:
        return
    visibility = _value(getattr(agent, "session_visibility", "tree"))
    if visibility == "all":
        yield Finding(
            WARNING,
            "session visibility",
            "the owner's runs may read and write every session of every agent"
            " (SB_SESSION_VISIBILITY=all): a prompt injection in one reaches all",
            "SB_SESSION_VISIBILITY=tree (the default) or agent",
        )
    else:
        yield Finding(OK, "session visibility", f"session tools see {visibility}")
