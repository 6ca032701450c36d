"""The trust rules (``switchboard.trust``) against docs/trust.md: the standing a run gets from
its session's kind, the role of the message, whether it is the session's own person speaking,
the standing the session remembers and the one stamped on a lane item; and every capability
asked of the module (workspaces, visibility, approvals, session commands, owner identities)."""

from __future__ import annotations

import itertools

import pytest

from switchboard.trust import (
    AUTHENTICATED_CHANNELS,
    FIRST_PARTY_ROLES,
    Role,
    Standing,
    Visibility,
    can_see,
    channel_role,
    chat_role,
    identity,
    least,
    may_decide_approval,
    may_use_session_commands,
    parse_identity,
    parse_role,
    parse_standing,
    private_files,
    private_workspace,
    remembered,
    root_key,
    standing_of,
    visibility_for,
)

OWNER, PERSONAL, GROUP = Standing.OWNER, Standing.PERSONAL, Standing.GROUP
ROLES = [*(str(r) for r in Role), "", "admin"]  # every role, none, and one nobody stamps
STANDINGS = [*(str(s) for s in Standing), "", "root"]  # the same for stored/stamped values
OPERATOR_ROLES = {"owner", "hook", "cron"}

# One session of each kind of root (sessions.py): whose it is decides what a run there gets.
DM = "main:telegram:42"  # Alice's DM; she writes as telegram sender 42
GROUP_KEY = "main:telegram:group:-100"
HOOK = "hook:github"
CRON = "cron:daily"
CUSTOM = "my-notes"  # a key an API client chose
SUB = ":sub:"


def run_in(
    key: str,
    role: str,
    *,
    channel: str = "telegram",
    sender: str = "42",
    chat_id: str = "",
    chat_type: str = "direct",
    stamped: str = "",
    stored: str = "",
) -> Standing:
    return standing_of(
        key,
        role=role,
        channel=channel,
        sender=sender,
        chat_id=chat_id,
        chat_type=chat_type,
        stamped=stamped,
        stored=stored,
    )


# -- standing_of --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "chat_type"),
    [
        (GROUP_KEY, "group"),
        (GROUP_KEY, "direct"),  # the key alone makes it a group
        (GROUP_KEY + SUB + "s1", "direct"),  # a sub-agent of a group
        (DM, "group"),  # the chat type alone makes it a group
        (HOOK, "group"),
    ],
)
def test_a_group_is_always_group(key: str, chat_type: str) -> None:
    """Whoever speaks, whatever the session remembers or the item was stamped with: the
    transcript holds what everyone else wrote."""
    for role, stored, stamped in itertools.product(ROLES, STANDINGS, STANDINGS):
        got = run_in(key, role, chat_type=chat_type, stored=stored, stamped=stamped)
        assert got is GROUP, (key, chat_type, role, stored, stamped)


@pytest.mark.parametrize("key", [DM, DM + SUB + "s1", HOOK, CRON, CUSTOM, "main:webchat:s1"])
def test_a_stamped_item_runs_with_its_stamp(key: str) -> None:
    """A sub-agent's item carries its parent run's standing, a sessions_send item the lesser
    of the two: the stamp decides, not the role or the session's memory."""
    for role, stored in itertools.product(ROLES, STANDINGS):
        for stamp in Standing:
            assert run_in(key, role, stamped=str(stamp), stored=stored) is stamp
        # An unreadable stamp is ignored: as if there were none.
        assert run_in(key, role, stamped="root", stored=stored) is run_in(key, role, stored=stored)


def test_the_own_person_of_a_dm_gives_it_its_standing() -> None:
    """Alice writing in her own DM: owner if she is one, else personal, whatever the session
    remembered (she may have been made an owner, or stopped being one)."""
    for stored in STANDINGS:
        assert run_in(DM, "owner", stored=stored) is OWNER
        for role in ("user", "member", "hook", "cron", "subagent"):
            assert run_in(DM, role, stored=stored) is PERSONAL, (role, stored)
    # A platform without a sender id: the chat id names the person.
    assert run_in(DM, "user", sender="", chat_id="42", stored="owner") is PERSONAL
    assert run_in(DM, "owner", sender="", chat_id="42") is OWNER
    # With a sender id, it alone names the person: someone else in that chat is not Alice.
    assert run_in(DM, "owner", sender="7", chat_id="42", stored="personal") is PERSONAL
    # The same id on another channel is someone else (what the DM remembers stands).
    assert run_in(DM, "owner", channel="slack", stored="personal") is PERSONAL


