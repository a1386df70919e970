"""memsvc.v1.EngineService: one line per RPC — convert, call the core (off the loop, or on it
while nothing waits: memsvc.api.blocking), convert."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

from memsvc.api import convert
from memsvc.api.blocking import run, run_inline_first
from memsvc.core.engine import Engine
from memsvc.core.introspection import Introspection
from memsvc.core.reindex import TERMINAL, Reindexer
from memsvc.v1 import engine_pb2 as pb
from memsvc.v1 import engine_pb2_grpc

if TYPE_CHECKING:
    from memsvc.api.grpc_types import Context


class EngineServicer(engine_pb2_grpc.EngineServiceServicer):
    def __init__(
        self,
        engine: Engine,
        introspection: Introspection,
        reindexer: Reindexer,
        ran: Callable[[str], None] = lambda where: None,
    ):
        self._engine = engine
        self._introspection = introspection
        self._reindexer = reindexer
        self._ran = ran  # hears where each hot-path call ran (memsvc.api.blocking.run_inline_first)

    async def GetEngineStatus(self, request: pb.GetEngineStatusRequest, context: Context) -> pb.EngineStatus:
        return convert.engine_status_to_pb(await run(self._introspection.engine_status))

    async def ListEmbeddingProviders(
        self, request: pb.ListEmbeddingProvidersRequest, context: Context
    ) -> pb.ListEmbeddingProvidersResponse:
        return convert.providers_to_pb(await run(self._introspection.providers))

    async def Reindex(self, request: pb.ReindexRequest, context: Context) -> AsyncIterator[pb.ReindexProgress]:
        """Preconditions are checked by `start`, before the first message, so a refusal is a
        real status (409/400 over REST); the job itself runs on its own thread."""
        job = await run(self._reindexer.start, request.force, request.limit, request.target, request.attach)
        cursor = 0
        while True:
            events = await run(job.wait_events, cursor)
            for event in events:
                yield convert.progress_to_pb(event)
            cursor += len(events)
            if events and events[-1].state in TERMINAL:
                return

    async def Retrieve(self, request: pb.RetrieveRequest, context: Context) -> pb.RetrieveResponse:
        args = convert.retrieve_args_from_pb(request)
        return convert.retrieval_to_pb(await run_inline_first(self._ran, self._engine.retrieve, **args))

    async def RetrievePreview(self, request: pb.RetrievePreviewRequest, context: Context) -> pb.RetrievePreviewResponse:
        args = convert.preview_args_from_pb(request)
        return convert.preview_to_pb(await run_inline_first(self._ran, self._engine.preview, **args))

    async def Inject(self, request: pb.InjectRequest, context: Context) -> pb.InjectResponse:
        call = convert.inject_call_from_pb(request, convert.metadata_pairs(context.invocation_metadata()))
        return convert.injected_to_pb(await run_inline_first(self._ran, self._engine.inject, call))

    async def Extract(self, request: pb.ExtractRequest, context: Context) -> pb.ExtractResponse:
        call = convert.extract_call_from_pb(request, convert.metadata_pairs(context.invocation_metadata()))
        return convert.extracted_to_pb(await run(self._engine.extract, call))

    async def Summarize(self, request: pb.SummarizeRequest, context: Context) -> pb.SummarizeResponse:
        if request.HasField("budget_tokens"):
            return convert.budget_summary_to_pb(
                await run(
                    self._engine.summarize_to_budget, request.api_key_id, request.session_id, request.budget_tokens
                )
            )
        return convert.summary_to_pb(
            await run(
                self._engine.summarize,
                convert.optional(request, "older_than_days"),
                request.api_key_id,
                request.dry_run,
                request.all_tenants,
            )
        )
