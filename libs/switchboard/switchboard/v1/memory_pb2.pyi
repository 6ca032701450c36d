from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MemoryScope(_message.Message):
    __slots__ = ("agent", "user")
    AGENT_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    agent: str
    user: str
    def __init__(self, agent: _Optional[str] = ..., user: _Optional[str] = ...) -> None: ...

class EmbedRequest(_message.Message):
    __slots__ = ("texts", "query")
    TEXTS_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    texts: _containers.RepeatedScalarFieldContainer[str]
    query: bool
    def __init__(self, texts: _Optional[_Iterable[str]] = ..., query: _Optional[bool] = ...) -> None: ...

class Vector(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, values: _Optional[_Iterable[float]] = ...) -> None: ...

class EmbedResponse(_message.Message):
    __slots__ = ("vectors", "provider", "model", "dimension", "cached")
    VECTORS_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    DIMENSION_FIELD_NUMBER: _ClassVar[int]
    CACHED_FIELD_NUMBER: _ClassVar[int]
    vectors: _containers.RepeatedCompositeFieldContainer[Vector]
    provider: str
    model: str
    dimension: int
    cached: int
    def __init__(self, vectors: _Optional[_Iterable[_Union[Vector, _Mapping]]] = ..., provider: _Optional[str] = ..., model: _Optional[str] = ..., dimension: _Optional[int] = ..., cached: _Optional[int] = ...) -> None: ...

class MemoryItem(_message.Message):
    __slots__ = ("id", "text", "source", "path", "start_line", "end_line", "session_key", "metadata", "created_at_ms")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    START_LINE_FIELD_NUMBER: _ClassVar[int]
    END_LINE_FIELD_NUMBER: _ClassVar[int]
    SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    id: str
    text: str
    source: str
    path: str
    start_line: int
    end_line: int
    session_key: str
    metadata: _containers.ScalarMap[str, str]
    created_at_ms: int
    def __init__(self, id: _Optional[str] = ..., text: _Optional[str] = ..., source: _Optional[str] = ..., path: _Optional[str] = ..., start_line: _Optional[int] = ..., end_line: _Optional[int] = ..., session_key: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ..., created_at_ms: _Optional[int] = ...) -> None: ...

class UpsertRequest(_message.Message):
    __slots__ = ("scope", "items")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    scope: MemoryScope
    items: _containers.RepeatedCompositeFieldContainer[MemoryItem]
    def __init__(self, scope: _Optional[_Union[MemoryScope, _Mapping]] = ..., items: _Optional[_Iterable[_Union[MemoryItem, _Mapping]]] = ...) -> None: ...

class UpsertResponse(_message.Message):
    __slots__ = ("ids", "degraded")
    IDS_FIELD_NUMBER: _ClassVar[int]
    DEGRADED_FIELD_NUMBER: _ClassVar[int]
    ids: _containers.RepeatedScalarFieldContainer[str]
    degraded: str
    def __init__(self, ids: _Optional[_Iterable[str]] = ..., degraded: _Optional[str] = ...) -> None: ...

