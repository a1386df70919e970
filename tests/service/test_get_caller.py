"""GetCaller through the real gRPC server: a token learns its own permissions, tenants and
character access (what a client may offer), whatever its permissions; a call without a
token learns only that one is needed, a wrong token is refused; with authentication off
the answer says so and grants everything."""

from __future__ import annotations

import grpc
import pytest
from conftest import make_config, start_server

from memsvc.v1 import credentials_pb2, credentials_pb2_grpc


def _caller(handle, token: str | None) -> credentials_pb2.GetCallerResponse:
    stub = credentials_pb2_grpc.CredentialServiceStub(handle.channel(token))
    return stub.GetCaller(credentials_pb2.GetCallerRequest(), timeout=10)


def test_with_authentication_off_the_caller_may_do_everything(server):
    answer = _caller(server, None)
    assert answer.auth_required is False
    assert answer.credential.id == ""
    assert sorted(answer.credential.permissions) == ["admin", "read:memory", "write:memory"]
    assert list(answer.credential.tenants) == ["*"] and answer.credential.characters is True


@pytest.fixture
def secured(tmp_path):
    handle = start_server(make_config(tmp_path, api_tokens=("env-admin",)))
    yield handle
    handle.stop()


def test_each_token_sees_its_own_credential(secured):
    creds = secured.app.credentials
    reader = creds.create("reader-a", ["read:memory"], ["A", "B"], False).token
    writer = creds.create("ingest-only", ["write:memory"], ["A"], True).token
    answer = _caller(secured, reader)
    assert answer.auth_required is True
    assert (answer.credential.id, list(answer.credential.permissions)) == ("reader-a", ["read:memory"])
    assert list(answer.credential.tenants) == ["A", "B"] and answer.credential.characters is False
    # A token without read:memory may still ask who it is.
    answer = _caller(secured, writer)
    assert (answer.credential.id, list(answer.credential.permissions)) == ("ingest-only", ["write:memory"])
    assert answer.credential.characters is True
    answer = _caller(secured, "env-admin")
    assert (answer.credential.id, list(answer.credential.permissions)) == ("env:1", ["admin"])
    assert list(answer.credential.tenants) == ["*"]


def test_without_a_token_the_caller_learns_only_that_one_is_needed(secured):
    answer = _caller(secured, None)
    assert answer.auth_required is True
    assert answer.credential.id == "" and list(answer.credential.permissions) == []
    assert list(answer.credential.tenants) == [] and answer.credential.characters is False


@pytest.mark.parametrize("token", ["not-a-token", "msk_000000000000_" + "x" * 43])
def test_a_wrong_token_is_unauthenticated(secured, token):
    with pytest.raises(grpc.RpcError) as err:
        _caller(secured, token)
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
