"""Media settings.

The store: files in ``SB_MEDIA_DIR`` (default ``$SB_HOME/media``, mode 0700; a volume in
Compose and Kubernetes), their metadata and expiry in PostgreSQL (schema ``media``). Files
live ``SB_MEDIA_TTL_S`` seconds after their last ingest; a cleanup loop deletes what expired.

Transcription: any OpenAI-compatible ``/v1/audio/transcriptions`` (``SB_TRANSCRIPTION_BASE_URL``,
``SB_TRANSCRIPTION_API_KEY``, ``SB_TRANSCRIPTION_MODEL``); the model's ``OPENAI_API_KEY`` is
not read: each service gets only its own secrets. Without a key, ``Transcribe`` answers
FAILED_PRECONDITION naming these settings.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

from pydantic import Field, SecretStr, field_validator

from switchboard.settings import CommonSettings, DatabaseSettings, RpcSettings

MIB = 1024 * 1024


class MediaSettings(CommonSettings, RpcSettings, DatabaseSettings):
    # Where the media service's gRPC listens (embedded mode: 127.0.0.1).
    media_grpc_host: str = "127.0.0.1"
    # Port of the media service's gRPC (Media).
    media_grpc_port: int = Field(default=50055, ge=0, le=65535)
    # Where the files are kept (mode 0700); unset: $SB_HOME/media.
    media_dir: Path | None = None
    # How long a file lives after its last ingest.
    media_ttl_s: int = Field(default=86_400, ge=1)
    # The size cap of one file, enforced while it arrives (bytes, or a URL's body).
    media_max_bytes: int = Field(default=50 * MIB, ge=1024, le=1024 * MIB)
    # Pixels an image may declare: larger is refused as a decompression bomb before decoding.
    media_max_pixels: int = Field(default=50_000_000, ge=1_000, le=1_000_000_000)
    # How often expired files are deleted.
    media_cleanup_interval_s: float = Field(default=300.0, gt=0)
    # Networks URL ingest may reach although the SSRF guard refuses them (e.g. an intranet).
    media_fetch_allow_cidrs: list[str] = Field(default_factory=list)
    # The longest a URL ingest may take to read.
    media_fetch_timeout_s: float = Field(default=20.0, gt=0, le=600)
    # Redirects a URL ingest follows (each checked by the SSRF guard).
    media_fetch_max_redirects: int = Field(default=5, ge=0, le=20)
    # An OpenAI-compatible /v1/audio/transcriptions base URL, for voice notes.
    transcription_base_url: str = "https://api.openai.com/v1"
    # Its key (the model's OPENAI_API_KEY is not read); empty: voice notes are not transcribed.
    transcription_api_key: SecretStr = SecretStr("")
    # The transcription model.
    transcription_model: str = "whisper-1"
    # The longest one transcription may take.
    transcription_timeout_s: float = Field(default=120.0, gt=0, le=3600)

    @field_validator("media_fetch_allow_cidrs")
    @classmethod
    def _cidrs(cls, value: list[str]) -> list[str]:
        for cidr in value:
            try:
                ipaddress.ip_network(cidr, strict=False)
            except ValueError as exc:
                raise ValueError(f"{cidr!r} is not a network (e.g. 10.0.0.0/8)") from exc
        return value

    def store_dir(self) -> Path:
        return self.media_dir or self.home / "media"

    def transcription_key(self) -> str:
        return self.transcription_api_key.get_secret_value()
