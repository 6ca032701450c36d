"""Router settings.

Inbound security (docs/trust.md, see :mod:`switchboard_router.security`):

- ``SB_OWNERS``: a JSON list of ``"<channel>:<sender id>"``, the owner's identities on chat
  channels; ``SB_APPROVERS`` (the older name, same format) is folded into them.
- ``SB_DM_POLICY``: ``pairing`` (default), ``allowlist`` or ``open``, for every chat channel;
  ``SB_<CHANNEL>_DM_POLICY`` (``SB_TELEGRAM_DM_POLICY``...) for one channel.
- ``SB_<CHANNEL>_ALLOW_FROM``: a JSON list of the sender ids the channel admits in DMs.
- ``SB_GROUP_POLICY``: ``allowlist`` (default), ``pairing`` or ``open``, for every channel's
  groups; ``SB_<CHANNEL>_GROUP_POLICY`` for one channel's.
- ``SB_<CHANNEL>_GROUPS``: a JSON list of the group ids the channel admits (Telegram chat ids,
  Slack and Discord channel ids).
- ``SB_<CHANNEL>_GROUP_ALLOW_FROM``: a JSON list of the sender ids who may talk to the bot in
  that channel's admitted groups (none: every member; owners always may).
- ``SB_GROUP_ACTIVATION``: ``mention`` (default) or ``always``; ``SB_<CHANNEL>_GROUP_ACTIVATION``.
- ``SB_CHANNEL_SECURITY``: the same per channel as one JSON map,
  ``{"telegram": {"dm_policy": "allowlist", "allow_from": ["42"], "group_policy": "pairing",
  "groups": ["-1001234"], "group_allow_from": ["42"]}}``; a per-channel variable wins over its
  entry there. A channel's ``accounts`` map gives a named account (a second bot, another Slack
  workspace) fields of its own, which replace the channel's for that account's messages:
  ``{"telegram": {"allow_from": ["42"], "accounts": {"family": {"allow_from": ["43"]}}}}``.

The per-channel variables have names of their own for any channel, so the settings' environment
source cannot declare them: :class:`_ChannelVariables` picks them out of the same environment
(``os.environ`` or the mapping given to ``from_environ``) and hands them to the
``channel_security`` field, whose validator parses them and names the variable when one is wrong.
"""

from __future__ import annotations

import json
import re
from enum import StrEnum
from typing import Annotated, Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
)

from switchboard import trust
from switchboard.queue_modes import QueueMode
from switchboard.sessions import AgentId
from switchboard.settings import CommonSettings, RpcSettings

E = TypeVar("E", bound=StrEnum)
DEFAULT_ACCOUNT = "default"  # the account of a channel's single-account settings
_ACCOUNT = re.compile(r"[a-z0-9_-]{1,64}")


class DmPolicy(StrEnum):
    OPEN = "open"
    ALLOWLIST = "allowlist"
    PAIRING = "pairing"  # the allow list, plus senders an operator approved by pairing code


class GroupPolicy(StrEnum):
    ALLOWLIST = "allowlist"  # the channel's listed group ids only
    PAIRING = "pairing"  # the listed ones, plus groups an operator approved by pairing code
    OPEN = "open"  # every group (the behaviour before groups were closed by default)


class GroupActivation(StrEnum):
    MENTION = "mention"
    ALWAYS = "always"