def test_others_get_no_more_than_the_dm_remembers() -> None:
    """A job, the operator's API message or another session's message into a direct session:
    the standing its own person gave it, more or less than their role alone would give."""
    for role in ("owner", "hook", "cron", "subagent"):
        for stored in (OWNER, PERSONAL):
            got = run_in(DM, role, channel="api", sender="operator", stored=str(stored))
            assert got is stored, (role, stored)


def test_a_dm_nobody_owned_yet() -> None:
    """No standing remembered and not its person speaking: the operator's own messages
    (first-party channels, the agent's hooks main session) are the owner's; everything else
    counts as personal."""
    # The gateway's first-party sessions are direct keys of their own channel.
    assert run_in("main:hooks:main", "hook", channel="hooks", sender="hook:gh") is OWNER
    assert run_in("main:mcp:s1", "owner", channel="api", sender="mcp") is OWNER
    assert run_in("main:webchat:s1", "owner", channel="webchat", sender="s1") is OWNER
    for role in ("user", "member", "cron", "subagent", "", "admin"):
        assert run_in(DM, role, channel="cron", sender="cron:job") is PERSONAL, role
        assert run_in("main:webchat:s1", role, channel="webchat", sender="x") is PERSONAL


@pytest.mark.parametrize("key", [HOOK, CRON, CUSTOM, HOOK + SUB + "s1"])
def test_sessions_only_the_operator_makes(key: str) -> None:
    """``hook:``, ``cron:`` and custom keys: owner for the operator's roles (owner, hook,
    cron), personal for anyone else; a DM's memory has no say there."""
    for role, stored in itertools.product(ROLES, STANDINGS):
        want = OWNER if role in OPERATOR_ROLES else PERSONAL
        got = run_in(key, role, channel="hooks", sender="hook:x", stored=stored)
        assert got is want, (key, role, stored)


def test_a_sub_agent_session_is_judged_by_its_root() -> None:
    sub = DM + SUB + "a" + SUB + "b"
    # Not stamped: what the root DM remembers, never the owner's by default.
    assert run_in(sub, "subagent", channel="agent", sender="", stored="owner") is OWNER
    assert run_in(sub, "subagent", channel="agent", sender="", stored="personal") is PERSONAL
    assert run_in(sub, "subagent", channel="agent", sender="") is PERSONAL


@pytest.mark.parametrize("key", ["", "has space", "x" * 300, "tab\there"])
def test_an_unreadable_session_key_is_personal(key: str) -> None:
    for role, stored in itertools.product(ROLES, STANDINGS):
        assert run_in(key, role, stored=stored, stamped=stored) is PERSONAL


def test_least() -> None:
    order = [GROUP, PERSONAL, OWNER]
    for a, b in itertools.product(order, order):
        want = order[min(order.index(a), order.index(b))]
        assert least(a, b) is want and least(b, a) is want, (a, b)


# -- remembered ---------------------------------------------------------------------------


def test_remembered() -> None:
    """Only a DM's own person gives it a standing to remember."""
    assert remembered(DM, "owner", "telegram", "42", "") == "owner"
    assert remembered(DM, "user", "telegram", "42", "") == "personal"
    assert remembered(DM, "user", "telegram", "", "42") == "personal"
    assert remembered(DM, "member", "telegram", "42", "") == "personal"
    # Not its own person: the operator's API, a job, another sender, another channel.
    assert remembered(DM, "owner", "api", "operator", "") == ""
    assert remembered(DM, "cron", "cron", "cron:job", "") == ""
    assert remembered(DM, "owner", "telegram", "7", "") == ""
    assert remembered(DM, "owner", "slack", "42", "") == ""
    # Unstamped: nothing to remember.
    for role in ("", "admin"):
        assert remembered(DM, role, "telegram", "42", "") == ""
    # Not a direct root: a sub-agent of it, a group, the operator's keys, nonsense.
    for key in (DM + SUB + "s1", GROUP_KEY, HOOK, CRON, CUSTOM, "", "a b"):
        assert remembered(key, "owner", "telegram", "42", "-100") == "", key


