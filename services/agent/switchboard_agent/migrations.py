"""The agent schema: sessions (with the lane cursor), runs, the transcript, tool calls that
needed approval and the checkpoints of runs waiting for one.

A session's transcript is its messages of the session's current ``epoch``: a reset (or a
delete) moves the epoch on and removes the older messages; the lane cursor stays."""

from switchboard.store import Migration

SCHEMA = "agent"

MIGRATIONS = [
    Migration(
        1,
        "sessions, runs, messages",
        """
        CREATE TABLE agent.sessions (
            session_key text PRIMARY KEY,
            agent text NOT NULL,
            lane_cursor bigint NOT NULL DEFAULT 0,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE TABLE agent.runs (
            run_id text PRIMARY KEY,
            session_key text NOT NULL REFERENCES agent.sessions ON DELETE CASCADE,
            inbound_id text NOT NULL,
            lane_seq bigint NOT NULL,
            status text NOT NULL,
            stop_reason text NOT NULL DEFAULT '',
            model text NOT NULL DEFAULT '',
            input_tokens bigint NOT NULL DEFAULT 0,
            output_tokens bigint NOT NULL DEFAULT 0,
            iterations integer NOT NULL DEFAULT 0,
            error text NOT NULL DEFAULT '',
            started_at timestamptz NOT NULL,
            finished_at timestamptz NOT NULL DEFAULT now(),
            UNIQUE (session_key, inbound_id)
        );
        CREATE TABLE agent.messages (
            id bigserial PRIMARY KEY,
            session_key text NOT NULL REFERENCES agent.sessions ON DELETE CASCADE,
            run_id text NOT NULL,
            role text NOT NULL,
            content jsonb NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX messages_by_session ON agent.messages (session_key, id);
        """,
    ),
    Migration(
        2,
        "per-session queue mode",
        "ALTER TABLE agent.sessions ADD COLUMN queue_mode text NOT NULL DEFAULT ''",
    ),
    Migration(
        3,
        "tool calls, run checkpoints, per-session tool policy",
        """
        ALTER TABLE agent.sessions ADD COLUMN tool_policy jsonb;
        CREATE TABLE agent.tool_calls (
            approval_id text PRIMARY KEY,
            run_id text NOT NULL,
            session_key text NOT NULL,
            agent text NOT NULL,
            call_id text NOT NULL,
            tool text NOT NULL,
            args jsonb NOT NULL,
            rule text NOT NULL,
            status text NOT NULL,
            decided_by text NOT NULL DEFAULT '',
            reason text NOT NULL DEFAULT '',
            requested_at timestamptz NOT NULL DEFAULT now(),
            decided_at timestamptz,
            started_at timestamptz,
            finished_at timestamptz,
            UNIQUE (run_id, call_id)
        );
        CREATE INDEX tool_calls_by_session ON agent.tool_calls (session_key, requested_at);
        CREATE INDEX tool_calls_waiting ON agent.tool_calls (status)
            WHERE status = 'awaiting_approval';
        CREATE TABLE agent.run_checkpoints (
            session_key text NOT NULL,
            inbound_id text NOT NULL,
            run_id text NOT NULL,
            state jsonb NOT NULL,
            saved_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (session_key, inbound_id)
        );
        """,
    ),
    Migration(
        4,
        "transcript epochs (Sessions.Reset/Delete), per-session model",
        """
        ALTER TABLE agent.sessions ADD COLUMN epoch integer NOT NULL DEFAULT 0;
        ALTER TABLE agent.sessions ADD COLUMN model text NOT NULL DEFAULT '';
        ALTER TABLE agent.sessions ADD COLUMN reset_at timestamptz;
        ALTER TABLE agent.sessions ADD COLUMN deleted_at timestamptz;
        ALTER TABLE agent.messages ADD COLUMN epoch integer NOT NULL DEFAULT 0;
        """,
    ),
    # Usage per model call (usage/store.py): budgets sum it per session and per agent and UTC day,
    # so a call counts on every replica as soon as it returns. No foreign key: deleting a session
    # does not give its agent's day budget back.
    Migration(
        5,
        "usage per model call",
        """
        CREATE TABLE agent.usage (
            id bigserial PRIMARY KEY,
            run_id text NOT NULL,
            session_key text NOT NULL,
            agent text NOT NULL,
            model text NOT NULL,
            input_tokens bigint NOT NULL,
            output_tokens bigint NOT NULL,
            cost_usd double precision NOT NULL DEFAULT 0,
            at timestamptz NOT NULL DEFAULT now(),
            day date NOT NULL DEFAULT (now() AT TIME ZONE 'UTC')::date
        );
        CREATE INDEX usage_by_session ON agent.usage (session_key);
        CREATE INDEX usage_by_agent_day ON agent.usage (agent, day);
        CREATE INDEX usage_by_run ON agent.usage (run_id);
        """,
    ),
    # Sub-agents (subagents/store.py): the children a run spawned, their mode and whether they
    # finished; the origin is the parent run's lane item (where a background result goes).
    # Usage gets the root session of its session key, so a budget counts a conversation's
    # sub-agents with it (usage/store.py).
    Migration(
        6,
        "sub-agents, usage by root session",
        """
        CREATE TABLE agent.subagents (
            child_key text PRIMARY KEY,
            parent_key text NOT NULL,
            agent text NOT NULL,
            parent_run_id text NOT NULL,
            message_id text NOT NULL,
            label text NOT NULL DEFAULT '',
            task text NOT NULL,
            mode text NOT NULL,
            status text NOT NULL DEFAULT 'running',
            origin bytea NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            finished_at timestamptz
        );
        CREATE INDEX subagents_by_parent ON agent.subagents (parent_key, created_at);
        CREATE INDEX subagents_by_run ON agent.subagents (parent_run_id);
        ALTER TABLE agent.usage ADD COLUMN root_key text
            GENERATED ALWAYS AS (split_part(session_key, ':sub:', 1)) STORED;
        CREATE INDEX usage_by_root ON agent.usage (root_key);
        """,
    ),
    # Compactions (compaction/compactor.py): a summary of the transcript's messages up to
    # through_id, which the history loader returns in their place (store.transcript_at); the
    # messages stay. A reset or delete removes the messages, and with them (the foreign key) their
    # summary.
    Migration(
        7,
        "transcript compactions",
        """
        CREATE TABLE agent.compactions (
            id bigserial PRIMARY KEY,
            session_key text NOT NULL,
            epoch integer NOT NULL,
            through_id bigint NOT NULL REFERENCES agent.messages (id) ON DELETE CASCADE,
            summary text NOT NULL,
            reason text NOT NULL,
            messages integer NOT NULL,
            tokens_before bigint NOT NULL,
            tokens_after bigint NOT NULL,
            facts_flushed integer NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX compactions_by_session ON agent.compactions (session_key, epoch, through_id);
        CREATE INDEX compactions_by_message ON agent.compactions (through_id);
        """,
    ),
    # A direct session remembers the standing its own person gave it (docs/trust.md,
    # sessions/standing.py): a job, the operator's message or another session's message into it gets
    # no more than that. '' : not known yet.
    Migration(
        8,
        "the standing a session's own person gave it",
        "ALTER TABLE agent.sessions ADD COLUMN standing text NOT NULL DEFAULT ''",
    ),
]
