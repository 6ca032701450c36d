"""The scheduler schema: one row per job, its schedule, action and last/next run. Replicas
claim due rows with ``SELECT ... FOR UPDATE SKIP LOCKED`` (the partial index keeps that scan
to the enabled jobs)."""

from switchboard.store import Migration

SCHEMA = "scheduler"

MIGRATIONS = [
    Migration(
        1,
        "jobs",
        """
        CREATE TABLE scheduler.jobs (
            name text PRIMARY KEY,
            kind text NOT NULL,
            agent text NOT NULL,
            session_key text NOT NULL DEFAULT '',
            message text NOT NULL DEFAULT '',
            cron text NOT NULL DEFAULT '',
            timezone text NOT NULL DEFAULT '',
            every_ms bigint NOT NULL DEFAULT 0,
            at timestamptz,
            url text NOT NULL DEFAULT '',
            path text NOT NULL DEFAULT '',
            body_json text NOT NULL DEFAULT '',
            deliver_to bytea NOT NULL DEFAULT '',
            enabled boolean NOT NULL DEFAULT true,
            missed text NOT NULL DEFAULT 'skip',
            urgent boolean NOT NULL DEFAULT false,
            next_run timestamptz,
            last_run timestamptz,
            last_result text NOT NULL DEFAULT '',
            last_error text NOT NULL DEFAULT '',
            runs bigint NOT NULL DEFAULT 0,
            content_sha256 text NOT NULL DEFAULT '',
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX jobs_due ON scheduler.jobs (next_run) WHERE enabled;
        CREATE INDEX jobs_agent ON scheduler.jobs (agent, session_key);
        """,
    ),
]
