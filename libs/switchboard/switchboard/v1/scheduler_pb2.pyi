from switchboard.v1 import messages_pb2 as _messages_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Job(_message.Message):
    __slots__ = ("name", "kind", "cron", "timezone", "every_ms", "at_ms", "agent", "session_key", "message", "url", "path", "body_json", "deliver_to", "enabled", "missed", "urgent", "next_run_ms", "last_run_ms", "last_result", "last_error", "runs", "created_at_ms", "content_sha256")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    CRON_FIELD_NUMBER: _ClassVar[int]
    TIMEZONE_FIELD_NUMBER: _ClassVar[int]
    EVERY_MS_FIELD_NUMBER: _ClassVar[int]
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    BODY_JSON_FIELD_NUMBER: _ClassVar[int]
    DELIVER_TO_FIELD_NUMBER: _ClassVar[int]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    MISSED_FIELD_NUMBER: _ClassVar[int]
    URGENT_FIELD_NUMBER: _ClassVar[int]
    NEXT_RUN_MS_FIELD_NUMBER: _ClassVar[int]
    LAST_RUN_MS_FIELD_NUMBER: _ClassVar[int]
    LAST_RESULT_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    RUNS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    CONTENT_SHA256_FIELD_NUMBER: _ClassVar[int]
    name: str
    kind: str
    cron: str
    timezone: str
    every_ms: int
    at_ms: int
    agent: str
    session_key: str
    message: str
    url: str
    path: str
    body_json: str
    deliver_to: _messages_pb2.DeliveryTarget
    enabled: bool
    missed: str
    urgent: bool
    next_run_ms: int
    last_run_ms: int
    last_result: str
    last_error: str
    runs: int
    created_at_ms: int
    content_sha256: str
    def __init__(self, name: _Optional[str] = ..., kind: _Optional[str] = ..., cron: _Optional[str] = ..., timezone: _Optional[str] = ..., every_ms: _Optional[int] = ..., at_ms: _Optional[int] = ..., agent: _Optional[str] = ..., session_key: _Optional[str] = ..., message: _Optional[str] = ..., url: _Optional[str] = ..., path: _Optional[str] = ..., body_json: _Optional[str] = ..., deliver_to: _Optional[_Union[_messages_pb2.DeliveryTarget, _Mapping]] = ..., enabled: _Optional[bool] = ..., missed: _Optional[str] = ..., urgent: _Optional[bool] = ..., next_run_ms: _Optional[int] = ..., last_run_ms: _Optional[int] = ..., last_result: _Optional[str] = ..., last_error: _Optional[str] = ..., runs: _Optional[int] = ..., created_at_ms: _Optional[int] = ..., content_sha256: _Optional[str] = ...) -> None: ...

class ListJobsRequest(_message.Message):
    __slots__ = ("agent", "session_key")
    AGENT_FIELD_NUMBER: _ClassVar[int]
    SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    agent: str
    session_key: str
    def __init__(self, agent: _Optional[str] = ..., session_key: _Optional[str] = ...) -> None: ...

class ListJobsResponse(_message.Message):
    __slots__ = ("jobs",)
    JOBS_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[Job]
    def __init__(self, jobs: _Optional[_Iterable[_Union[Job, _Mapping]]] = ...) -> None: ...

class UpdateJobRequest(_message.Message):
    __slots__ = ("name", "job", "fields")
    NAME_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    name: str
    job: Job
    fields: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., job: _Optional[_Union[Job, _Mapping]] = ..., fields: _Optional[_Iterable[str]] = ...) -> None: ...

class JobName(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class RunNowResponse(_message.Message):
    __slots__ = ("job", "result", "error")
    JOB_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    job: Job
    result: str
    error: str
    def __init__(self, job: _Optional[_Union[Job, _Mapping]] = ..., result: _Optional[str] = ..., error: _Optional[str] = ...) -> None: ...
