"""Who may do what (docs/trust.md): the roles of the people and systems that reach the
assistant, the standing a session's runs get from them, and the rules every service applies.
This module is the one place those rules are written; the router stamps roles with
:func:`chat_role`/:func:`channel_role`, the agent derives a run's standing with
:func:`standing_of` and asks the functions below, never the message text.

Roles (``InboundMessage.role``, stamped by the router from the platform-verified sender):

- ``owner``: the operator. A sender listed in ``SB_OWNERS`` (or ``SB_APPROVERS``) or approved
  with ``switchboard pairing approve --owner``; and the gateway's first-party channels (API,
  OpenAI API, WebChat, MCP, A2A), whose callers hold the gateway token.
- ``user``: a person the DM policy admitted to a direct conversation (paired, allow-listed, or
  anyone under ``open``) who is not an owner.
- ``member``: someone who is not an owner, speaking in a group chat the group policy admitted.
- ``hook``: a call to ``/hooks/*`` (its token is the operator's, its payload is not).
- ``cron``: a job the scheduler fired.
- ``subagent``: an item the agent appended itself (a sub-agent's task or result, a message
  ``sessions_send`` put into another session).

Standings (what a run may touch), from the session and the role:

- ``owner``: the owner's own sessions (their DMs, API and WebChat sessions, hooks and jobs the
  operator configured): the agent's workspace, every bootstrap file, the agent's memory.
- ``personal``: a direct conversation with a ``user``: a workspace of its own, no ``USER.md``
  or ``MEMORY.md``, a memory of its own.
- ``group``: a group chat, whoever speaks in it: like ``personal``, plus the group tool profile
  (``SB_GROUP_TOOL_PROFILE``).

A sub-agent runs with its parent run's standing; a run never gets more than its session's.
"""

from __future__ import annotations

from enum import StrEnum

from .errors import InvalidSessionKey
from .sessions import SUBAGENT_MARKER, SessionKey, parse_session_key, session_channel


class Role(StrEnum):
    OWNER = "owner"
    USER = "user"
    MEMBER = "member"
    HOOK = "hook"
    CRON = "cron"
    SUBAGENT = "subagent"


class Standing(StrEnum):
    OWNER = "owner"
    PERSONAL = "personal"
    GROUP = "group"


class Visibility(StrEnum):
    """Which sessions the session tools (and a per-user API credential) may see and reach."""

    SELF = "self"  # the caller's own session only
    TREE = "tree"  # the caller's session tree: its root conversation and every sub-agent below
    AGENT = "agent"  # every session of the caller's agent (owner sessions only)
    ALL = "all"  # every session of every agent (owner sessions only)


# The gateway authenticates these channels itself (its token, a hooks token); the scheduler
# publishes "cron". Only the gateway's and the scheduler's NATS users may publish inbound
# subjects (switchboard.natsauth), so the channel name itself is trustworthy.
FIRST_PARTY_ROLES: dict[str, Role] = {
    "api": Role.OWNER,
    "openai": Role.OWNER,
    "webchat": Role.OWNER,
    "a2a": Role.OWNER,
    "hooks": Role.HOOK,
    "cron": Role.CRON,
}
AUTHENTICATED_CHANNELS = frozenset(FIRST_PARTY_ROLES)

# The group tool profile's default (SB_GROUP_TOOL_PROFILE): talk, look things up, read the
# group's own files and memory; no file writes, no commands, no session tools, no jobs.
GROUP_PROFILE = "group"


def identity(channel: str, sender: str) -> str:
    """How an owner is named in configuration: ``<channel>:<sender id>``."""
    return f"{channel}:{sender}"


def parse_identity(entry: str, setting: str = "SB_OWNERS") -> str:
    """``entry`` if it is ``<channel>:<sender id>``, else a ValueError naming ``setting``."""
    channel, _, sender = entry.partition(":")
    if not channel or not sender or entry != entry.strip() or any(c.isspace() for c in entry):
        raise ValueError(
            f'{setting}: {entry!r} is not "<channel>:<sender id>" (e.g. "telegram:42")'
        )
    return entry


def parse_role(value: str) -> Role | None:
    """The role a stamp names; None for an empty or unknown stamp (treated as the least)."""
    try:
        return Role(value)
    except ValueError:
        return None


def parse_standing(value: str) -> Standing | None:
    try:
        return Standing(value)
    except ValueError:
        return None


def channel_role(channel: str) -> Role | None:
    """The role of a first-party channel's messages; None for a chat channel."""
    return FIRST_PARTY_ROLES.get(channel)


def chat_role(owner: bool, group: bool) -> Role:
    """The role of an admitted chat sender: an owner anywhere, else a user in a DM and a member
    in a group."""
    if owner:
        return Role.OWNER
    return Role.MEMBER if group else Role.USER


def _root(session_key: str) -> SessionKey:
    return parse_session_key(session_key).root


def own_message(
    root: SessionKey, channel: str, sender: str, chat_id: str, account: str = ""
) -> bool:
    """Is this the direct conversation's own person speaking (the router routed their message,
    on ``channel``'s ``account``, to their own session)?"""
    return (
        root.kind == "direct"
        and root.channel == session_channel(channel, account)
        and root.peer == (sender or chat_id)
    )


