import datetime

from google.api import annotations_pb2 as _annotations_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Credential(_message.Message):
    __slots__ = ("id", "permissions", "tenants", "characters", "created_at", "revoked_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    PERMISSIONS_FIELD_NUMBER: _ClassVar[int]
    TENANTS_FIELD_NUMBER: _ClassVar[int]
    CHARACTERS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    REVOKED_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    permissions: _containers.RepeatedScalarFieldContainer[str]
    tenants: _containers.RepeatedScalarFieldContainer[str]
    characters: bool
    created_at: _timestamp_pb2.Timestamp
    revoked_at: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., permissions: _Optional[_Iterable[str]] = ..., tenants: _Optional[_Iterable[str]] = ..., characters: _Optional[bool] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., revoked_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CreateCredentialRequest(_message.Message):
    __slots__ = ("id", "permissions", "tenants", "characters")
    ID_FIELD_NUMBER: _ClassVar[int]
    PERMISSIONS_FIELD_NUMBER: _ClassVar[int]
    TENANTS_FIELD_NUMBER: _ClassVar[int]
    CHARACTERS_FIELD_NUMBER: _ClassVar[int]
    id: str
    permissions: _containers.RepeatedScalarFieldContainer[str]
    tenants: _containers.RepeatedScalarFieldContainer[str]
    characters: bool
    def __init__(self, id: _Optional[str] = ..., permissions: _Optional[_Iterable[str]] = ..., tenants: _Optional[_Iterable[str]] = ..., characters: _Optional[bool] = ...) -> None: ...

class CreateCredentialResponse(_message.Message):
    __slots__ = ("success", "credential", "token")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    success: bool
    credential: Credential
    token: str
    def __init__(self, success: _Optional[bool] = ..., credential: _Optional[_Union[Credential, _Mapping]] = ..., token: _Optional[str] = ...) -> None: ...

class ListCredentialsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListCredentialsResponse(_message.Message):
    __slots__ = ("credentials",)
    CREDENTIALS_FIELD_NUMBER: _ClassVar[int]
    credentials: _containers.RepeatedCompositeFieldContainer[Credential]
    def __init__(self, credentials: _Optional[_Iterable[_Union[Credential, _Mapping]]] = ...) -> None: ...

class RevokeCredentialRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class RevokeCredentialResponse(_message.Message):
    __slots__ = ("success", "credential")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_FIELD_NUMBER: _ClassVar[int]
    success: bool
    credential: Credential
    def __init__(self, success: _Optional[bool] = ..., credential: _Optional[_Union[Credential, _Mapping]] = ...) -> None: ...

class GetCallerRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetCallerResponse(_message.Message):
    __slots__ = ("auth_required", "credential")
    AUTH_REQUIRED_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_FIELD_NUMBER: _ClassVar[int]
    auth_required: bool
    credential: Credential
    def __init__(self, auth_required: _Optional[bool] = ..., credential: _Optional[_Union[Credential, _Mapping]] = ...) -> None: ...
