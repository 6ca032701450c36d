from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Approval(_message.Message):
    __slots__ = ("approval_id", "run_id", "session_key", "agent", "call_id", "tool", "args_json", "rule", "status", "decided_by", "reason", "requested_at_ms", "decided_at_ms", "started_at_ms", "finished_at_ms")
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    ARGS_JSON_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    DECIDED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    approval_id: str
    run_id: str
    session_key: str
    agent: str
    call_id: str
    tool: str
    args_json: str
    rule: str
    status: str
    decided_by: str
    reason: str
    requested_at_ms: int
    decided_at_ms: int
    started_at_ms: int
    finished_at_ms: int
    def __init__(self, approval_id: _Optional[str] = ..., run_id: _Optional[str] = ..., session_key: _Optional[str] = ..., agent: _Optional[str] = ..., call_id: _Optional[str] = ..., tool: _Optional[str] = ..., args_json: _Optional[str] = ..., rule: _Optional[str] = ..., status: _Optional[str] = ..., decided_by: _Optional[str] = ..., reason: _Optional[str] = ..., requested_at_ms: _Optional[int] = ..., decided_at_ms: _Optional[int] = ..., started_at_ms: _Optional[int] = ..., finished_at_ms: _Optional[int] = ...) -> None: ...

class ListApprovalsRequest(_message.Message):
    __slots__ = ("session_key", "status", "limit")
    SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    session_key: str
    status: str
    limit: int
    def __init__(self, session_key: _Optional[str] = ..., status: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListApprovalsResponse(_message.Message):
    __slots__ = ("approvals",)
    APPROVALS_FIELD_NUMBER: _ClassVar[int]
    approvals: _containers.RepeatedCompositeFieldContainer[Approval]
    def __init__(self, approvals: _Optional[_Iterable[_Union[Approval, _Mapping]]] = ...) -> None: ...

class DecideApprovalRequest(_message.Message):
    __slots__ = ("approval_id", "approve", "decided_by", "reason")
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    APPROVE_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    approval_id: str
    approve: bool
    decided_by: str
    reason: str
    def __init__(self, approval_id: _Optional[str] = ..., approve: _Optional[bool] = ..., decided_by: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class InvokeToolRequest(_message.Message):
    __slots__ = ("tool", "args_json", "session_key", "dry_run", "agent")
    TOOL_FIELD_NUMBER: _ClassVar[int]
    ARGS_JSON_FIELD_NUMBER: _ClassVar[int]
    SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    tool: str
    args_json: str
    session_key: str
    dry_run: bool
    agent: str
    def __init__(self, tool: _Optional[str] = ..., args_json: _Optional[str] = ..., session_key: _Optional[str] = ..., dry_run: _Optional[bool] = ..., agent: _Optional[str] = ...) -> None: ...

class InvokeToolResponse(_message.Message):
    __slots__ = ("ok", "text", "details_json", "isolation_json", "error")
    OK_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    DETAILS_JSON_FIELD_NUMBER: _ClassVar[int]
    ISOLATION_JSON_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    text: str
    details_json: str
    isolation_json: str
    error: str
    def __init__(self, ok: _Optional[bool] = ..., text: _Optional[str] = ..., details_json: _Optional[str] = ..., isolation_json: _Optional[str] = ..., error: _Optional[str] = ...) -> None: ...

class ChatDecision(_message.Message):
    __slots__ = ("approval_id", "approve", "reason", "sender", "session_key", "role")
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    APPROVE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SENDER_FIELD_NUMBER: _ClassVar[int]
    SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    approval_id: str
    approve: bool
    reason: str
    sender: str
    session_key: str
    role: str
    def __init__(self, approval_id: _Optional[str] = ..., approve: _Optional[bool] = ..., reason: _Optional[str] = ..., sender: _Optional[str] = ..., session_key: _Optional[str] = ..., role: _Optional[str] = ...) -> None: ...

class ChatDecisionResult(_message.Message):
    __slots__ = ("outcome", "approval_id", "status", "tool")
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    outcome: str
    approval_id: str
    status: str
    tool: str
    def __init__(self, outcome: _Optional[str] = ..., approval_id: _Optional[str] = ..., status: _Optional[str] = ..., tool: _Optional[str] = ...) -> None: ...
