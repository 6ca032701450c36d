"""Memory settings.

Storage: ``SB_QDRANT_URL`` names a Qdrant server (Compose, Kubernetes); empty, the service keeps
its collections in ``$SB_HOME/memory/<engine>`` with no server (embedded mode; one process at a
time may open it): Qdrant Edge by default, or qdrant-client's local mode
(``SB_QDRANT_LOCAL_ENGINE=client``).

Embeddings: ``SB_EMBEDDING_PROVIDER`` is ``local`` (the default of the settings: a model shipped
inside a Python package, loaded offline), ``none`` (keyword search only: no model, no SDK; the
default of embedded mode, ``switchboard up``, where memory counts: docs/memory.md) or ``openai``
(any OpenAI-compatible ``/v1/embeddings``: ``SB_EMBEDDING_BASE_URL``, ``SB_EMBEDDING_API_KEY``,
``SB_EMBEDDING_MODEL``; the model's ``OPENAI_API_KEY`` is not read: each service gets only its
own secrets). The local model is loaded by the first embedding, not at start, and dropped after
``SB_EMBEDDING_IDLE_UNLOAD_S``.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr

from switchboard.settings import CommonSettings, DatabaseSettings, RpcSettings


class EmbeddingProvider(StrEnum):
    LOCAL = "local"
    OPENAI = "openai"
    NONE = "none"  # keyword (BM25) search only; entries get dense vectors once a provider is set


class Fusion(StrEnum):
    RRF = "rrf"  # reciprocal rank fusion of the two prefetches
    WEIGHTED = "weighted"  # RRF with weights vector_weight (dense) and 1 - vector_weight


class MemorySettings(CommonSettings, RpcSettings, DatabaseSettings):
    # The address the memory service's gRPC server listens on.
    memory_grpc_host: str = "127.0.0.1"
    # Its port (0: any free port).
    memory_grpc_port: int = Field(default=50053, ge=0, le=65535)
    # A Qdrant server (Compose, Kubernetes); empty: the local engine under $SB_HOME/memory.
    qdrant_url: str = ""
    # The Qdrant server's API key, if it asks for one.
    qdrant_api_key: SecretStr = SecretStr("")
    # Without a server: "edge" = Qdrant Edge, Qdrant's engine in-process (the default: a hybrid
    # search in milliseconds), "client" = qdrant-client's local mode (the code path the server
    # uses, in pure Python). Their directory: default $SB_HOME/memory/<engine>.
    qdrant_local_engine: Literal["edge", "client"] = "edge"
    # The local engine's directory (default $SB_HOME/memory/<engine>).
    qdrant_path: Path | None = None
    # Collections are named <prefix>_<agent> (several installations can share a server).
    collection_prefix: str = Field(default="sb_memory", pattern=r"^[a-z][a-z0-9_]{0,31}$")
    # Who embeds: local (the packaged all-MiniLM-L6-v2), openai (an OpenAI-compatible
    # /v1/embeddings) or none (keyword search only; `switchboard up` sets none unless told).
    embedding_provider: EmbeddingProvider = EmbeddingProvider.LOCAL
    embedding_model: str = ""  # "" : the provider's default
    # The OpenAI-compatible provider's base URL (…/v1).
    embedding_base_url: str = ""
    # Its API key (the model's OPENAI_API_KEY is not read).
    embedding_api_key: SecretStr = SecretStr("")
    # Vector size of the OpenAI-compatible model (0: learnt from its first answer).
    embedding_dimension: int = Field(default=0, ge=0, le=8192)
    # Texts per embedding request to the provider.
    embedding_batch: int = Field(default=64, ge=1, le=2048)
    # How long one embedding request may take before the provider counts as down.
    embedding_timeout_s: float = Field(default=30.0, gt=0)
    # The local model is loaded by the first embedding and dropped after this long without
    # one (0: kept once loaded). Unloaded, the process holds ~50 MiB less; loading it again
    # costs 0.1-0.3 s, once per idle spell (measured: docs/memory.md).
    embedding_idle_unload_s: float = Field(default=300.0, ge=0)
    # How the dense and keyword prefetches are fused: plain RRF by default (LoCoMo R@10 0.713
    # with the local model; weighted 0.7/0.3 gave 0.696, 0.3/0.7 0.717: docs/memory-recall.md).
    fusion: Fusion = Fusion.RRF
    vector_weight: float = Field(default=0.7, ge=0.0, le=1.0)  # the dense side's, when weighted
    # Limits on what callers send: characters of one entry or query.
    max_text_chars: int = Field(default=16_000, ge=100, le=1_000_000)
    # Bytes of one document to ingest.
    max_document_bytes: int = Field(default=20 * 1024 * 1024, ge=1024)
    # Entries, texts or ids in one call.
    max_items_per_call: int = Field(default=512, ge=1, le=10_000)
    # Characters per chunk of an ingested document.
    chunk_chars: int = Field(default=1000, ge=100, le=20_000)
    # Characters each chunk shares with the one before.
    chunk_overlap: int = Field(default=200, ge=0, le=5_000)
    # How often entries stored while the embedding provider was down are embedded again.
    repair_interval_s: float = Field(default=60.0, gt=0)

    def qdrant_location(self) -> Path:
        return self.qdrant_path or self.home / "memory" / self.qdrant_local_engine

    def embedding_key(self) -> str:
        return self.embedding_api_key.get_secret_value()
