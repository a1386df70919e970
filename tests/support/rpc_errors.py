"""The error a gRPC call ends with, and the google.rpc details the server attaches to it
(the error model of docs/errors.md): shared by every service-test helper module."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status


def error(call: Callable[..., Any], request: Any, *, stream: bool = False, **kwargs: Any) -> grpc.RpcError:
    """The RpcError a call ends with (for a server stream, read until it comes)."""
    with pytest.raises(grpc.RpcError) as info:
        result = call(request, **kwargs)
        if stream:
            list(result)
    return info.value


def error_info(err: grpc.RpcError) -> error_details_pb2.ErrorInfo | None:
    st = rpc_status.from_call(err)
    for detail in st.details if st else []:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            return info
    return None


def violated_fields(err: grpc.RpcError) -> set[str]:
    return status_violated_fields(rpc_status.from_call(err))


def status_violated_fields(st: status_pb2.Status | None) -> set[str]:
    """The BadRequest fields of a google.rpc.Status (a failed call's, or one batch item's)."""
    fields: set[str] = set()
    for detail in st.details if st else []:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            fields.update(v.field for v in bad.field_violations)
    return fields