# -- workspaces and private files -----------------------------------------------------------


def test_private_workspace() -> None:
    """The owner's runs use the agent's workspace (""); anyone else's the root
    conversation's own, shared with its sub-agents."""
    for key in (DM, DM + SUB + "a", GROUP_KEY, HOOK):
        assert private_workspace(key, OWNER) == ""
    for standing in (PERSONAL, GROUP):
        assert private_workspace(DM, standing) == DM
        assert private_workspace(DM + SUB + "a" + SUB + "b", standing) == DM
        assert private_workspace(GROUP_KEY + SUB + "a", standing) == GROUP_KEY
        assert private_workspace(CUSTOM, standing) == CUSTOM


def test_private_files_are_the_owners() -> None:
    assert private_files(OWNER) is True
    assert private_files(PERSONAL) is False
    assert private_files(GROUP) is False


# -- visibility ---------------------------------------------------------------------------


@pytest.mark.parametrize("configured", list(Visibility))
def test_visibility_for(configured: Visibility) -> None:
    assert visibility_for(configured, OWNER) is configured
    wide = configured in (Visibility.AGENT, Visibility.ALL)
    for standing in (PERSONAL, GROUP):
        assert visibility_for(configured, standing) is (Visibility.TREE if wide else configured)


def test_the_visibility_names_are_the_settings_values() -> None:
    assert [str(v) for v in Visibility] == ["self", "tree", "agent", "all"]


CALLER = "main:telegram:42:sub:a"  # a sub-agent of Alice's DM
TARGETS = {
    "itself": (CALLER, "main"),
    "its root": (DM, "main"),
    "a sibling": (DM + SUB + "b", "main"),
    "its child": (CALLER + SUB + "c", "main"),
    "another DM": ("main:telegram:7", "main"),
    "a DM sharing a prefix": ("main:telegram:421", "main"),
    "a group": (GROUP_KEY, "main"),
    "the same key of another agent": (CALLER, "other"),
    "another agent's session": ("other:telegram:7", "other"),
}
SEES = {
    Visibility.SELF: {"itself"},
    Visibility.TREE: {"itself", "its root", "a sibling", "its child"},
    Visibility.AGENT: {k for k, (_, agent) in TARGETS.items() if agent == "main"},
    Visibility.ALL: set(TARGETS),
}


@pytest.mark.parametrize("visibility", list(Visibility))
def test_can_see(visibility: Visibility) -> None:
    seen = {
        name
        for name, (key, agent) in TARGETS.items()
        if can_see(visibility, CALLER, "main", key, agent)
    }
    assert seen == SEES[visibility]


def test_root_key() -> None:
    assert root_key(DM) == DM
    assert root_key(DM + SUB + "a" + SUB + "b") == DM


# -- approvals and session commands ---------------------------------------------------------


def test_an_owner_decides_any_approval() -> None:
    for decider in (DM, GROUP_KEY, "", "a b"):
        for approval in (DM, DM + SUB + "a", "main:telegram:7", GROUP_KEY, HOOK):
            assert may_decide_approval("owner", decider, approval), (decider, approval)


def test_a_user_decides_the_approvals_of_their_own_dm() -> None:
    assert may_decide_approval("user", DM, DM)
    assert may_decide_approval("user", DM, DM + SUB + "a")
    assert may_decide_approval("user", DM, DM + SUB + "a" + SUB + "b")
    for approval in ("main:telegram:7", "main:telegram:421", GROUP_KEY, HOOK, "main:slack:42"):
        assert not may_decide_approval("user", DM, approval), approval
    # Their messages route to a group (or to nothing, or to nonsense): they decide nothing.
    for decider in (GROUP_KEY, HOOK, CRON, CUSTOM, "", "a b"):
        assert not may_decide_approval("user", decider, decider), decider


@pytest.mark.parametrize("role", ["member", "hook", "cron", "subagent", "", "admin"])
def test_nobody_else_decides_approvals(role: str) -> None:
    for decider in (DM, GROUP_KEY):
        for approval in (decider, decider + SUB + "a", "main:telegram:7"):
            assert not may_decide_approval(role, decider, approval), (decider, approval)


