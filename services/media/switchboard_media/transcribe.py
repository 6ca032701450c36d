"""Audio to text through any OpenAI-compatible ``/v1/audio/transcriptions`` (the ``openai``
SDK: multipart upload of the file, ``model``, optional ``language`` and ``prompt``)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from .config import MediaSettings
from .errors import NotConfigured, ProviderFailed
from .sniff import EXTENSIONS

if TYPE_CHECKING:
    import openai

log = logging.getLogger(__name__)


class Transcriber:
    """The client is made on the first transcription: the ``openai`` SDK costs about 12 MiB
    and half a second of import, which a media service that never transcribes need not pay."""

    def __init__(self, settings: MediaSettings) -> None:
        self.model = settings.transcription_model
        self.settings = settings
        self._client: openai.AsyncOpenAI | None = None

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()

    def _get_client(self) -> openai.AsyncOpenAI | None:
        if self._client is None and self.settings.transcription_key():
            import openai

            self._client = openai.AsyncOpenAI(
                api_key=self.settings.transcription_key(),
                base_url=self.settings.transcription_base_url,
                timeout=self.settings.transcription_timeout_s,
                max_retries=1,
            )
        return self._client

    async def transcribe(self, data: bytes, mime: str, language: str, prompt: str) -> str:
        client = self._get_client()
        if client is None:
            raise NotConfigured(
                "transcription is not configured: set SB_TRANSCRIPTION_API_KEY (and "
                "SB_TRANSCRIPTION_BASE_URL, SB_TRANSCRIPTION_MODEL for a provider other than "
                "OpenAI) on the media service"
            )
        import openai

        try:
            result = await client.audio.transcriptions.create(
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
