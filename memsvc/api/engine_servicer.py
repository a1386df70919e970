"""memsvc.v1.EngineService."""

from __future__ import annotations

from memsvc.api.pending import mark_pending
from memsvc.v1 import engine_pb2_grpc

KEYWORD_ENGINE = "the memory engine (extraction, keyword retrieval, injection, summarization)"
VECTOR_ENGINE = "embeddings and vector tiers"


class EngineServicer(engine_pb2_grpc.EngineServiceServicer):
    pass


mark_pending(EngineServicer, {
    "Retrieve": KEYWORD_ENGINE,
    "Inject": KEYWORD_ENGINE,
    "Extract": KEYWORD_ENGINE,
    "RetrievePreview": KEYWORD_ENGINE,
    "Summarize": KEYWORD_ENGINE,
    "ListEmbeddingProviders": VECTOR_ENGINE,
    "GetEngineStatus": VECTOR_ENGINE,
    "Reindex": VECTOR_ENGINE,
}, streaming=frozenset({"Reindex"}))
