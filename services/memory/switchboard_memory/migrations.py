"""The memory schema: the embedding cache, and the text of memory files and ingested documents
(what ``Get`` reads; Qdrant holds their chunks)."""

from switchboard.store import Migration

SCHEMA = "memory"

MIGRATIONS = [
    Migration(
        1,
        "embedding cache, documents",
        """
        CREATE TABLE memory.embedding_cache (
            provider text NOT NULL,
            model text NOT NULL,
            digest text NOT NULL,
            vector bytea NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (provider, model, digest)
        );
        CREATE TABLE memory.documents (
            agent text NOT NULL,
            scope_user text NOT NULL,
            path text NOT NULL,
            source text NOT NULL,
            digest text NOT NULL,
            body text NOT NULL,
            chunks integer NOT NULL,
            updated_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (agent, scope_user, path)
        );
        """,
    ),
]