def test_session_commands() -> None:
    for key in (DM, GROUP_KEY, DM + SUB + "a", HOOK, CUSTOM, "a b"):
        assert may_use_session_commands("owner", key), key
    assert may_use_session_commands("user", DM)
    for key in (GROUP_KEY, DM + SUB + "a", HOOK, CRON, CUSTOM, "", "a b"):
        assert not may_use_session_commands("user", key), key
    for role in ("member", "hook", "cron", "subagent", "", "admin"):
        for key in (DM, GROUP_KEY):
            assert not may_use_session_commands(role, key), (role, key)


# -- roles and identities -------------------------------------------------------------------


def test_roles_and_standings_parse() -> None:
    for role in Role:
        assert parse_role(str(role)) is role
    for standing in Standing:
        assert parse_standing(str(standing)) is standing
    for bad in ("", "Owner", "admin", " owner"):
        assert parse_role(bad) is None and parse_standing(bad) is None
    assert [str(r) for r in Role] == ["owner", "user", "member", "hook", "cron", "subagent"]
    assert [str(s) for s in Standing] == ["owner", "personal", "group"]


def test_first_party_channels() -> None:
    """The gateway's channels (their callers hold its token) are the owner's; hooks and jobs
    have roles of their own; a chat channel has none (the router asks the policies)."""
    assert FIRST_PARTY_ROLES == {
        "api": Role.OWNER,  # the sessions API and MCP
        "openai": Role.OWNER,
        "webchat": Role.OWNER,
        "a2a": Role.OWNER,
        "hooks": Role.HOOK,
        "cron": Role.CRON,
    }
    assert set(FIRST_PARTY_ROLES) == AUTHENTICATED_CHANNELS
    for channel, role in FIRST_PARTY_ROLES.items():
        assert channel_role(channel) is role
    for channel in ("telegram", "slack", "discord", "whatsapp", "", "API"):
        assert channel_role(channel) is None


def test_chat_role() -> None:
    assert chat_role(owner=True, group=False) is Role.OWNER
    assert chat_role(owner=True, group=True) is Role.OWNER
    assert chat_role(owner=False, group=False) is Role.USER
    assert chat_role(owner=False, group=True) is Role.MEMBER


def test_identity() -> None:
    assert identity("telegram", "42") == "telegram:42"
    for entry in ("telegram:42", "slack:U0123", "matrix:@a:example.org"):
        assert parse_identity(entry) == entry


@pytest.mark.parametrize(
    "entry",
    ["", "telegram", "telegram:", ":42", ":", " telegram:42", "telegram:42 ", "telegram: 42",
     "tele gram:42", "telegram:4\t2", "telegram:42\n"],
)  # fmt: skip
def test_parse_identity_refuses(entry: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_identity(entry)
    assert str(caught.value) == (
        f'SB_OWNERS: {entry!r} is not "<channel>:<sender id>" (e.g. "telegram:42")'
    )
    with pytest.raises(ValueError, match=r"^SB_APPROVERS: "):
        parse_identity(entry, "SB_APPROVERS")


def test_a_named_accounts_dm_is_its_own() -> None:
    """On a channel with several bots, the DM with 42 through the bot ``family`` is its own
    session (``telegram@family``): 42 writing through it is its person; 42 through the default
    bot is not (what that session remembers stands)."""
    family = "main:telegram@family:42"
    assert (
        standing_of(
            family,
            role="owner",
            channel="telegram",
            sender="42",
            chat_id="42",
            chat_type="direct",
            account="family",
            stored="personal",
        )
        is OWNER
    )
    assert (
        standing_of(
            family,
            role="owner",
            channel="telegram",
            sender="42",
            chat_id="42",
            chat_type="direct",
            stored="personal",
        )
        is PERSONAL
    )
    assert remembered(family, "owner", "telegram", "42", "", "family") == "owner"
    assert remembered(family, "owner", "telegram", "42", "", "default") == ""
    assert remembered(DM, "owner", "telegram", "42", "", "default") == "owner"
    assert remembered(DM, "owner", "telegram", "42", "", "family") == ""
