"""WebChat's frames (docs/webchat-protocol.md) as pydantic models: requests from the page,
responses and events to it, the parameters and results of each method and the payload of each
event. JSON text frames only."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

PROTOCOL = 1
MAX_ATTACHMENTS = 4

# A WebChat session id: the last part of its session key ``<agent>:webchat:<session>``.
SessionId = Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
RequestId = str | int

# Close codes (4000-4999 are the application's).
CLOSE_LIFETIME = 4000  # the socket reached SB_STREAM_MAX_LIFETIME_S: reconnect and resume
CLOSE_UNAUTHORIZED = 4401  # no connect first, or a wrong token: do not retry with it
CLOSE_CONNECT_TIMEOUT = 4408  # no connect request within SB_WEBCHAT_CONNECT_TIMEOUT_S
CLOSE_TOO_MANY = 4429  # the token has SB_MAX_STREAMS_PER_TOKEN streams open already
CLOSE_TOO_SLOW = 1013  # the client did not read its events: reconnect and resume

# Error codes of failed responses.
UNAUTHORIZED = "unauthorized"
TOO_MANY = "too_many_streams"
BAD_JSON = "bad_json"
BAD_FRAME = "bad_frame"
FRAME_TOO_LARGE = "frame_too_large"
UNKNOWN_METHOD = "unknown_method"
INVALID_PARAMS = "invalid_params"
ALREADY_CONNECTED = "already_connected"
TOO_MUCH_TEXT = "too_much_text"
UNAVAILABLE = "unavailable"
NOT_FOUND = "not_found"
ALREADY_DECIDED = "already_decided"
TIMEOUT = "timeout"
INVALID_REQUEST = "invalid_request"
BAD_ATTACHMENT = "bad_attachment"


class Frame(BaseModel):
    # defer_build: the frames' validators are built by the first WebSocket chat, not while the
    # gateway imports (25 models, 13-20 ms of a start-up; docs/startup.md).
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True, defer_build=True)

    def to_json(self) -> str:
        return self.model_dump_json()


# --- client -> server -------------------------------------------------------------------------


class Request(Frame):
    type: Literal["req"]
    id: RequestId = Field(union_mode="left_to_right")
    method: str = Field(min_length=1, max_length=64)
    params: dict[str, Any] = Field(default_factory=dict)


class ConnectParams(Frame):
    token: str = Field(max_length=4096)
    session: SessionId | None = None  # None: a new session
    epoch: str | None = Field(default=None, max_length=64)  # resume: the feed's epoch...
    last_seq: int | None = Field(default=None, ge=0)  # ...and the last event seq seen


class Attachment(Frame):
    """A file sent with a message: its bytes in base64 (the frame stays within
    SB_WEBCHAT_MAX_FRAME_BYTES); ``name`` and ``mime`` are informative only (the media service
    sniffs the type)."""

    data: str = Field(min_length=4)
    name: str = Field(default="", max_length=128)
    mime: str = Field(default="", max_length=128)


class SendParams(Frame):
    text: str = ""  # may be empty when attachments are sent
    session: SessionId | None = None  # None: the connection's session
    attachments: list[Attachment] = Field(default_factory=list, max_length=MAX_ATTACHMENTS)

    @model_validator(mode="after")
    def _something(self) -> Self:
        if not self.text.strip() and not self.attachments:
            raise ValueError("a message needs text or an attachment")
        return self


class HistoryParams(Frame):
    session: SessionId | None = None
    limit: int = Field(default=0, ge=0, le=10_000)  # 0: all


class AbortParams(Frame):
    session: SessionId | None = None


class SessionsParams(Frame):
    """The WebChat conversations of the default agent, newest first (the page's sidebar)."""

    limit: int = Field(default=100, ge=1, le=1000)


class DecideParams(Frame):
    """Approve or deny a tool call waiting in a run (the tool card's buttons)."""

    approval_id: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_-]+$")
    decision: Literal["approve", "deny"]
    reason: str = Field(default="", max_length=2000)


PARAMS: dict[str, type[Frame]] = {
    "connect": ConnectParams,
    "send": SendParams,
    "history": HistoryParams,
    "abort": AbortParams,
    "decide": DecideParams,
    "sessions": SessionsParams,
}


