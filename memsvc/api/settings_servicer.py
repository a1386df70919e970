"""memsvc.v1.SettingsService."""

from __future__ import annotations

from memsvc.api import convert
from memsvc.api.blocking import run
from memsvc.api.pending import mark_pending
from memsvc.core.settings import Settings
from memsvc.v1 import settings_pb2 as pb
from memsvc.v1 import settings_pb2_grpc

QDRANT = "the Qdrant vector tier"
TOGGLES = "character memory toggles (review, Powerful Memory)"


class SettingsServicer(settings_pb2_grpc.SettingsServiceServicer):
    def __init__(self, settings: Settings):
        self._settings = settings

    async def GetMemorySettings(self, request: pb.GetMemorySettingsRequest, context) -> pb.MemorySettings:
        return convert.settings_to_pb(await run(self._settings.get))

    async def UpdateMemorySettings(self, request: pb.UpdateMemorySettingsRequest, context) -> pb.MemorySettings:
        return convert.settings_to_pb(await run(self._settings.update, convert.settings_patch_from_pb(request)))


mark_pending(SettingsServicer, {
    "GetQdrantSettings": QDRANT,
    "UpdateQdrantSettings": QDRANT,
    "CheckQdrantHealth": QDRANT,
    "SearchQdrant": QDRANT,
    "CleanupQdrant": QDRANT,
    "ListQdrantEmbeddingModels": QDRANT,
    "GetReviewConfig": TOGGLES,
    "SetReviewConfig": TOGGLES,
    "GetPowerfulMemoryConfig": TOGGLES,
    "SetPowerfulMemoryConfig": TOGGLES,
})
