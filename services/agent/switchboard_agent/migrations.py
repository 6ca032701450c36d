"""The agent schema: sessions (with the lane cursor), runs and the transcript."""

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
]