# --- server -> client -------------------------------------------------------------------------


class ErrorBody(Frame):
    code: str
    message: str


class ResponseOk(Frame):
    type: Literal["res"] = "res"
    id: RequestId
    ok: Literal[True] = True
    payload: dict[str, Any]


class ResponseError(Frame):
    type: Literal["res"] = "res"
    id: RequestId | None  # None: the request's id could not be read
    ok: Literal[False] = False
    error: ErrorBody


class EventFrame(Frame):
    type: Literal["event"] = "event"
    event: str
    payload: dict[str, Any]
    seq: int


class ConnectResult(Frame):
    protocol: int = PROTOCOL
    session: str
    session_key: str
    epoch: str
    seq: int  # the feed's position: the next event has seq + 1
    resumed: bool  # the missed events follow (or none were missed)
    replayed: int  # how many events follow this response as a replay
    methods: list[str] = Field(default_factory=lambda: sorted(PARAMS))


class SendResult(Frame):
    message_id: str
    session: str
    session_key: str
    # queued: the answer comes as events; answered: a session command (/status, /reset...)
    # that an agent answered at once (``answer``), no run
    status: Literal["queued", "answered"] = "queued"
    answer: str | None = None


class AbortResult(Frame):
    session: str
    session_key: str
    # Requested: the replica running the session's lane interrupts its run, if one runs; the
    # run's lifecycle end event (stop_reason "interrupted") follows on the socket.
    status: Literal["requested"] = "requested"


class DecideResult(Frame):
    approval_id: str
    status: str  # approved | denied
    tool: str


class SessionSummary(Frame):
    session: str  # the session id, for connect, send and history
    session_key: str
    updated_at_ms: int
    message_count: int


class SessionsResult(Frame):
    sessions: list[SessionSummary]


class HistoryMessage(Frame):
    role: str
    content: Any  # the transcript's content blocks (text, tool_use, tool_result)
    run_id: str
    created_at_ms: int


class HistoryResult(Frame):
    session: str
    session_key: str
    messages: list[HistoryMessage]


class AssistantDelta(Frame):
    run_id: str
    text: str


class ToolPhase(Frame):
    run_id: str
    call_id: str
    tool: str
    phase: Literal["start", "approval", "result"]
    summary: str = ""  # start: the arguments; result: the output; both shortened
    is_error: bool | None = None  # result
    approval_id: str | None = None  # approval
    status: str | None = None  # approval: pending, approved, denied...


class Lifecycle(Frame):
    run_id: str
    phase: Literal["start", "end"]
    message_ids: list[str]
    status: str | None = None  # end: completed, error, interrupted...
    stop_reason: str | None = None
    text: str | None = None  # end: the whole reply text
    input_tokens: int | None = None
    output_tokens: int | None = None


class MediaItem(Frame):
    ref: str  # media:<sha256>?mime=...
    mime: str
    url: str  # GET it with the gateway token (Authorization: Bearer)


class ChatMessage(Frame):
    """A message the agent sent to the chat during a run (its ``message`` tool), with files."""

    run_id: str
    call_id: str
    text: str
    media: list[MediaItem]


class RunError(Frame):
    run_id: str
    message: str


class Gap(Frame):
    reason: Literal["new_feed", "too_far_behind", "unknown_position"]
    message: str


def error(request_id: RequestId | None, code: str, message: str) -> str:
    return ResponseError(id=request_id, error=ErrorBody(code=code, message=message)).to_json()


def ok(request_id: RequestId, payload: Frame) -> str:
    return ResponseOk(id=request_id, payload=payload.model_dump(exclude_none=True)).to_json()


def event(name: str, payload: Frame, seq: int) -> str:
    return EventFrame(event=name, payload=payload.model_dump(exclude_none=True), seq=seq).to_json()


def problem(exc: ValidationError) -> str:
    """What is wrong with a frame or its parameters, without echoing the values given."""
    parts = []
    for e in exc.errors(include_input=False, include_url=False)[:5]:
        where = ".".join(str(p) for p in e["loc"]) or "frame"
        parts.append(f"{where}: {e['msg']}")
    return "; ".join(parts)
