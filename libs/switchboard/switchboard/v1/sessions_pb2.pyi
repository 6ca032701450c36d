from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ListSessionsRequest(_message.Message):
    __slots__ = ("agent", "limit")
    AGENT_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    agent: str
    limit: int
    def __init__(self, agent: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class SessionInfo(_message.Message):
    __slots__ = ("session_key", "agent", "updated_at_ms", "message_count", "usage")
    SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    session_key: str
    agent: str
    updated_at_ms: int
    message_count: int
    usage: UsageTotals
    def __init__(self, session_key: _Optional[str] = ..., agent: _Optional[str] = ..., updated_at_ms: _Optional[int] = ..., message_count: _Optional[int] = ..., usage: _Optional[_Union[UsageTotals, _Mapping]] = ...) -> None: ...

class ListSessionsResponse(_message.Message):
    __slots__ = ("sessions",)
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    sessions: _containers.RepeatedCompositeFieldContainer[SessionInfo]
    def __init__(self, sessions: _Optional[_Iterable[_Union[SessionInfo, _Mapping]]] = ...) -> None: ...

class HistoryRequest(_message.Message):
    __slots__ = ("session_key", "limit")
    SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    session_key: str
    limit: int
    def __init__(self, session_key: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class TranscriptMessage(_message.Message):
    __slots__ = ("role", "content_json", "run_id", "created_at_ms")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_JSON_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    role: str
    content_json: str
    run_id: str
    created_at_ms: int
    def __init__(self, role: _Optional[str] = ..., content_json: _Optional[str] = ..., run_id: _Optional[str] = ..., created_at_ms: _Optional[int] = ...) -> None: ...

class HistoryResponse(_message.Message):
    __slots__ = ("session_key", "messages")
    SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    session_key: str
    messages: _containers.RepeatedCompositeFieldContainer[TranscriptMessage]
    def __init__(self, session_key: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[TranscriptMessage, _Mapping]]] = ...) -> None: ...

class PatchSessionRequest(_message.Message):
    __slots__ = ("session_key", "queue_mode", "tool_policy_json", "model")
    SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    QUEUE_MODE_FIELD_NUMBER: _ClassVar[int]
    TOOL_POLICY_JSON_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    session_key: str
    queue_mode: str
    tool_policy_json: str
    model: str
    def __init__(self, session_key: _Optional[str] = ..., queue_mode: _Optional[str] = ..., tool_policy_json: _Optional[str] = ..., model: _Optional[str] = ...) -> None: ...

class PatchSessionResponse(_message.Message):
    __slots__ = ("session_key", "queue_mode", "tool_policy_json", "model")
    SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    QUEUE_MODE_FIELD_NUMBER: _ClassVar[int]
    TOOL_POLICY_JSON_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    session_key: str
    queue_mode: str
    tool_policy_json: str
    model: str
    def __init__(self, session_key: _Optional[str] = ..., queue_mode: _Optional[str] = ..., tool_policy_json: _Optional[str] = ..., model: _Optional[str] = ...) -> None: ...

class ResetSessionRequest(_message.Message):
    __slots__ = ("session_key",)
    SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    session_key: str
    def __init__(self, session_key: _Optional[str] = ...) -> None: ...

class ResetSessionResponse(_message.Message):
    __slots__ = ("session_key", "messages_removed")
    SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_REMOVED_FIELD_NUMBER: _ClassVar[int]
    session_key: str
    messages_removed: int
    def __init__(self, session_key: _Optional[str] = ..., messages_removed: _Optional[int] = ...) -> None: ...

class DeleteSessionRequest(_message.Message):
    __slots__ = ("session_key", "requested_by")
    SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_BY_FIELD_NUMBER: _ClassVar[int]
    session_key: str
    requested_by: str
    def __init__(self, session_key: _Optional[str] = ..., requested_by: _Optional[str] = ...) -> None: ...

class DeleteSessionResponse(_message.Message):
    __slots__ = ("session_key", "messages_removed")
    SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_REMOVED_FIELD_NUMBER: _ClassVar[int]
    session_key: str
    messages_removed: int
    def __init__(self, session_key: _Optional[str] = ..., messages_removed: _Optional[int] = ...) -> None: ...

class AbortSessionRequest(_message.Message):
    __slots__ = ("session_key", "requested_by")
    SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_BY_FIELD_NUMBER: _ClassVar[int]
    session_key: str
    requested_by: str
    def __init__(self, session_key: _Optional[str] = ..., requested_by: _Optional[str] = ...) -> None: ...

