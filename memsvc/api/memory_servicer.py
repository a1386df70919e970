"""memsvc.v1.MemoryService: one line per RPC — convert, call the core off the loop, convert."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from memsvc.api import convert
from memsvc.api.blocking import run, run_shielded
from memsvc.characters.per_node import PerNodeCharacters
from memsvc.characters.service import Characters
from memsvc.core.change_feed import ChangeFeed
from memsvc.core.memories import Memories
from memsvc.v1 import memory_pb2 as pb
from memsvc.v1 import memory_pb2_grpc

if TYPE_CHECKING:
    from memsvc.api.grpc_types import Context


class MemoryServicer(memory_pb2_grpc.MemoryServiceServicer):
    def __init__(self, memories: Memories, characters: Characters | PerNodeCharacters, feed: ChangeFeed):
        self._memories = memories
        self._characters = characters
        self._feed = feed

    async def ListMemories(self, request: pb.ListMemoriesRequest, context: Context) -> pb.ListMemoriesResponse:
        return convert.listing_to_pb(await run(self._memories.list, convert.list_query_from_pb(request)))

    async def CreateMemory(self, request: pb.CreateMemoryRequest, context: Context) -> pb.CreateMemoryResponse:
        return convert.upsert_to_pb(await run(self._memories.create, convert.new_memory_from_pb(request)))

    async def CreateMemories(self, request: pb.CreateMemoriesRequest, context: Context) -> pb.CreateMemoriesResponse:
        # Shielded: once the items are read, the batch commits whole even if the client goes away.
        return convert.created_memories_to_pb(
            await run_shielded(self._memories.create_batch, convert.new_memories_from_pb(request))
        )

    async def ClearMemories(self, request: pb.ClearMemoriesRequest, context: Context) -> pb.ClearMemoriesResponse:
        return convert.cleared_to_pb(await run(self._memories.clear, convert.clear_filter_from_pb(request)))

    async def GetMemory(self, request: pb.GetMemoryRequest, context: Context) -> pb.Memory:
        return convert.memory_to_pb(await run(self._memories.get, request.id))

    async def UpdateMemory(self, request: pb.UpdateMemoryRequest, context: Context) -> pb.UpdateMemoryResponse:
        changes = convert.update_changes_from_pb(request)
        return convert.updated_to_pb(await run(self._memories.update, request.id, changes))

    async def DeleteMemory(self, request: pb.DeleteMemoryRequest, context: Context) -> pb.DeleteMemoryResponse:
        await run(self._memories.delete, request.id)
        return convert.deleted_to_pb()

    async def GetMemoryHistory(
        self, request: pb.GetMemoryHistoryRequest, context: Context
    ) -> pb.GetMemoryHistoryResponse:
        return convert.history_to_pb(
            await run(self._memories.history, request.id, convert.optional(request, "limit"), request.page_token)
        )

    async def WatchMemories(self, request: pb.WatchMemoriesRequest, context: Context) -> AsyncIterator[pb.MemoryEvent]:
        events = self._feed.follow(request.api_key_id, request.resume_token, request.stop_when_caught_up, run)
        async for item in events:
            yield convert.memory_event_to_pb(item)

    async def CheckHealth(self, request: pb.CheckHealthRequest, context: Context) -> pb.CheckHealthResponse:
        return convert.health_to_pb(await run(self._memories.check_health))

    # ---- character memory ----

    async def ListRecentFiles(self, request: pb.ListRecentFilesRequest, context: Context) -> pb.ListRecentFilesResponse:
        return convert.recent_files_to_pb(await run(self._characters.list_recent_files))

    async def GetRecentFile(self, request: pb.GetRecentFileRequest, context: Context) -> pb.GetRecentFileResponse:
        return convert.snapshot_to_pb(await run(self._characters.get_recent_file, request.filename))

    async def SaveRecentFile(self, request: pb.SaveRecentFileRequest, context: Context) -> pb.SaveRecentFileResponse:
        # Shielded: once its checks pass, a save completes even if the client goes away.
        return convert.saved_to_pb(
            await run_shielded(self._characters.save_recent_file, convert.save_request_from_pb(request))
        )

    async def AppendRecentMessages(
        self, request: pb.AppendRecentMessagesRequest, context: Context
    ) -> pb.AppendRecentMessagesResponse:
        return convert.appended_to_pb(
            await run(
                self._characters.append_recent_messages, request.character, convert.chat_items_from_pb(request.messages)
            )
        )

    async def RenameCharacter(self, request: pb.RenameCharacterRequest, context: Context) -> pb.RenameCharacterResponse:
        call = convert.rename_request_from_pb(request, convert.metadata_pairs(context.invocation_metadata()))
        return convert.renamed_to_pb(await run_shielded(self._characters.rename, call))

    async def ScanLegacy(self, request: pb.ScanLegacyRequest, context: Context) -> pb.ScanLegacyResponse:
        return convert.legacy_scan_to_pb(await run(self._characters.scan_legacy))

    async def PurgeLegacy(self, request: pb.PurgeLegacyRequest, context: Context) -> pb.PurgeLegacyResponse:
        return convert.purged_to_pb(await run(self._characters.purge_legacy, convert.purge_paths_from_pb(request)))
