"""The ``image`` tool (``group:media``): the run's model looks at an image and answers a
question about it. The image is a ``media:`` reference (those of the conversation's
attachments are shown in the turn next to each image) or an http(s) URL, which the media
service fetches through its SSRF guard. The image is resized to the model's limits first."""

from __future__ import annotations

from switchboard.media import MediaServiceError, parse_media_ref
from switchboard.toolspec import ToolSpec

from ..providers.base import Model, ModelRequest, ModelResponse
from ..providers.errors import ModelError
from ..tools.client import CallRequest, CallResult
from ..tools.local import LocalContext, tool_error
from .attachments import AgentMedia

NAME = "image"
MAX_ANSWER_TOKENS = 1024
SYSTEM = (
    "You analyse one image for an assistant that cannot see it. Answer the request about the "
    "image precisely and concisely; say so when the image does not show what is asked."
)
SPEC = ToolSpec(
    NAME,
    "Look at an image and answer a question about it (describe it, read its text, compare"
    " with a description...). The image is a media reference from this conversation"
    " (media:<sha256>...) or an http(s) URL.",
    {
        "type": "object",
        "properties": {
            "image": {
                "type": "string",
                "minLength": 1,
                "maxLength": 4096,
                "description": "A media:<sha256> reference or an http(s) URL of the image.",
            },
            "prompt": {
                "type": "string",
                "minLength": 1,
                "maxLength": 4000,
                "description": "What to find out about the image.",
            },
        },
        "required": ["image", "prompt"],
        "additionalProperties": False,
    },
    groups=("media",),
)


class ImageTool:
    def __init__(self, media: AgentMedia, model: Model | None) -> None:
        self.media = media
        self.model = model

    @property
    def spec(self) -> ToolSpec:
        return SPEC

    async def run(self, ctx: LocalContext, call: CallRequest) -> CallResult:
        if self.model is None:
            return tool_error(call, "image: no model is configured.", "no_model")
        image, prompt = str(call.args["image"]).strip(), str(call.args["prompt"])
        try:
            sha = await self._sha(image)
            if sha is None:
                return tool_error(
                    call,
                    "image: give a media:<sha256> reference or an http(s) URL.",
                    "invalid_arguments",
                )
            block = await self.media.image_block(sha)
        except MediaServiceError as exc:
            return tool_error(call, f"image: {exc}", "media_error")
        request = ModelRequest(
            system=SYSTEM,
            messages=[{"role": "user", "content": [block, {"type": "text", "text": prompt}]}],
            max_tokens=MAX_ANSWER_TOKENS,
        )
        try:
            answer = await self._ask(request)
        except ModelError as exc:
            return tool_error(call, f"image: the model call failed: {exc.message}", "model_error")
        return CallResult(call.call_id, answer or "(no answer)", False, {"image": sha})

    async def _sha(self, image: str) -> str | None:
        ref = parse_media_ref(image)
        if ref is not None:
            return ref.sha256
        if image.startswith(("http://", "https://")):
            stored = await self.media.client.ingest_url(image)
            if not stored.mime.startswith("image/"):
                raise _NotAnImage(f"the URL is {stored.mime}, not an image")
            return stored.sha256
        return None

    async def _ask(self, request: ModelRequest) -> str:
        assert self.model is not None
        response: ModelResponse | None = None
        async for event in self.model.stream(request):
            if isinstance(event, ModelResponse):
                response = event
        if response is None:
            raise ModelError("the model stream ended without a response")
        return response.text


class _NotAnImage(MediaServiceError):
    """The URL's file is not an image."""