class AbortSessionResponse(_message.Message):
    __slots__ = ("session_key", "aborted")
    SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    session_key: str
    aborted: bool
    def __init__(self, session_key: _Optional[str] = ..., aborted: _Optional[bool] = ...) -> None: ...

class SessionCommand(_message.Message):
    __slots__ = ("command", "args", "sender", "session_key", "role")
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    SENDER_FIELD_NUMBER: _ClassVar[int]
    SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    command: str
    args: str
    sender: str
    session_key: str
    role: str
    def __init__(self, command: _Optional[str] = ..., args: _Optional[str] = ..., sender: _Optional[str] = ..., session_key: _Optional[str] = ..., role: _Optional[str] = ...) -> None: ...

class SessionCommandResult(_message.Message):
    __slots__ = ("outcome", "text")
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    outcome: str
    text: str
    def __init__(self, outcome: _Optional[str] = ..., text: _Optional[str] = ...) -> None: ...

class UsageTotals(_message.Message):
    __slots__ = ("input_tokens", "output_tokens", "cost_usd", "calls")
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COST_USD_FIELD_NUMBER: _ClassVar[int]
    CALLS_FIELD_NUMBER: _ClassVar[int]
    input_tokens: int
    output_tokens: int
    cost_usd: float
    calls: int
    def __init__(self, input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., cost_usd: _Optional[float] = ..., calls: _Optional[int] = ...) -> None: ...

class UsageRequest(_message.Message):
    __slots__ = ("agent", "day", "session_key", "run_id")
    AGENT_FIELD_NUMBER: _ClassVar[int]
    DAY_FIELD_NUMBER: _ClassVar[int]
    SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    agent: str
    day: str
    session_key: str
    run_id: str
    def __init__(self, agent: _Optional[str] = ..., day: _Optional[str] = ..., session_key: _Optional[str] = ..., run_id: _Optional[str] = ...) -> None: ...

class UsageRow(_message.Message):
    __slots__ = ("agent", "day", "model", "totals")
    AGENT_FIELD_NUMBER: _ClassVar[int]
    DAY_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    TOTALS_FIELD_NUMBER: _ClassVar[int]
    agent: str
    day: str
    model: str
    totals: UsageTotals
    def __init__(self, agent: _Optional[str] = ..., day: _Optional[str] = ..., model: _Optional[str] = ..., totals: _Optional[_Union[UsageTotals, _Mapping]] = ...) -> None: ...

class UsageResponse(_message.Message):
    __slots__ = ("total", "rows", "budget_json")
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    BUDGET_JSON_FIELD_NUMBER: _ClassVar[int]
    total: UsageTotals
    rows: _containers.RepeatedCompositeFieldContainer[UsageRow]
    budget_json: str
    def __init__(self, total: _Optional[_Union[UsageTotals, _Mapping]] = ..., rows: _Optional[_Iterable[_Union[UsageRow, _Mapping]]] = ..., budget_json: _Optional[str] = ...) -> None: ...

class CompactSessionRequest(_message.Message):
    __slots__ = ("session_key", "keep_turns")
    SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    KEEP_TURNS_FIELD_NUMBER: _ClassVar[int]
    session_key: str
    keep_turns: int
    def __init__(self, session_key: _Optional[str] = ..., keep_turns: _Optional[int] = ...) -> None: ...

class CompactSessionResponse(_message.Message):
    __slots__ = ("session_key", "compacted", "note", "messages_compacted", "summary", "facts_flushed", "flushed_to", "tokens_before", "tokens_after")
    SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    COMPACTED_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_COMPACTED_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    FACTS_FLUSHED_FIELD_NUMBER: _ClassVar[int]
    FLUSHED_TO_FIELD_NUMBER: _ClassVar[int]
    TOKENS_BEFORE_FIELD_NUMBER: _ClassVar[int]
    TOKENS_AFTER_FIELD_NUMBER: _ClassVar[int]
    session_key: str
    compacted: bool
    note: str
    messages_compacted: int
    summary: str
    facts_flushed: int
    flushed_to: str
    tokens_before: int
    tokens_after: int
    def __init__(self, session_key: _Optional[str] = ..., compacted: _Optional[bool] = ..., note: _Optional[str] = ..., messages_compacted: _Optional[int] = ..., summary: _Optional[str] = ..., facts_flushed: _Optional[int] = ..., flushed_to: _Optional[str] = ..., tokens_before: _Optional[int] = ..., tokens_after: _Optional[int] = ...) -> None: ...