def standing_of(
    session_key: str,
    *,
    role: str,
    channel: str,
    sender: str,
    chat_id: str,
    chat_type: str,
    stamped: str = "",
    stored: str = "",
    account: str = "",
) -> Standing:
    """The standing of a run in ``session_key`` started by a message of ``role``.

    ``stamped``: the lane item's own standing, set by the agent on the items it appends itself
    (a sub-agent inherits its parent run's; ``sessions_send`` gives the lesser of the sending
    run's and the target session's). ``stored``: the standing the session's own person last
    gave it (a direct session remembers whether it is the owner's, so a job or the operator's
    message into it gets no more than its person would). A group is always ``group``; anything
    unknown counts as the least."""
    try:
        root = _root(session_key)
    except InvalidSessionKey:
        return Standing.PERSONAL
    if root.kind == "group" or chat_type == "group":
        return Standing.GROUP
    inherited = parse_standing(stamped)
    if inherited is not None:
        return inherited
    given = parse_role(role)
    if root.kind == "direct":
        if own_message(root, channel, sender, chat_id, account) and given is not None:
            return Standing.OWNER if given is Role.OWNER else Standing.PERSONAL
        known = parse_standing(stored)
        if known is not None:
            return known
        return Standing.OWNER if given in (Role.OWNER, Role.HOOK) else Standing.PERSONAL
    # hook:, cron: and custom keys: only the operator's API, hooks and jobs make them
    return Standing.OWNER if given in (Role.OWNER, Role.HOOK, Role.CRON) else Standing.PERSONAL


_ORDER = {Standing.GROUP: 0, Standing.PERSONAL: 1, Standing.OWNER: 2}


def least(a: Standing, b: Standing) -> Standing:
    """The lesser of two standings (a group's is the least)."""
    return a if _ORDER[a] <= _ORDER[b] else b


def remembered(
    session_key: str, role: str, channel: str, sender: str, chat_id: str, account: str = ""
) -> str:
    """The standing a direct session should remember from this message ("" : nothing to
    remember: not its own person speaking)."""
    try:
        root = _root(session_key)
    except InvalidSessionKey:
        return ""
    given = parse_role(role)
    if given is None or root.key != session_key:
        return ""
    if not own_message(root, channel, sender, chat_id, account):
        return ""
    return str(Standing.OWNER if given is Role.OWNER else Standing.PERSONAL)


def private_workspace(session_key: str, standing: Standing) -> str:
    """The session whose private workspace a run's tools use ("" : the agent's, as
    ``SB_WORKSPACE_SCOPE`` says): a session that is not the owner's works in its root
    conversation's own workspace, shared with its sub-agents, never the agent's."""
    if standing is Standing.OWNER:
        return ""
    return session_key.split(SUBAGENT_MARKER, 1)[0]


def private_files(standing: Standing) -> bool:
    """May a run read the owner's private bootstrap files (``USER.md``, ``MEMORY.md``) and the
    agent's own memory (where ``MEMORY.md`` is indexed)?"""
    return standing is Standing.OWNER


def visibility_for(configured: Visibility, standing: Standing) -> Visibility:
    """``agent`` and ``all`` are for the owner's sessions; anyone else sees their tree at most."""
    if standing is not Standing.OWNER and configured in (Visibility.AGENT, Visibility.ALL):
        return Visibility.TREE
    return configured


def root_key(session_key: str) -> str:
    return session_key.split(SUBAGENT_MARKER, 1)[0]


def can_see(
    visibility: Visibility,
    caller_key: str,
    caller_agent: str,
    target_key: str,
    target_agent: str,
) -> bool:
    """May a run of ``caller_key`` (of ``caller_agent``) see or reach ``target_key``?"""
    if visibility is Visibility.ALL:
        return True
    if target_agent != caller_agent:
        return False
    if visibility is Visibility.AGENT:
        return True
    if visibility is Visibility.TREE:
        return root_key(target_key) == root_key(caller_key)
    return target_key == caller_key


def may_decide_approval(role: str, decider_session: str, approval_session: str) -> bool:
    """May a chat sender of ``role``, whose messages in that chat route to
    ``decider_session``, decide an approval of ``approval_session``? An owner may decide any;
    the person of a direct conversation the approvals of their own conversation (and its
    sub-agents); nobody else, in a group least of all."""
    given = parse_role(role)
    if given is Role.OWNER:
        return True
    if given is not Role.USER or not decider_session:
        return False
    try:
        if _root(decider_session).kind != "direct":
            return False
    except InvalidSessionKey:
        return False
    return approval_session == decider_session or approval_session.startswith(
        decider_session + SUBAGENT_MARKER
    )


def may_use_session_commands(role: str, session_key: str) -> bool:
    """``/new``, ``/stop``, ``/model``...: an owner anywhere; in a direct conversation its
    person; in a group nobody else."""
    given = parse_role(role)
    if given is Role.OWNER:
        return True
    try:
        kind = parse_session_key(session_key).kind
    except InvalidSessionKey:
        return False
    return given is Role.USER and kind == "direct"
