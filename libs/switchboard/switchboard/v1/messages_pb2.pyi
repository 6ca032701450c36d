from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ChatRef(_message.Message):
    __slots__ = ("id", "type")
    ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    id: str
    type: str
    def __init__(self, id: _Optional[str] = ..., type: _Optional[str] = ...) -> None: ...

class DeliveryTarget(_message.Message):
    __slots__ = ("channel", "account", "chat", "thread_id")
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    CHAT_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    channel: str
    account: str
    chat: ChatRef
    thread_id: str
    def __init__(self, channel: _Optional[str] = ..., account: _Optional[str] = ..., chat: _Optional[_Union[ChatRef, _Mapping]] = ..., thread_id: _Optional[str] = ...) -> None: ...

class ContextMessage(_message.Message):
    __slots__ = ("role", "text")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    role: str
    text: str
    def __init__(self, role: _Optional[str] = ..., text: _Optional[str] = ...) -> None: ...

class InboundMessage(_message.Message):
    __slots__ = ("channel", "account", "sender", "chat", "text", "media", "message_id", "thread_id", "reply_to", "mentions_bot", "received_at_ms", "session_key", "agent", "context", "deliver_to", "reply_context", "edited", "role", "click")
    class ReplyContextEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    SENDER_FIELD_NUMBER: _ClassVar[int]
    CHAT_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    MEDIA_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    REPLY_TO_FIELD_NUMBER: _ClassVar[int]
    MENTIONS_BOT_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    DELIVER_TO_FIELD_NUMBER: _ClassVar[int]
    REPLY_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    EDITED_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CLICK_FIELD_NUMBER: _ClassVar[int]
    channel: str
    account: str
    sender: str
    chat: ChatRef
    text: str
    media: _containers.RepeatedScalarFieldContainer[str]
    message_id: str
    thread_id: str
    reply_to: str
    mentions_bot: bool
    received_at_ms: int
    session_key: str
    agent: str
    context: _containers.RepeatedCompositeFieldContainer[ContextMessage]
    deliver_to: DeliveryTarget
    reply_context: _containers.ScalarMap[str, str]
    edited: bool
    role: str
    click: ButtonClick
    def __init__(self, channel: _Optional[str] = ..., account: _Optional[str] = ..., sender: _Optional[str] = ..., chat: _Optional[_Union[ChatRef, _Mapping]] = ..., text: _Optional[str] = ..., media: _Optional[_Iterable[str]] = ..., message_id: _Optional[str] = ..., thread_id: _Optional[str] = ..., reply_to: _Optional[str] = ..., mentions_bot: _Optional[bool] = ..., received_at_ms: _Optional[int] = ..., session_key: _Optional[str] = ..., agent: _Optional[str] = ..., context: _Optional[_Iterable[_Union[ContextMessage, _Mapping]]] = ..., deliver_to: _Optional[_Union[DeliveryTarget, _Mapping]] = ..., reply_context: _Optional[_Mapping[str, str]] = ..., edited: _Optional[bool] = ..., role: _Optional[str] = ..., click: _Optional[_Union[ButtonClick, _Mapping]] = ...) -> None: ...

class ButtonClick(_message.Message):
    __slots__ = ("message_id", "by", "decision")
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    BY_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    by: str
    decision: str
    def __init__(self, message_id: _Optional[str] = ..., by: _Optional[str] = ..., decision: _Optional[str] = ...) -> None: ...

class LaneItem(_message.Message):
    __slots__ = ("session_key", "agent", "message", "queue_mode", "enqueued_at_ms", "standing")
    SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    QUEUE_MODE_FIELD_NUMBER: _ClassVar[int]
    ENQUEUED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    STANDING_FIELD_NUMBER: _ClassVar[int]
    session_key: str
    agent: str
    message: InboundMessage
    queue_mode: str
    enqueued_at_ms: int
    standing: str
    def __init__(self, session_key: _Optional[str] = ..., agent: _Optional[str] = ..., message: _Optional[_Union[InboundMessage, _Mapping]] = ..., queue_mode: _Optional[str] = ..., enqueued_at_ms: _Optional[int] = ..., standing: _Optional[str] = ...) -> None: ...

class ToolCall(_message.Message):
    __slots__ = ("call_id", "run_id", "session_key", "agent", "tool", "args_json", "profile", "timeout_s", "workspace_session")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    ARGS_JSON_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_SESSION_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    run_id: str
    session_key: str
    agent: str
    tool: str
    args_json: str
    profile: str
    timeout_s: float
    workspace_session: str
    def __init__(self, call_id: _Optional[str] = ..., run_id: _Optional[str] = ..., session_key: _Optional[str] = ..., agent: _Optional[str] = ..., tool: _Optional[str] = ..., args_json: _Optional[str] = ..., profile: _Optional[str] = ..., timeout_s: _Optional[float] = ..., workspace_session: _Optional[str] = ...) -> None: ...

