from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MediaRef(_message.Message):
    __slots__ = ("sha256", "mime", "size", "width", "height", "expires_at_ms")
    SHA256_FIELD_NUMBER: _ClassVar[int]
    MIME_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    HEIGHT_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    sha256: str
    mime: str
    size: int
    width: int
    height: int
    expires_at_ms: int
    def __init__(self, sha256: _Optional[str] = ..., mime: _Optional[str] = ..., size: _Optional[int] = ..., width: _Optional[int] = ..., height: _Optional[int] = ..., expires_at_ms: _Optional[int] = ...) -> None: ...

class MediaIngestHeader(_message.Message):
    __slots__ = ("url", "name", "declared_mime", "ttl_s")
    URL_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DECLARED_MIME_FIELD_NUMBER: _ClassVar[int]
    TTL_S_FIELD_NUMBER: _ClassVar[int]
    url: str
    name: str
    declared_mime: str
    ttl_s: int
    def __init__(self, url: _Optional[str] = ..., name: _Optional[str] = ..., declared_mime: _Optional[str] = ..., ttl_s: _Optional[int] = ...) -> None: ...

class MediaIngestRequest(_message.Message):
    __slots__ = ("header", "data")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    header: MediaIngestHeader
    data: bytes
    def __init__(self, header: _Optional[_Union[MediaIngestHeader, _Mapping]] = ..., data: _Optional[bytes] = ...) -> None: ...

class MediaGetRequest(_message.Message):
    __slots__ = ("sha256",)
    SHA256_FIELD_NUMBER: _ClassVar[int]
    sha256: str
    def __init__(self, sha256: _Optional[str] = ...) -> None: ...

class MediaChunk(_message.Message):
    __slots__ = ("ref", "data")
    REF_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    ref: MediaRef
    data: bytes
    def __init__(self, ref: _Optional[_Union[MediaRef, _Mapping]] = ..., data: _Optional[bytes] = ...) -> None: ...

class MediaTransformRequest(_message.Message):
    __slots__ = ("sha256", "operation", "max_width", "max_height", "format", "quality")
    SHA256_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    MAX_WIDTH_FIELD_NUMBER: _ClassVar[int]
    MAX_HEIGHT_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    QUALITY_FIELD_NUMBER: _ClassVar[int]
    sha256: str
    operation: str
    max_width: int
    max_height: int
    format: str
    quality: int
    def __init__(self, sha256: _Optional[str] = ..., operation: _Optional[str] = ..., max_width: _Optional[int] = ..., max_height: _Optional[int] = ..., format: _Optional[str] = ..., quality: _Optional[int] = ...) -> None: ...

class MediaTranscribeRequest(_message.Message):
    __slots__ = ("sha256", "language", "prompt")
    SHA256_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    sha256: str
    language: str
    prompt: str
    def __init__(self, sha256: _Optional[str] = ..., language: _Optional[str] = ..., prompt: _Optional[str] = ...) -> None: ...

class MediaTranscribeResponse(_message.Message):
    __slots__ = ("text", "language", "model")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    text: str
    language: str
    model: str
    def __init__(self, text: _Optional[str] = ..., language: _Optional[str] = ..., model: _Optional[str] = ...) -> None: ...
