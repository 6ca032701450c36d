from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PairingRequest(_message.Message):
    __slots__ = ("channel", "account", "sender", "code", "chat_id", "text", "created_at_ms", "expires_at_ms")
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    SENDER_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    CHAT_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    channel: str
    account: str
    sender: str
    code: str
    chat_id: str
    text: str
    created_at_ms: int
    expires_at_ms: int
    def __init__(self, channel: _Optional[str] = ..., account: _Optional[str] = ..., sender: _Optional[str] = ..., code: _Optional[str] = ..., chat_id: _Optional[str] = ..., text: _Optional[str] = ..., created_at_ms: _Optional[int] = ..., expires_at_ms: _Optional[int] = ...) -> None: ...

class PairedSender(_message.Message):
    __slots__ = ("channel", "sender", "approved_by", "approved_at_ms", "role", "account")
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    SENDER_FIELD_NUMBER: _ClassVar[int]
    APPROVED_BY_FIELD_NUMBER: _ClassVar[int]
    APPROVED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    channel: str
    sender: str
    approved_by: str
    approved_at_ms: int
    role: str
    account: str
    def __init__(self, channel: _Optional[str] = ..., sender: _Optional[str] = ..., approved_by: _Optional[str] = ..., approved_at_ms: _Optional[int] = ..., role: _Optional[str] = ..., account: _Optional[str] = ...) -> None: ...

class ListPairingRequest(_message.Message):
    __slots__ = ("channel",)
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    channel: str
    def __init__(self, channel: _Optional[str] = ...) -> None: ...

class ListPairingResponse(_message.Message):
    __slots__ = ("requests",)
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    requests: _containers.RepeatedCompositeFieldContainer[PairingRequest]
    def __init__(self, requests: _Optional[_Iterable[_Union[PairingRequest, _Mapping]]] = ...) -> None: ...

class ListPairedResponse(_message.Message):
    __slots__ = ("senders",)
    SENDERS_FIELD_NUMBER: _ClassVar[int]
    senders: _containers.RepeatedCompositeFieldContainer[PairedSender]
    def __init__(self, senders: _Optional[_Iterable[_Union[PairedSender, _Mapping]]] = ...) -> None: ...

class PairingDecision(_message.Message):
    __slots__ = ("channel", "code", "decided_by", "owner")
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    channel: str
    code: str
    decided_by: str
    owner: bool
    def __init__(self, channel: _Optional[str] = ..., code: _Optional[str] = ..., decided_by: _Optional[str] = ..., owner: _Optional[bool] = ...) -> None: ...

class RevokeRequest(_message.Message):
    __slots__ = ("channel", "sender", "account")
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    SENDER_FIELD_NUMBER: _ClassVar[int]
    ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    channel: str
    sender: str
    account: str
    def __init__(self, channel: _Optional[str] = ..., sender: _Optional[str] = ..., account: _Optional[str] = ...) -> None: ...
