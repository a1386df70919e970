"""memsvc.v1.MemoryService: one line per RPC — convert, call the core off the loop, convert."""

from __future__ import annotations

from memsvc.api import convert
from memsvc.api.blocking import run
from memsvc.api.pending import mark_pending
from memsvc.core.memories import Memories
from memsvc.v1 import memory_pb2 as pb
from memsvc.v1 import memory_pb2_grpc

CHARACTER_MEMORY = "character memory (recent-history files, rename, legacy storage)"


class MemoryServicer(memory_pb2_grpc.MemoryServiceServicer):
    def __init__(self, memories: Memories):
        self._memories = memories

    async def ListMemories(self, request: pb.ListMemoriesRequest, context) -> pb.ListMemoriesResponse:
        return convert.listing_to_pb(await run(self._memories.list, convert.list_query_from_pb(request)))

    async def CreateMemory(self, request: pb.CreateMemoryRequest, context) -> pb.CreateMemoryResponse:
        return convert.upsert_to_pb(await run(self._memories.create, convert.new_memory_from_pb(request)))

    async def ClearMemories(self, request: pb.ClearMemoriesRequest, context) -> pb.ClearMemoriesResponse:
        return convert.cleared_to_pb(await run(self._memories.clear, convert.clear_filter_from_pb(request)))

    async def GetMemory(self, request: pb.GetMemoryRequest, context) -> pb.Memory:
        return convert.memory_to_pb(await run(self._memories.get, request.id))

    async def UpdateMemory(self, request: pb.UpdateMemoryRequest, context) -> pb.UpdateMemoryResponse:
        changes = convert.update_changes_from_pb(request)
        return convert.updated_to_pb(await run(self._memories.update, request.id, changes))

    async def DeleteMemory(self, request: pb.DeleteMemoryRequest, context) -> pb.DeleteMemoryResponse:
        await run(self._memories.delete, request.id)
        return convert.deleted_to_pb()

    async def CheckHealth(self, request: pb.CheckHealthRequest, context) -> pb.CheckHealthResponse:
        return convert.health_to_pb(await run(self._memories.check_health))


mark_pending(MemoryServicer, {
    "ListRecentFiles": CHARACTER_MEMORY,
    "GetRecentFile": CHARACTER_MEMORY,
    "SaveRecentFile": CHARACTER_MEMORY,
    "AppendRecentMessages": CHARACTER_MEMORY,
    "RenameCharacter": CHARACTER_MEMORY,
    "ScanLegacy": CHARACTER_MEMORY,
    "PurgeLegacy": CHARACTER_MEMORY,
})
