"""memsvc.v1.SettingsService."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from memsvc.api import convert
from memsvc.api.blocking import run, run_shielded
from memsvc.characters.per_node import PerNodeCharacters
from memsvc.characters.service import Characters
from memsvc.core.introspection import Introspection
from memsvc.core.settings.memory import Settings
from memsvc.v1 import settings_pb2 as pb
from memsvc.v1 import settings_pb2_grpc

if TYPE_CHECKING:
    from memsvc.api.grpc_types import Context


class SettingsServicer(settings_pb2_grpc.SettingsServiceServicer):
    def __init__(self, settings: Settings, characters: Characters | PerNodeCharacters, introspection: Introspection):
        self._settings = settings
        self._characters = characters
        self._introspection = introspection

    async def GetQdrantSettings(self, request: pb.GetQdrantSettingsRequest, context: Context) -> pb.QdrantSettings:
        return convert.qdrant_settings_to_pb(await run(self._introspection.qdrant_settings))

    async def UpdateQdrantSettings(
        self, request: pb.UpdateQdrantSettingsRequest, context: Context
    ) -> pb.QdrantSettings:
        patch = convert.struct_to_dict(request.settings, "settings")
        return convert.qdrant_settings_to_pb(await run(self._introspection.update_qdrant_settings, patch))

    async def CheckQdrantHealth(self, request: pb.CheckQdrantHealthRequest, context: Context) -> pb.QdrantHealth:
        return convert.qdrant_health_to_pb(await run(self._introspection.qdrant_health))

    async def SearchQdrant(self, request: pb.SearchQdrantRequest, context: Context) -> pb.SearchQdrantResponse:
        started = time.perf_counter()
        hits = await run(
            self._introspection.search_qdrant,
            request.query,
            request.api_key_id,
            request.session_id,
            convert.optional(request, "top_k"),
        )
        return convert.qdrant_hits_to_pb(hits, (time.perf_counter() - started) * 1000)

    async def CleanupQdrant(self, request: pb.CleanupQdrantRequest, context: Context) -> pb.CleanupQdrantResponse:
        deleted = await run(self._introspection.cleanup_qdrant, convert.optional(request, "retention_days"))
        return pb.CleanupQdrantResponse(success=True, deleted_count=deleted)

    async def ListQdrantEmbeddingModels(
        self, request: pb.ListQdrantEmbeddingModelsRequest, context: Context
    ) -> pb.ListQdrantEmbeddingModelsResponse:
        return convert.qdrant_models_to_pb(await run(self._introspection.qdrant_models))

    async def GetMemorySettings(self, request: pb.GetMemorySettingsRequest, context: Context) -> pb.MemorySettings:
        return convert.settings_to_pb(await run(self._settings.get))

    async def UpdateMemorySettings(
        self, request: pb.UpdateMemorySettingsRequest, context: Context
    ) -> pb.MemorySettings:
        return convert.settings_to_pb(await run(self._settings.update, convert.settings_patch_from_pb(request)))

    async def GetReviewConfig(self, request: pb.GetToggleRequest, context: Context) -> pb.ToggleConfig:
        return convert.toggle_to_pb(await run(self._characters.get_review_config))

    async def SetReviewConfig(self, request: pb.SetToggleRequest, context: Context) -> pb.SetToggleResponse:
        return convert.toggle_set_to_pb(
            await run_shielded(self._characters.set_review_config, convert.toggle_value_from_pb(request))
        )

    async def GetPowerfulMemoryConfig(self, request: pb.GetToggleRequest, context: Context) -> pb.ToggleConfig:
        return convert.toggle_to_pb(await run(self._characters.get_powerful_memory_config))

    async def SetPowerfulMemoryConfig(self, request: pb.SetToggleRequest, context: Context) -> pb.SetToggleResponse:
        return convert.toggle_set_to_pb(
            await run_shielded(self._characters.set_powerful_memory_config, convert.toggle_value_from_pb(request))
        )
