"""Refused calls surface as the typed exception with the server's message, reason, field
violations and request id: bad input, a missing memory, a missing or wrong token, a token
confined to other tenants; and the bearer token the SDK sends is the one the server checks."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import grpc
import pytest
from conftest import ServerHandle, make_config, start_server
from google.rpc import code_pb2
from memsvc_client import (
    Aborted,
    AlreadyExists,
    Conflict,
    DeadlineExceeded,
    FailedPrecondition,
    Internal,
    InvalidArgument,
    Memsvc,
    MemsvcError,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
)
from memsvc_client.errors import error_class, status_code

from tests.sdk.servers import address

ADMIN = "sdk-admin-token"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerHandle]:
    """A server that needs a token: MEMSVC_API_TOKENS holds ADMIN."""
    handle = start_server(make_config(tmp_path_factory.mktemp("sdk-auth"), api_tokens=(ADMIN,)))
    with Memsvc(address(handle), token=ADMIN) as admin:
        admin.settings.update(enabled=True)
    yield handle
    handle.stop()


def tenant_token(handle: ServerHandle, name: str, tenants: list[str]) -> str:
    return handle.app.credentials.create(name, ["read:memory", "write:memory"], tenants, False).token


def test_bad_input_is_invalid_argument_with_the_server_s_message_and_every_violation(memsvc: Memsvc) -> None:
    with pytest.raises(InvalidArgument) as info:
        memsvc.memories.add("", type="bogus")  # type: ignore[arg-type]
    err = info.value
    assert err.code is grpc.StatusCode.INVALID_ARGUMENT and err.reason == "INVALID_ARGUMENT"
    assert err.domain == "memsvc"
    assert {v.field for v in err.field_violations} == {"content", "type"}
    assert all(v.description for v in err.field_violations)
    assert "content" in err.message and "type" in err.message
    assert err.request_id and len(err.request_id) >= 16  # the server's log names the call by it
    assert err.status is not None and err.status.code == code_pb2.INVALID_ARGUMENT
    assert str(err).startswith("INVALID_ARGUMENT: ") and str(err).endswith("[INVALID_ARGUMENT]")
    assert memsvc.memories.page().total == 0  # nothing was stored


def test_an_update_of_a_field_that_cannot_change_is_refused(memsvc: Memsvc) -> None:
    added = memsvc.memories.add("fixed")
    with pytest.raises(InvalidArgument) as info:
        memsvc.memories.update(added.id, content="x" * (32 * 1024 + 1))
    assert [v.field for v in info.value.field_violations] == ["content"]
    assert memsvc.memories.get(added.id).content == "fixed"


def test_a_missing_memory_is_not_found_with_its_reason(memsvc: Memsvc) -> None:
    with pytest.raises(NotFound) as info:
        memsvc.memories.get("no-such-id")
    assert info.value.reason == "NOT_FOUND" and "no-such-id" in info.value.message
    assert isinstance(info.value, MemsvcError) and info.value.field_violations == ()


def test_retrieve_without_an_api_key_id_is_refused(connect: Callable[..., Memsvc]) -> None:
    client = connect()  # no default apiKeyId
    client.settings.update(enabled=True)
    with pytest.raises(InvalidArgument) as info:
        client.retrieve("anything")
    assert "apiKeyId" in {v.field for v in info.value.field_violations}


def test_without_a_token_a_secured_server_answers_unauthenticated(secured: ServerHandle) -> None:
    with Memsvc(address(secured), api_key_id="t-none") as anonymous:
        with pytest.raises(Unauthenticated) as info:
            anonymous.memories.add("not stored")
    assert info.value.reason == "UNAUTHENTICATED"
    assert info.value.message == "missing or invalid bearer token"


def test_a_wrong_token_is_unauthenticated_and_the_right_one_passes(secured: ServerHandle) -> None:
    with Memsvc(address(secured), token="not-the-token", api_key_id="t-wrong") as wrong:
        with pytest.raises(Unauthenticated):
            wrong.memories.page()
    with Memsvc(address(secured), token=ADMIN, api_key_id="t-right") as admin:
        added = admin.memories.add("stored with the admin token")
        assert admin.memories.get(added.id).content == "stored with the admin token"
        assert admin.metadata == (("authorization", f"Bearer {ADMIN}"),)


def test_a_token_of_one_tenant_is_refused_another_tenant_s_memories(secured: ServerHandle) -> None:
    with Memsvc(address(secured), token=ADMIN) as admin:
        theirs = admin.memories.add("B's secret plan", api_key_id="tenant-b")
    token = tenant_token(secured, "sdk-tenant-a", ["tenant-a"])
    with Memsvc(address(secured), token=token, api_key_id="tenant-a") as a:
        own = a.memories.add("A's note")
        assert a.memories.get(own.id).content == "A's note"
        for call in (
            lambda: a.memories.add("x", api_key_id="tenant-b"),
            lambda: a.memories.page(api_key_id="tenant-b"),
            lambda: a.memories.clear(api_key_id="tenant-b"),
            lambda: a.retrieve("plan", api_key_id="tenant-b"),
        ):
            with pytest.raises(PermissionDenied) as info:
                call()
            assert info.value.reason == "PERMISSION_DENIED"
            assert info.value.message == "credential 'sdk-tenant-a' may not address apiKeyId 'tenant-b'"
        # Another tenant's memory by id is reported exactly like a missing one.
        with pytest.raises(NotFound):
            a.memories.get(theirs.id)
        # One item for another tenant refuses the whole batch: nothing of it is stored.
        with pytest.raises(PermissionDenied):
            a.memories.add_many(["mine", {"content": "theirs", "api_key_id": "tenant-b"}])
    with Memsvc(address(secured), token=ADMIN) as admin:
        assert [m.content for m in admin.memories.list(api_key_id="tenant-b")] == ["B's secret plan"]
        assert [m.content for m in admin.memories.list(api_key_id="tenant-a")] == ["A's note"]


def test_every_status_code_maps_to_its_class() -> None:
    expected = {
        grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
        grpc.StatusCode.NOT_FOUND: NotFound,
        grpc.StatusCode.ABORTED: Aborted,
        grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
        grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
        grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
        grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
        grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
        grpc.StatusCode.UNAVAILABLE: Unavailable,
        grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
        grpc.StatusCode.INTERNAL: Internal,
        grpc.StatusCode.UNKNOWN: MemsvcError,
        grpc.StatusCode.DATA_LOSS: MemsvcError,
    }
    assert {code: error_class(code) for code in expected} == expected
    assert issubclass(Aborted, Conflict) and issubclass(AlreadyExists, Conflict)
    assert all(status_code(code.value[0]) is code for code in grpc.StatusCode)