class SearchFilter(_message.Message):
    __slots__ = ("sources", "path_prefix", "session_key", "after_ms", "before_ms", "metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    PATH_PREFIX_FIELD_NUMBER: _ClassVar[int]
    SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    BEFORE_MS_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    sources: _containers.RepeatedScalarFieldContainer[str]
    path_prefix: str
    session_key: str
    after_ms: int
    before_ms: int
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, sources: _Optional[_Iterable[str]] = ..., path_prefix: _Optional[str] = ..., session_key: _Optional[str] = ..., after_ms: _Optional[int] = ..., before_ms: _Optional[int] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

class SearchRequest(_message.Message):
    __slots__ = ("scope", "query", "k", "mode", "min_score", "filter")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    K_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    MIN_SCORE_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    scope: MemoryScope
    query: str
    k: int
    mode: str
    min_score: float
    filter: SearchFilter
    def __init__(self, scope: _Optional[_Union[MemoryScope, _Mapping]] = ..., query: _Optional[str] = ..., k: _Optional[int] = ..., mode: _Optional[str] = ..., min_score: _Optional[float] = ..., filter: _Optional[_Union[SearchFilter, _Mapping]] = ...) -> None: ...

class SearchHit(_message.Message):
    __slots__ = ("id", "text", "score", "source", "path", "start_line", "end_line", "session_key", "metadata", "created_at_ms")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    START_LINE_FIELD_NUMBER: _ClassVar[int]
    END_LINE_FIELD_NUMBER: _ClassVar[int]
    SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    id: str
    text: str
    score: float
    source: str
    path: str
    start_line: int
    end_line: int
    session_key: str
    metadata: _containers.ScalarMap[str, str]
    created_at_ms: int
    def __init__(self, id: _Optional[str] = ..., text: _Optional[str] = ..., score: _Optional[float] = ..., source: _Optional[str] = ..., path: _Optional[str] = ..., start_line: _Optional[int] = ..., end_line: _Optional[int] = ..., session_key: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ..., created_at_ms: _Optional[int] = ...) -> None: ...

class SearchResponse(_message.Message):
    __slots__ = ("hits", "mode", "degraded")
    HITS_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    DEGRADED_FIELD_NUMBER: _ClassVar[int]
    hits: _containers.RepeatedCompositeFieldContainer[SearchHit]
    mode: str
    degraded: str
    def __init__(self, hits: _Optional[_Iterable[_Union[SearchHit, _Mapping]]] = ..., mode: _Optional[str] = ..., degraded: _Optional[str] = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ("scope", "path", "from_line", "lines")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    FROM_LINE_FIELD_NUMBER: _ClassVar[int]
    LINES_FIELD_NUMBER: _ClassVar[int]
    scope: MemoryScope
    path: str
    from_line: int
    lines: int
    def __init__(self, scope: _Optional[_Union[MemoryScope, _Mapping]] = ..., path: _Optional[str] = ..., from_line: _Optional[int] = ..., lines: _Optional[int] = ...) -> None: ...

class GetResponse(_message.Message):
    __slots__ = ("path", "text", "from_line", "to_line", "total_lines")
    PATH_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    FROM_LINE_FIELD_NUMBER: _ClassVar[int]
    TO_LINE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_LINES_FIELD_NUMBER: _ClassVar[int]
    path: str
    text: str
    from_line: int
    to_line: int
    total_lines: int
    def __init__(self, path: _Optional[str] = ..., text: _Optional[str] = ..., from_line: _Optional[int] = ..., to_line: _Optional[int] = ..., total_lines: _Optional[int] = ...) -> None: ...

class DeleteRequest(_message.Message):
    __slots__ = ("scope", "ids", "path", "session_key")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    scope: MemoryScope
    ids: _containers.RepeatedScalarFieldContainer[str]
    path: str
    session_key: str
    def __init__(self, scope: _Optional[_Union[MemoryScope, _Mapping]] = ..., ids: _Optional[_Iterable[str]] = ..., path: _Optional[str] = ..., session_key: _Optional[str] = ...) -> None: ...

class DeleteResponse(_message.Message):
    __slots__ = ("deleted",)
    DELETED_FIELD_NUMBER: _ClassVar[int]
    deleted: int
    def __init__(self, deleted: _Optional[int] = ...) -> None: ...

class DocumentHeader(_message.Message):
    __slots__ = ("scope", "path", "mime", "source", "metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    MIME_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    scope: MemoryScope
    path: str
    mime: str
    source: str
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, scope: _Optional[_Union[MemoryScope, _Mapping]] = ..., path: _Optional[str] = ..., mime: _Optional[str] = ..., source: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

class IngestChunk(_message.Message):
    __slots__ = ("header", "data")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    header: DocumentHeader
    data: bytes
    def __init__(self, header: _Optional[_Union[DocumentHeader, _Mapping]] = ..., data: _Optional[bytes] = ...) -> None: ...

class IngestResponse(_message.Message):
    __slots__ = ("path", "chunks", "characters", "unchanged", "degraded")
    PATH_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    CHARACTERS_FIELD_NUMBER: _ClassVar[int]
    UNCHANGED_FIELD_NUMBER: _ClassVar[int]
    DEGRADED_FIELD_NUMBER: _ClassVar[int]
    path: str
    chunks: int
    characters: int
    unchanged: bool
    degraded: str
    def __init__(self, path: _Optional[str] = ..., chunks: _Optional[int] = ..., characters: _Optional[int] = ..., unchanged: _Optional[bool] = ..., degraded: _Optional[str] = ...) -> None: ...

class SessionTurn(_message.Message):
    __slots__ = ("turn_id", "user_text", "assistant_text", "at_ms")
    TURN_ID_FIELD_NUMBER: _ClassVar[int]
    USER_TEXT_FIELD_NUMBER: _ClassVar[int]
    ASSISTANT_TEXT_FIELD_NUMBER: _ClassVar[int]
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    turn_id: str
    user_text: str
    assistant_text: str
    at_ms: int
    def __init__(self, turn_id: _Optional[str] = ..., user_text: _Optional[str] = ..., assistant_text: _Optional[str] = ..., at_ms: _Optional[int] = ...) -> None: ...

class SyncSessionRequest(_message.Message):
    __slots__ = ("scope", "session_key", "turns")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    TURNS_FIELD_NUMBER: _ClassVar[int]
    scope: MemoryScope
    session_key: str
    turns: _containers.RepeatedCompositeFieldContainer[SessionTurn]
    def __init__(self, scope: _Optional[_Union[MemoryScope, _Mapping]] = ..., session_key: _Optional[str] = ..., turns: _Optional[_Iterable[_Union[SessionTurn, _Mapping]]] = ...) -> None: ...

class SyncSessionResponse(_message.Message):
    __slots__ = ("indexed", "degraded")
    INDEXED_FIELD_NUMBER: _ClassVar[int]
    DEGRADED_FIELD_NUMBER: _ClassVar[int]
    indexed: int
    degraded: str
    def __init__(self, indexed: _Optional[int] = ..., degraded: _Optional[str] = ...) -> None: ...