class ToolCancel(_message.Message):
    __slots__ = ("run_id", "reason")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    reason: str
    def __init__(self, run_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class ToolResult(_message.Message):
    __slots__ = ("call_id", "run_id", "is_error", "content", "details_json", "isolation_json", "duration_ms")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    DETAILS_JSON_FIELD_NUMBER: _ClassVar[int]
    ISOLATION_JSON_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    run_id: str
    is_error: bool
    content: str
    details_json: str
    isolation_json: str
    duration_ms: float
    def __init__(self, call_id: _Optional[str] = ..., run_id: _Optional[str] = ..., is_error: _Optional[bool] = ..., content: _Optional[str] = ..., details_json: _Optional[str] = ..., isolation_json: _Optional[str] = ..., duration_ms: _Optional[float] = ...) -> None: ...

class ToolUpdate(_message.Message):
    __slots__ = ("call_id", "run_id", "seq", "text", "stream")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    run_id: str
    seq: int
    text: str
    stream: str
    def __init__(self, call_id: _Optional[str] = ..., run_id: _Optional[str] = ..., seq: _Optional[int] = ..., text: _Optional[str] = ..., stream: _Optional[str] = ...) -> None: ...

class Usage(_message.Message):
    __slots__ = ("input_tokens", "output_tokens")
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    input_tokens: int
    output_tokens: int
    def __init__(self, input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ...) -> None: ...

class AgentEvent(_message.Message):
    __slots__ = ("run_id", "session_key", "message_id", "seq", "stream", "phase", "text", "tool", "call_id", "usage", "stop_reason", "data_json", "ts_ms", "model", "message_ids")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    STOP_REASON_FIELD_NUMBER: _ClassVar[int]
    DATA_JSON_FIELD_NUMBER: _ClassVar[int]
    TS_MS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_IDS_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    session_key: str
    message_id: str
    seq: int
    stream: str
    phase: str
    text: str
    tool: str
    call_id: str
    usage: Usage
    stop_reason: str
    data_json: str
    ts_ms: int
    model: str
    message_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, run_id: _Optional[str] = ..., session_key: _Optional[str] = ..., message_id: _Optional[str] = ..., seq: _Optional[int] = ..., stream: _Optional[str] = ..., phase: _Optional[str] = ..., text: _Optional[str] = ..., tool: _Optional[str] = ..., call_id: _Optional[str] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ..., stop_reason: _Optional[str] = ..., data_json: _Optional[str] = ..., ts_ms: _Optional[int] = ..., model: _Optional[str] = ..., message_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class OutboundMessage(_message.Message):
    __slots__ = ("run_id", "part", "parts", "session_key", "channel", "account", "chat", "thread_id", "reply_to", "text", "message_ids", "reply_context", "media", "approval_id", "click")
    class ReplyContextEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    PART_FIELD_NUMBER: _ClassVar[int]
    PARTS_FIELD_NUMBER: _ClassVar[int]
    SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    CHAT_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    REPLY_TO_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_IDS_FIELD_NUMBER: _ClassVar[int]
    REPLY_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    MEDIA_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    CLICK_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    part: int
    parts: int
    session_key: str
    channel: str
    account: str
    chat: ChatRef
    thread_id: str
    reply_to: str
    text: str
    message_ids: _containers.RepeatedScalarFieldContainer[str]
    reply_context: _containers.ScalarMap[str, str]
    media: _containers.RepeatedScalarFieldContainer[str]
    approval_id: str
    click: ButtonClick
    def __init__(self, run_id: _Optional[str] = ..., part: _Optional[int] = ..., parts: _Optional[int] = ..., session_key: _Optional[str] = ..., channel: _Optional[str] = ..., account: _Optional[str] = ..., chat: _Optional[_Union[ChatRef, _Mapping]] = ..., thread_id: _Optional[str] = ..., reply_to: _Optional[str] = ..., text: _Optional[str] = ..., message_ids: _Optional[_Iterable[str]] = ..., reply_context: _Optional[_Mapping[str, str]] = ..., media: _Optional[_Iterable[str]] = ..., approval_id: _Optional[str] = ..., click: _Optional[_Union[ButtonClick, _Mapping]] = ...) -> None: ...

class AbortRun(_message.Message):
    __slots__ = ("session_key", "requested_by")
    SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_BY_FIELD_NUMBER: _ClassVar[int]
    session_key: str
    requested_by: str
    def __init__(self, session_key: _Optional[str] = ..., requested_by: _Optional[str] = ...) -> None: ...

class DeadLetter(_message.Message):
    __slots__ = ("part", "reason", "attempts", "at_ms")
    PART_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    part: OutboundMessage
    reason: str
    attempts: int
    at_ms: int
    def __init__(self, part: _Optional[_Union[OutboundMessage, _Mapping]] = ..., reason: _Optional[str] = ..., attempts: _Optional[int] = ..., at_ms: _Optional[int] = ...) -> None: ...
