"""Sub-agent settings (``sessions_spawn``, :mod:`.children`): how deep children may nest, how
many one run may start, how many of one fan-out run at once, and how long ``wait`` waits."""

from __future__ import annotations

from pydantic import Field

from switchboard.settings import Settings


class SubagentSettings(Settings):
    # A session at depth d (d = the ":sub:" in its key) may spawn only while d < this: 1 lets
    # the conversations spawn children and the children nothing (and the sub-agent tool policy
    # denies them sessions_spawn by default anyway).
    subagent_max_depth: int = Field(default=1, ge=0, le=5)
    # Children one run may start in all (every sessions_spawn call of the run together).
    subagent_max_children: int = Field(default=8, ge=1, le=100)
    # Children of one "wait" fan-out that run at the same time; the others wait their turn.
    subagent_concurrency: int = Field(default=4, ge=1, le=100)
    # How long "wait" waits for the children's replies; a child still running then is
    # announced into the parent session when it finishes, as a background child is.
    subagent_timeout_s: float = Field(default=300.0, gt=0, le=3600)
