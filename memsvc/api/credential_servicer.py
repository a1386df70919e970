"""memsvc.v1.CredentialService: credential management for admin callers (the access rule
table makes every RPC here admin-only, but GetCaller, which any caller may ask about itself)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memsvc.api import convert
from memsvc.api.blocking import run
from memsvc.core.credentials import Credentials, current_caller
from memsvc.v1 import credentials_pb2 as pb
from memsvc.v1 import credentials_pb2_grpc

if TYPE_CHECKING:
    from memsvc.api.grpc_types import Context


class CredentialServicer(credentials_pb2_grpc.CredentialServiceServicer):
    def __init__(self, credentials: Credentials):
        self._credentials = credentials

    async def CreateCredential(
        self, request: pb.CreateCredentialRequest, context: Context
    ) -> pb.CreateCredentialResponse:
        return convert.issued_to_pb(
            await run(
                self._credentials.create,
                request.id,
                list(request.permissions),
                list(request.tenants),
                request.characters,
            )
        )

    async def ListCredentials(self, request: pb.ListCredentialsRequest, context: Context) -> pb.ListCredentialsResponse:
        return convert.credentials_to_pb(await run(self._credentials.list))

    async def RevokeCredential(
        self, request: pb.RevokeCredentialRequest, context: Context
    ) -> pb.RevokeCredentialResponse:
        return convert.revoked_to_pb(await run(self._credentials.revoke, request.id))

    async def GetCaller(self, request: pb.GetCallerRequest, context: Context) -> pb.GetCallerResponse:
        return convert.caller_to_pb(current_caller())
