"""memsvc.v1.SettingsService."""

from __future__ import annotations

from memsvc.api.pending import mark_pending
from memsvc.v1 import settings_pb2_grpc

MEMORY_SETTINGS = "memory engine settings"
QDRANT = "the Qdrant vector tier"
TOGGLES = "character memory toggles (review, Powerful Memory)"


class SettingsServicer(settings_pb2_grpc.SettingsServiceServicer):
    pass


mark_pending(SettingsServicer, {
    "GetMemorySettings": MEMORY_SETTINGS,
    "UpdateMemorySettings": MEMORY_SETTINGS,
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
