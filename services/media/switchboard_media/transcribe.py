"""Audio to text through any OpenAI-compatible ``/v1/audio/transcriptions`` (the ``openai``
SDK: multipart upload of the file, ``model``, optional ``language`` and ``prompt``)."""

from __future__ import annotations

import logging

import openai

from .config import MediaSettings
from .errors import NotConfigured, ProviderFailed
from .sniff import EXTENSIONS

log = logging.getLogger(__name__)


class Transcriber:
    def __init__(self, settings: MediaSettings) -> None:
        self.model = settings.transcription_model
        self._client: openai.AsyncOpenAI | None = None
        if settings.transcription_key():
            self._client = openai.AsyncOpenAI(
                api_key=settings.transcription_key(),
                base_url=settings.transcription_base_url,
                timeout=settings.transcription_timeout_s,
                max_retries=1,
            )

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()

    async def transcribe(self, data: bytes, mime: str, language: str, prompt: str) -> str:
        if self._client is None:
            raise NotConfigured(
                "transcription is not configured: set SB_TRANSCRIPTION_API_KEY (and "
                "SB_TRANSCRIPTION_BASE_URL, SB_TRANSCRIPTION_MODEL for a provider other than "
                "OpenAI) on the media service"
            )
        try:
            result = await self._client.audio.transcriptions.create(
                model=self.model,
                file=(f"audio.{EXTENSIONS[mime]}", data, mime),
                response_format="json",
                language=language or openai.omit,
                prompt=prompt or openai.omit,
            )
        except openai.APIStatusError as exc:
            log.warning("transcription failed: http %s", exc.status_code)
            raise ProviderFailed(f"the transcription provider answered {exc.status_code}") from exc
        except openai.APIError as exc:
            log.warning("transcription failed: %s", type(exc).__name__)
            raise ProviderFailed("the transcription provider did not answer") from exc
        return str(getattr(result, "text", "") or "")
