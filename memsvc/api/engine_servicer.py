"""memsvc.v1.EngineService: one line per RPC — convert, call the core off the loop, convert."""

from __future__ import annotations

from memsvc.api import convert
from memsvc.api.blocking import run
from memsvc.api.pending import mark_pending
from memsvc.core.engine import Engine
from memsvc.v1 import engine_pb2 as pb
from memsvc.v1 import engine_pb2_grpc

VECTOR_ENGINE = "embeddings and vector tiers"


class EngineServicer(engine_pb2_grpc.EngineServiceServicer):
    def __init__(self, engine: Engine):
        self._engine = engine

    async def Retrieve(self, request: pb.RetrieveRequest, context) -> pb.RetrieveResponse:
        return convert.retrieval_to_pb(await run(self._engine.retrieve, **convert.retrieve_args_from_pb(request)))

    async def RetrievePreview(self, request: pb.RetrievePreviewRequest, context) -> pb.RetrievePreviewResponse:
        return convert.preview_to_pb(await run(self._engine.preview, **convert.preview_args_from_pb(request)))

    async def Inject(self, request: pb.InjectRequest, context) -> pb.InjectResponse:
        call = convert.inject_call_from_pb(request, convert.metadata_pairs(context.invocation_metadata()))
        return convert.injected_to_pb(await run(self._engine.inject, call))

    async def Extract(self, request: pb.ExtractRequest, context) -> pb.ExtractResponse:
        call = convert.extract_call_from_pb(request, convert.metadata_pairs(context.invocation_metadata()))
        return convert.extracted_to_pb(await run(self._engine.extract, call))

    async def Summarize(self, request: pb.SummarizeRequest, context) -> pb.SummarizeResponse:
        if request.HasField("budget_tokens"):
            return convert.budget_summary_to_pb(await run(
                self._engine.summarize_to_budget, request.api_key_id, request.session_id, request.budget_tokens))
        return convert.summary_to_pb(await run(
            self._engine.summarize, convert.optional(request, "older_than_days"), request.api_key_id,
            request.dry_run, request.all_tenants))


mark_pending(EngineServicer, {
    "ListEmbeddingProviders": VECTOR_ENGINE,
    "GetEngineStatus": VECTOR_ENGINE,
    "Reindex": VECTOR_ENGINE,
}, streaming=frozenset({"Reindex"}))
