"""Media metrics."""

from prometheus_client import Counter, Histogram

INGESTED = Counter(
    "sb_media_ingested_total", "Files ingested, by how and outcome", ["source", "outcome"]
)
INGEST_BYTES = Counter("sb_media_ingest_bytes_total", "Bytes of files stored")
TRANSFORM_SECONDS = Histogram(
    "sb_media_transform_seconds",
    "Time of one image transform (decode, resize, encode)",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5),
)
TRANSCRIPTIONS = Counter("sb_media_transcriptions_total", "Transcriptions by outcome", ["outcome"])
EXPIRED = Counter("sb_media_expired_total", "Files deleted by the cleanup loop")
