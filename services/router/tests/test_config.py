"""Inbound security settings (public contract names, docs/trust.md) and their validation."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from switchboard import host, registry
from switchboard.settings import describe, environment_names, scoped_environ
from switchboard_router.config import (
    _CHANNEL_VARIABLE,
    DmPolicy,
    GroupActivation,
    GroupPolicy,
    RouterSettings,
)


def test_defaults_are_pairing_allowlist_and_mention() -> None:
    s = RouterSettings.from_environ({})
    assert (s.dm_policy, s.group_policy, s.group_activation, s.channel_security) == (
        DmPolicy.PAIRING,
        GroupPolicy.ALLOWLIST,  # groups are closed by default
        GroupActivation.MENTION,
        {},
    )
    assert s.dm_policy_for("telegram") is DmPolicy.PAIRING
    assert s.group_policy_for("telegram") is GroupPolicy.ALLOWLIST
    assert s.channel("telegram").allow_from == frozenset()
    assert s.channel("telegram").groups == frozenset()
    assert s.owner_identities() == frozenset()


def test_owners_and_approvers_are_one_set() -> None:
    s = RouterSettings.from_environ(
        {"SB_OWNERS": '["telegram:42", "slack:U1"]', "SB_APPROVERS": '["discord:7", "slack:U1"]'}
    )
    assert s.owners == {"telegram:42", "slack:U1"}
    assert s.owner_identities() == {"telegram:42", "slack:U1", "discord:7"}


def test_group_variables() -> None:
    s = RouterSettings.from_environ(
        {
            "SB_GROUP_POLICY": "pairing",
            "SB_TELEGRAM_GROUP_POLICY": "Allowlist",
            "SB_TELEGRAM_GROUPS": '[-1001234, "-1005"]',  # numbers too: Telegram's ids are
            "SB_TELEGRAM_GROUP_ALLOW_FROM": '["42"]',
            "SB_SLACK_GROUPS": '["C9"]',
            "SB_MY-CHAN_GROUP_POLICY": "open",
        }
    )
    telegram = s.channel("telegram")
    assert s.group_policy_for("telegram") is GroupPolicy.ALLOWLIST
    assert telegram.groups == {"-1001234", "-1005"}
    # channel TELEGRAM, GROUP_ALLOW_FROM: not channel TELEGRAM_GROUP, ALLOW_FROM (DMs)
    assert telegram.group_allow_from == {"42"} and telegram.allow_from == frozenset()
    assert "telegram_group" not in s.channel_security
    assert s.group_policy_for("slack") is GroupPolicy.PAIRING
    assert s.channel("slack").groups == {"C9"}
    assert s.group_policy_for("my-chan") is GroupPolicy.OPEN


def test_group_keys_in_the_json_map() -> None:
    s = RouterSettings.from_environ(
        {
            "SB_CHANNEL_SECURITY": '{"discord": {"group_policy": "open"}, "telegram":'
            ' {"group_policy": "pairing", "groups": [-100], "group_allow_from": ["1", 2]}}',
            "SB_TELEGRAM_GROUPS": '["-200"]',  # the variable wins over the map's entry
        }
    )
    assert s.group_policy_for("discord") is GroupPolicy.OPEN
    assert s.group_policy_for("telegram") is GroupPolicy.PAIRING
    assert s.channel("telegram").groups == {"-200"}
    assert s.channel("telegram").group_allow_from == {"1", "2"}


def test_per_channel_variables() -> None:
    s = RouterSettings.from_environ(
        {
            "SB_DM_POLICY": "allowlist",
            "SB_TELEGRAM_DM_POLICY": "Open",
            "SB_TELEGRAM_GROUP_ACTIVATION": "always",
            "SB_SLACK_ALLOW_FROM": '["U1", 42]',
        }
    )
    assert s.dm_policy_for("telegram") is DmPolicy.OPEN
    assert s.group_activation_for("telegram") is GroupActivation.ALWAYS
    assert s.dm_policy_for("slack") is DmPolicy.ALLOWLIST
    assert s.group_activation_for("slack") is GroupActivation.MENTION
    assert s.channel("slack").allow_from == {"U1", "42"}


def test_json_map_with_variables_winning() -> None:
    s = RouterSettings.from_environ(
        {
            "SB_CHANNEL_SECURITY": '{"discord": {"dm_policy": "open"},'
            ' "telegram": {"dm_policy": "allowlist", "allow_from": ["9"]}}',
            "SB_TELEGRAM_DM_POLICY": "pairing",
        }
    )
    assert s.dm_policy_for("discord") is DmPolicy.OPEN
    assert s.dm_policy_for("telegram") is DmPolicy.PAIRING
    assert s.channel("telegram").allow_from == {"9"}


@pytest.mark.parametrize(
    ("environ", "variable"),
    [
        ({"SB_DM_POLICY": "bogus"}, "SB_DM_POLICY"),
        ({"SB_GROUP_POLICY": "closed"}, "SB_GROUP_POLICY"),
        ({"SB_DISCORD_GROUP_POLICY": "members"}, "SB_DISCORD_GROUP_POLICY"),
        ({"SB_TELEGRAM_GROUPS": "-1001234"}, "SB_TELEGRAM_GROUPS"),
        ({"SB_SLACK_GROUP_ALLOW_FROM": '{"U1": 1}'}, "SB_SLACK_GROUP_ALLOW_FROM"),
        ({"SB_GROUP_ALLOW_FROM": '["42"]'}, "SB_GROUP_ALLOW_FROM"),  # not a channel "group"
        ({"SB_OWNERS": "telegram:42"}, "SB_OWNERS"),
        ({"SB_OWNERS": '["42"]'}, "SB_OWNERS"),
        ({"SB_OWNERS": '["telegram: 42"]'}, "SB_OWNERS"),
        ({"SB_OWNERS": "[42]"}, "SB_OWNERS"),
        ({"SB_APPROVERS": '["telegram:"]'}, "SB_APPROVERS"),
        ({"SB_GROUP_ACTIVATION": "sometimes"}, "SB_GROUP_ACTIVATION"),
        ({"SB_TELEGRAM_DM_POLICY": "bogus"}, "SB_TELEGRAM_DM_POLICY"),
        ({"SB_SLACK_GROUP_ACTIVATION": "x"}, "SB_SLACK_GROUP_ACTIVATION"),
        ({"SB_TELEGRAM_ALLOW_FROM": "42"}, "SB_TELEGRAM_ALLOW_FROM"),
        ({"SB_TELEGRAM_ALLOW_FROM": '{"42": true}'}, "SB_TELEGRAM_ALLOW_FROM"),
        ({"SB_TELEGRAM_ALLOW_FROM": "[true]"}, "SB_TELEGRAM_ALLOW_FROM"),
        ({"SB_TELEGRAM_ALLOW_FROM": "[not json"}, "SB_TELEGRAM_ALLOW_FROM"),
        ({"SB_CHANNEL_SECURITY": '{"telegram": 3}'}, "SB_CHANNEL_SECURITY"),
        ({"SB_CHANNEL_SECURITY": '{"slack": {"group_policy": "x"}}'}, "group_policy"),
        ({"SB_CHANNEL_SECURITY": '{"slack": {"groups": [true]}}'}, "groups"),
        ({"SB_CHANNEL_SECURITY": '{"slack": {"group_allow": ["1"]}}'}, "group_allow"),
        ({"SB_CHANNEL_SECURITY": '{"slack": {"accounts": {"Acme Inc": {}}}}'}, "Acme Inc"),
        ({"SB_CHANNEL_SECURITY": '{"slack": {"accounts": {"default": {}}}}'}, "'default'"),
        ({"SB_CHANNEL_SECURITY": '{"slack": {"accounts": {"a": {"groups": "C1"}}}}'}, "groups"),
        ({"SB_CHANNEL_SECURITY": '{"slack": {"accounts": {"a": {"accounts": {}}}}}'}, "accounts"),
    ],
)
def test_bad_values_name_the_variable(environ: dict[str, str], variable: str) -> None:
    with pytest.raises(ValidationError) as caught:
        RouterSettings.from_environ(environ)
    assert variable in describe(caught.value)


@pytest.mark.parametrize(
    "variable", ["SB_GROUP_POLICY", "SB_TELEGRAM_GROUP_POLICY", "SB_CHANNEL_SECURITY"]
)
def test_a_bad_group_policy_names_the_allowed_values(variable: str) -> None:
    value = '{"telegram": {"group_policy": "closed"}}' if "SECURITY" in variable else "closed"
    with pytest.raises(ValidationError) as caught:
        RouterSettings.from_environ({variable: value})
    said = describe(caught.value)
    assert all(choice in said for choice in ("allowlist", "pairing", "open")), said


def test_the_launcher_passes_the_per_channel_variables_to_the_router() -> None:
    """``switchboard up`` gives a service only the SB_* variables its settings read; the
    per-channel ones have names of their own and are kept by pattern, others' secrets not."""
    kept = {
        "SB_TELEGRAM_DM_POLICY": "open",
        "SB_TELEGRAM_ALLOW_FROM": '["42"]',
        "SB_SLACK_GROUP_ACTIVATION": "always",
        "SB_DM_POLICY": "allowlist",
        "SB_GROUP_POLICY": "pairing",
        "SB_DISCORD_GROUP_POLICY": "open",
        "SB_TELEGRAM_GROUPS": '["-100"]',
        "SB_TELEGRAM_GROUP_ALLOW_FROM": '["7"]',
        "SB_OWNERS": '["telegram:42"]',
        "SB_APPROVERS": '["slack:U1"]',
    }
    environ = {
        **kept,
        "SB_GATEWAY_TOKEN": "not-for-the-router-5f0c2e9a7b1d",
        "SB_TELEGRAM_BOT_TOKEN": "not-for-the-router-either-77aa",
    }
    scoped = scoped_environ(RouterSettings, environ)
    assert scoped == kept
    settings = RouterSettings.from_environ(scoped)
    assert settings.channel_security["telegram"].allow_from == frozenset({"42"})
    assert settings.channel_security["telegram"].group_allow_from == frozenset({"7"})
    assert settings.group_policy_for("discord") is GroupPolicy.OPEN
    assert settings.owner_identities() == {"telegram:42", "slack:U1"}


