"""The media schema: one row per stored file (its sniffed type, size, dimensions, expiry);
the bytes are a file named by the sha256 in the media directory."""

from switchboard.store import Migration

SCHEMA = "media"

MIGRATIONS = [
    Migration(
        1,
        "files",
        """
        CREATE TABLE media.files (
            sha256 text PRIMARY KEY,
            mime text NOT NULL,
            size bigint NOT NULL,
            width integer NOT NULL DEFAULT 0,
            height integer NOT NULL DEFAULT 0,
            created_at timestamptz NOT NULL DEFAULT now(),
            expires_at timestamptz NOT NULL
        );
        CREATE INDEX files_expires_at ON media.files (expires_at);
        """,
    ),
]