class AccountSecurity(BaseModel):
    """One account's overrides of its channel's settings (a second Telegram bot, another Slack
    workspace): a field given here replaces the channel's for messages of that account; one not
    given is the channel's. ``None``: the channel's, then the router-wide setting."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # Who may DM the agent on this channel (pairing, allowlist, open); unset: SB_DM_POLICY.
    dm_policy: DmPolicy | None = None
    # JSON list of the sender ids this channel admits in DMs.
    allow_from: frozenset[str] = frozenset()
    # Which of this channel's groups reach the agent; unset: SB_GROUP_POLICY.
    group_policy: GroupPolicy | None = None
    # JSON list of the group ids this channel admits (Telegram chat ids, Slack and Discord channel
    # ids).
    groups: frozenset[str] = frozenset()
    # JSON list of the sender ids who may talk to the bot in this channel's admitted groups (none:
    # every member; owners always may).
    group_allow_from: frozenset[str] = frozenset()
    # In this channel's groups: mention or always; unset: SB_GROUP_ACTIVATION.
    group_activation: GroupActivation | None = None

    @field_validator("allow_from", "groups", "group_allow_from", mode="before")
    @classmethod
    def _ids(cls, value: object, info: ValidationInfo) -> frozenset[str]:
        """Ids as strings; numbers too (Telegram's ids are numbers, group ids negative)."""
        return _id_list(str(info.field_name), value)


class ChannelSecurity(AccountSecurity):
    """One channel's overrides; ``None``: the router-wide setting. ``accounts``: the overrides of
    one named account of the channel (:meth:`for_account`); the account ``default`` (the
    single-account settings) is the channel itself."""

    # Per account: {"family": {"allow_from": ["43"]}}; a field not given is the channel's.
    accounts: dict[str, AccountSecurity] = Field(default_factory=dict)

    @field_validator("accounts", mode="before")
    @classmethod
    def _account_names(cls, value: object) -> object:
        if isinstance(value, dict):
            for name in value:
                if not _ACCOUNT.fullmatch(str(name)) or name == DEFAULT_ACCOUNT:
                    raise ValueError(
                        f"account {name!r}: an account's name is 1-64 of a-z 0-9 _ - (the"
                        f" account {DEFAULT_ACCOUNT!r} is the channel's own settings)"
                    )
        return value

    def for_account(self, account: str) -> AccountSecurity:
        """The settings messages of ``account`` obey: the channel's, with the fields the
        account's entry gives replaced."""
        entry = self.accounts.get(account) if account and account != DEFAULT_ACCOUNT else None
        base = AccountSecurity.model_validate(self.model_dump(exclude={"accounts"}))
        if entry is None:
            return base
        given = {name: getattr(entry, name) for name in entry.model_fields_set}
        return base.model_copy(update=given)


class Binding(BaseModel):
    """Messages of ``channel`` (and ``account``, and ``peer`` for DMs or ``group`` for a group
    chat, when given) go to ``agent``. The most specific binding wins: peer or group, then
    account, then channel; a message without one goes to the default agent."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    channel: str = Field(min_length=1, max_length=64)
    account: str = ""
    peer: str = ""
    group: str = ""
    agent: AgentId

    def matches(self, channel: str, account: str, chat_type: str, chat_id: str) -> bool:
        if self.channel != channel or (self.account and self.account != account):
            return False
        if self.peer:
            return chat_type != "group" and self.peer == chat_id
        if self.group:
            return chat_type == "group" and self.group == chat_id
        return True

    @property
    def specificity(self) -> int:
        return 2 * bool(self.peer or self.group) + bool(self.account)


# SB_<CHANNEL>_<SETTING>; the channel is one token of letters, digits and dashes/underscores.
# The channel part is lazy: SB_TELEGRAM_GROUP_ALLOW_FROM is channel TELEGRAM, GROUP_ALLOW_FROM
# (not channel TELEGRAM_GROUP, ALLOW_FROM). No other service's setting ends in one of these
# (test_config checks every settings class).
_CHANNEL_VARIABLE = re.compile(
    r"^SB_([A-Z0-9][A-Z0-9_-]*?)_"
    r"(DM_POLICY|ALLOW_FROM|GROUP_POLICY|GROUPS|GROUP_ALLOW_FROM|GROUP_ACTIVATION)$"
)
# What SB_GROUP_ALLOW_FROM would parse as (channel GROUP): a router-wide sender allowlist that
# does not exist, so it is refused rather than read as the DMs of a channel called "group".
_NOT_A_CHANNEL = {("group", "ALLOW_FROM")}


def _choice(kind: type[E], variable: str, value: object, echo: bool = True) -> E:
    """``value`` as a ``kind``; ``echo``: name the value in the error (describe() already does
    for a field's own string input)."""
    try:
        return kind(str(value).strip().lower())
    except ValueError:
        choices = ", ".join(e.value for e in kind)
        given = f" (given: {value!r})" if echo else ""
        raise ValueError(f"{variable} must be one of {choices}{given}") from None


def _id_list(variable: str, value: object) -> frozenset[str]:
    """A JSON list (or a list) of ids, strings or integers, as strings."""
    try:
        parsed = json.loads(value) if isinstance(value, str) else value
    except json.JSONDecodeError:
        parsed = None
    if isinstance(parsed, set | frozenset | tuple):
        parsed = list(parsed)
    if not isinstance(parsed, list) or not all(
        isinstance(x, str | int) and not isinstance(x, bool) for x in parsed
    ):
        raise ValueError(
            f'{variable} must be a JSON list of ids, e.g. ["12345"] (given: {value!r})'
        )
    return frozenset(str(x) for x in parsed)


def _identities(variable: str, value: object) -> frozenset[str]:
    """A JSON list of ``"<channel>:<sender id>"`` (SB_OWNERS, SB_APPROVERS); the error does not
    repeat the value (describe() shows a field's own string input)."""
    try:
        parsed = json.loads(value) if isinstance(value, str) else value
    except json.JSONDecodeError:
        parsed = None
    if isinstance(parsed, set | frozenset | tuple):
        parsed = list(parsed)
    if not isinstance(parsed, list) or not all(isinstance(x, str) for x in parsed):
        raise ValueError(
            f'{variable} must be a JSON list of "<channel>:<sender id>", e.g. ["telegram:42"]'
        )
    return frozenset(trust.parse_identity(x, variable) for x in parsed)


class _ChannelVariables(PydanticBaseSettingsSource):
    """The ``SB_<CHANNEL>_<SETTING>`` variables of the environment the settings read, as
    ``{"channel_security": {"SB_TELEGRAM_DM_POLICY": "open", ...}}``."""

    def __init__(self, settings_cls: type[BaseSettings], environ: dict[str, str | None]) -> None:
        super().__init__(settings_cls)
        self._environ = environ

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # not per field: see __call__

    def __call__(self) -> dict[str, Any]:
        found = {
            key.upper(): value
            for key, value in self._environ.items()
            if value is not None and _CHANNEL_VARIABLE.match(key.upper())
        }
        return {"channel_security": found} if found else {}


class RouterSettings(CommonSettings, RpcSettings):
    # The per-channel variables, for the launcher, which gives a service only what it reads.
    environment_patterns: ClassVar[tuple[str, ...]] = (_CHANNEL_VARIABLE.pattern,)
    default_agent: AgentId = "main"
    # The owner's identities on chat channels (docs/trust.md); SB_APPROVERS, the older name,
    # counts the same (see owner_identities).
    owners: Annotated[frozenset[str], NoDecode] = frozenset()
    # The older name of SB_OWNERS (same format), folded into it.
    approvers: Annotated[frozenset[str], NoDecode] = frozenset()
    # Per-channel queue modes, e.g. SB_CHANNEL_QUEUE_MODES='{"telegram": "collect"}'. A channel
    # without one follows the agent's SB_QUEUE_MODE; a session override beats both.
    channel_queue_modes: dict[str, QueueMode] = Field(default_factory=dict)
    # Inbound messages one router replica handles at once.
    concurrency: int = Field(default=64, ge=1, le=10_000)
    # Who may DM the agent on every chat channel: pairing (the allow list plus senders an operator
    # approved by code), allowlist or open.
    dm_policy: DmPolicy = DmPolicy.PAIRING
    # Which groups reach the agent on every channel: allowlist (the listed group ids), pairing or
    # open.
    group_policy: GroupPolicy = GroupPolicy.ALLOWLIST
    # In groups, run only messages that mention the bot (mention) or every one (always).
    group_activation: GroupActivation = GroupActivation.MENTION
    # The per-channel settings as one JSON map, e.g. {"telegram": {"dm_policy": "allowlist",
    # "allow_from": ["42"]}}; an SB_<CHANNEL>_* variable wins over its entry. A channel's
    # "accounts" give one account (a second bot or workspace) fields of its own, e.g.
    # {"telegram": {"accounts": {"family": {"allow_from": ["43"]}}}}.
    channel_security: dict[str, ChannelSecurity] = Field(default_factory=dict)
    # SB_BINDINGS: a JSON list of bindings, e.g. [{"channel": "slack", "group": "C123",
    # "agent": "team"}]; see Binding.
    bindings: tuple[Binding, ...] = ()
    # Per-sender rate limit on chat channels (0: none), and the burst a sender may send at once.
    rate_limit_per_minute: float = Field(default=30.0, ge=0)
    # Messages a sender may send at once before the per-minute rate applies.
    rate_limit_burst: int = Field(default=20, ge=1)
    # Messages of one sender in one chat that arrive within debounce_ms of each other become
    # one lane item (0: off), held at most debounce_max_ms from the first.
    debounce_ms: int = Field(default=0, ge=0, le=60_000)
    # The longest a burst of debounced messages is held from its first.
    debounce_max_ms: int = Field(default=5_000, ge=0, le=20_000)  # well inside the ack wait
    # gRPC RouterAdmin (pairing); loopback unless Compose or Kubernetes open it.
    router_grpc_host: str = "127.0.0.1"
    # Port of the router's gRPC (RouterAdmin).
    router_grpc_port: int = Field(default=50052, ge=0, le=65535)
    # A pairing code is valid this long; at most this many wait per channel (more: no code).
    pairing_ttl_s: float = Field(default=3600.0, gt=0)
    # Pairing requests waiting per channel at most (more: no code is sent).
    pairing_max_pending: int = Field(default=20, ge=1, le=10_000)

    @field_validator("dm_policy", mode="before")
    @classmethod
    def _dm_policy(cls, value: object) -> DmPolicy:
        return _choice(DmPolicy, "SB_DM_POLICY", value, echo=False)

    @field_validator("owners", mode="before")
    @classmethod
    def _owners(cls, value: object) -> frozenset[str]:
        return _identities("SB_OWNERS", value)

    @field_validator("approvers", mode="before")
    @classmethod
    def _approvers(cls, value: object) -> frozenset[str]:
        return _identities("SB_APPROVERS", value)

    @field_validator("group_policy", mode="before")
    @classmethod
    def _group_policy(cls, value: object) -> GroupPolicy:
        return _choice(GroupPolicy, "SB_GROUP_POLICY", value, echo=False)

    @field_validator("group_activation", mode="before")
    @classmethod
    def _group_activation(cls, value: object) -> GroupActivation:
        return _choice(GroupActivation, "SB_GROUP_ACTIVATION", value, echo=False)

    @field_validator("channel_security", mode="before")
    @classmethod
    def _channel_variables(cls, value: object) -> object:
        """Entries keyed ``SB_<CHANNEL>_<SETTING>`` (from the environment) are merged into the
        per-channel map (from ``SB_CHANNEL_SECURITY`` or given directly) and win over it."""
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                raise ValueError("SB_CHANNEL_SECURITY must be a JSON object") from None
        if not isinstance(value, dict):
            return value
        merged: dict[str, dict[str, Any]] = {}
        variables: list[tuple[str, str, str, object]] = []
        for key, entry in value.items():
            match = _CHANNEL_VARIABLE.match(str(key))
            if match:
                variables.append((str(key), match[1].lower(), match[2], entry))
            elif isinstance(entry, ChannelSecurity):
                merged[str(key)] = entry.model_dump(exclude_defaults=True)
            elif isinstance(entry, dict):
                merged[str(key)] = dict(entry)
            else:
                raise ValueError(f"SB_CHANNEL_SECURITY[{key!r}] must be an object")
        for variable, channel, setting, raw in variables:
            if (channel, setting) in _NOT_A_CHANNEL:
                raise ValueError(
                    f"{variable} is not a setting: a group sender allowlist is per channel,"
                    " SB_<CHANNEL>_GROUP_ALLOW_FROM (e.g. SB_TELEGRAM_GROUP_ALLOW_FROM)"
                )
            target = merged.setdefault(channel, {})
            if setting == "DM_POLICY":
                target["dm_policy"] = _choice(DmPolicy, variable, raw)
            elif setting == "GROUP_POLICY":
                target["group_policy"] = _choice(GroupPolicy, variable, raw)
            elif setting == "GROUP_ACTIVATION":
                target["group_activation"] = _choice(GroupActivation, variable, raw)
            else:  # ALLOW_FROM, GROUPS, GROUP_ALLOW_FROM: lists of ids
                target[setting.lower()] = _id_list(variable, raw)
        return merged

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources = super().settings_customise_sources(
            settings_cls, init_settings, env_settings, dotenv_settings, file_secret_settings
        )
        # The environment source actually used (os.environ, or the from_environ mapping).
        environ = next((s.env_vars for s in sources if isinstance(s, EnvSettingsSource)), {})
        return (*sources, _ChannelVariables(settings_cls, dict(environ)))

    def agent_for(self, channel: str, account: str, chat_type: str, chat_id: str) -> str:
        """The agent of the most specific matching binding, or the default agent."""
        found = [b for b in self.bindings if b.matches(channel, account, chat_type, chat_id)]
        if not found:
            return self.default_agent
        return max(found, key=lambda b: b.specificity).agent

    def channel(self, name: str, account: str = "") -> AccountSecurity:
        """The settings of ``name``'s messages, of ``account`` when given (its own entry under
        the channel's ``accounts`` replaces the fields it gives)."""
        found = self.channel_security.get(name) or ChannelSecurity()
        return found.for_account(account) if found.accounts else found

    def dm_policy_for(self, channel: str, account: str = "") -> DmPolicy:
        return self.channel(channel, account).dm_policy or self.dm_policy

    def group_policy_for(self, channel: str, account: str = "") -> GroupPolicy:
        return self.channel(channel, account).group_policy or self.group_policy

    def group_activation_for(self, channel: str, account: str = "") -> GroupActivation:
        return self.channel(channel, account).group_activation or self.group_activation

    def owner_identities(self) -> frozenset[str]:
        """``SB_OWNERS`` and ``SB_APPROVERS``: every ``<channel>:<sender id>`` that is an
        owner by configuration."""
        return self.owners | self.approvers
