"""Memory metrics."""

from prometheus_client import Counter, Gauge, Histogram

EMBEDDED = Counter(
    "sb_memory_embeddings_total",
    "Texts embedded, computed or served by the cache",
    ["provider", "how"],
)
EMBED_SECONDS = Histogram(
    "sb_memory_embed_seconds", "Time of one batch sent to the embedding provider", ["provider"]
)
SEARCHES = Counter("sb_memory_searches_total", "Searches by the mode that ran", ["mode", "outcome"])
SEARCH_SECONDS = Histogram(
    "sb_memory_search_seconds",
    "Time of one search, embedding the query included",
    buckets=(0.002, 0.005, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)
UPSERTED = Counter("sb_memory_entries_upserted_total", "Entries stored, by source", ["source"])
DEGRADED = Counter(
    "sb_memory_degraded_total", "Operations served without embeddings (provider failed)", ["op"]
)
LOCAL_MODEL_LOADED = Gauge(
    "sb_memory_local_model_loaded", "1 while the local embedding model is loaded"
)
