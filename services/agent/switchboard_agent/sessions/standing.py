"""A run's standing on the agent's side (docs/trust.md): what :mod:`switchboard.trust` says
about a lane item, and the one write it costs when a direct session's own person gives it a
new standing. Every rule is ``trust``'s; this module only feeds it the item's fields.

- :func:`run_standing`: the standing of the run a lane item starts (its stamp, its role, its
  session, the standing the session remembers);
- :func:`settle`: the standing of a run answering a batch of items (the least of theirs: an
  item never lends a run more than it has), storing what the session should remember from the
  batch's own message (``agent.sessions.standing``) only when it changed: the steady state
  costs no round trip;
- :func:`session_standing`: the standing a session gives what does not come from its own
  person (a ``sessions_send`` target, a manual compaction): what a job firing into it gets.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from switchboard import trust
from switchboard.trust import Role, Standing
from switchboard.v1 import messages_pb2

from .store import SessionStore

log = logging.getLogger(__name__)

# The role of the items the agent appends itself (a sub-agent's task, an announcement into
# the parent keeps its origin's, a message sessions_send puts into another session).
SUBAGENT_ROLE = str(Role.SUBAGENT)


def run_standing(item: messages_pb2.LaneItem, stored: str = "") -> Standing:
    """The standing of a run ``item`` starts; ``stored``: what its session remembers."""
    m = item.message
    return trust.standing_of(
        item.session_key,
        role=m.role,
        channel=m.channel,
        sender=m.sender,
        chat_id=m.chat.id,
        chat_type=m.chat.type,
        stamped=item.standing,
        stored=stored,
        account=m.account,
    )


def to_remember(item: messages_pb2.LaneItem, stored: str) -> str:
    """What the session should remember from ``item`` when that differs from ``stored``
    ("" : nothing new: not its own person speaking, or the same standing)."""
    m = item.message
    value = trust.remembered(item.session_key, m.role, m.channel, m.sender, m.chat.id, m.account)
    return value if value and value != stored else ""


async def settle(
    store: SessionStore, items: Sequence[messages_pb2.LaneItem], stored: str
) -> Standing:
    """The standing of a run answering ``items`` (lane order; the last is the run's own
    message); what the session remembers is stored first when the last one changed it."""
    item = items[-1]
    new = to_remember(item, stored)
    if new:
        await store.remember_standing(item.session_key, item.agent, new)
        log.info(
            "the session's standing is now %s",
            new,
            extra={"session": item.session_key, "was": stored or "unknown"},
        )
        stored = new
    standing = run_standing(item, stored)
    for earlier in items[:-1]:  # collected with it (collect, steer, interrupt)
        standing = trust.least(standing, run_standing(earlier, stored))
    return standing


def session_standing(session_key: str, stored: str) -> Standing:
    """The standing ``session_key`` gives anything that is not its own person speaking, as a
    job firing into it gets: a group's is ``group``; a direct session's what it remembers
    (unknown: ``personal``); ``hook:``, ``cron:`` and custom sessions (only the operator's API,
    hooks and jobs make them) ``owner``. ``stored``: the remembered standing of its root."""
    return trust.standing_of(
        session_key, role=Role.CRON, channel="", sender="", chat_id="", chat_type="", stored=stored
    )