def test_no_other_service_setting_looks_like_a_channel_variable() -> None:
    """The router claims every SB_<CHANNEL>_<SETTING> of its environment (and the launcher
    gives it them): a setting of another service with such a name would be read as a
    channel's (and refused, or worse, obeyed)."""
    names = set().union(*(environment_names(host.settings_class(s)) for s in registry.SERVICES))
    assert len(names) > 100  # every service's settings were read
    claimed = {n for n in names if _CHANNEL_VARIABLE.match(n)}
    assert claimed == set()


def test_an_account_entry_replaces_the_fields_it_gives() -> None:
    s = RouterSettings.from_environ(
        {
            "SB_CHANNEL_SECURITY": '{"telegram": {"dm_policy": "allowlist", "allow_from": ["9"],'
            ' "groups": ["-1"], "accounts": {"family": {"allow_from": ["7"],'
            ' "dm_policy": "pairing"}, "quiet": {"group_activation": "always"}}}}',
            "SB_TELEGRAM_GROUPS": '["-5"]',  # the channel's variable: the channel's field
        }
    )
    assert s.channel("telegram").allow_from == {"9"}
    assert s.channel("telegram", "default").allow_from == {"9"}
    assert s.channel("telegram", "family").allow_from == {"7"}
    assert s.channel("telegram", "family").groups == {"-5"}  # not given: the channel's
    assert s.channel("telegram", "nobody").allow_from == {"9"}
    assert s.dm_policy_for("telegram", "family") is DmPolicy.PAIRING
    assert s.dm_policy_for("telegram", "quiet") is DmPolicy.ALLOWLIST
    assert s.group_activation_for("telegram", "quiet") is GroupActivation.ALWAYS
    assert s.group_activation_for("telegram") is GroupActivation.MENTION
