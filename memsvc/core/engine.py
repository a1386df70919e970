"""The engine's use cases, as the EngineService RPCs need them: retrieve (hot path),
preview, inject, extract, summarize. Settings decide what runs; this module never sees
protobuf and never opens the database itself."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from memsvc.core.access import AccessRecorder
from memsvc.core.background import BackgroundWriter
from memsvc.core.credentials import retrieval_scope
from memsvc.core.embedding_port import Embeddings
from memsvc.core.extraction.facts import Fact, extract_facts, fact_metadata
from memsvc.core.extraction.speakers import ASSISTANT, USER
from memsvc.core.injection.inject import Injection, InjectOptions, detect_format, inject, no_memory_requested
from memsvc.core.memories import (
    MAX_ID_CHARS,
    NO_HISTORY,
    DraftStore,
    MemoryEvents,
    NoEvents,
    authored,
    store_drafts,
    validate_new,
)
from memsvc.core.retrieval.as_of import PastSource, past_retrieval
from memsvc.core.retrieval.ranking import (
    BUDGET_RANGE,
    STRATEGY_ALIASES,
    Resolution,
    RetrievalRequest,
    RetrievalResult,
    Retriever,
    SearchBackend,
    apply_budget,
)
from memsvc.core.retrieval.relevance_floor import (
    FlooredResult,
    above_floor,
    floor_for,
    limit_problem,
    min_score_problem,
    queryless_min_score,
)
from memsvc.core.settings.memory import SCOPES, Settings
from memsvc.core.summarization import BudgetOutcome, SummaryBackend, SummaryOutcome, summarize, summarize_to_budget
from memsvc.kernel.backend import InTransaction, MemoryBackend
from memsvc.kernel.errors import PermissionDeniedError, PreconditionError, Violations
from memsvc.kernel.models import Memory, NewMemory, UpsertResult, utcnow

MAX_QUERY_CHARS = 8192
PREVIEW_LIMIT_RANGE = (1, 100)
PREVIEW_DEFAULT_LIMIT = 20
EXTRACTION_FAILED = "memory.extraction.background.failed"
# How far after now an asOf may lie: a caller's clock may run a little ahead of ours.
AS_OF_LEEWAY = timedelta(minutes=1)


class EngineBackend(SearchBackend, SummaryBackend, Protocol):
    def create_many(
        self, memories: Sequence[NewMemory], in_transaction: InTransaction | None = None
    ) -> list[UpsertResult]: ...

    def create_each(
        self, memories: Sequence[NewMemory], in_transaction: InTransaction | None = None
    ) -> list[UpsertResult | Exception]: ...

    # A plain list counts 1 an id; a mapping gives each id's count (memsvc.core.access).
    def touch(self, ids: Sequence[str] | Mapping[str, int]) -> None: ...

    def snapshot(self) -> AbstractContextManager[object]:
        """A block in which every read of this thread sees one committed state."""
        ...


@dataclass(frozen=True)
class InjectCall:
    body: dict[str, Any]
    provider: str = ""
    model: str = ""
    api_key_id: str = ""
    session_id: str = ""
    no_memory: bool = False
    options: InjectOptions = InjectOptions()
    headers: Sequence[tuple[str, str]] = ()
    limit: int | None = None  # at most this many memories (1..100)
    min_score: float | None = None  # relevance floor 0..1; None: Inject's default floor
    as_of: datetime | None = None  # the memories as they were then; None: as they are


@dataclass(frozen=True)
class InjectOutcome:
    injection: Injection
    memory_ids: list[str] = field(default_factory=list)
    tokens: int = 0
    skipped_reason: str = ""
    below_min_score: int = 0
    #: Memories the retrieval behind the injection left out for their age (retentionDays).
    skipped_for_age: int = 0


@dataclass(frozen=True)
class ExtractCall:
    text: str = ""
    user_message: str = ""
    assistant_message: str = ""
    api_key_id: str = ""
    session_id: str = ""
    dry_run: bool = False
    wait: bool = False
    no_memory: bool = False
    headers: Sequence[tuple[str, str]] = ()


@dataclass(frozen=True)
class ExtractOutcome:
    facts: list[Fact]
    stored: int = 0
    accepted: bool = False
    skipped_reason: str = ""


def _check_strategy(v: Violations, strategy: str) -> None:
    if strategy and strategy not in STRATEGY_ALIASES:
        v.add("strategy", f"must be one of {', '.join(STRATEGY_ALIASES)}")


def _check_budget(v: Violations, max_tokens: int | None, field_name: str = "maxTokens") -> None:
    if max_tokens is not None and not BUDGET_RANGE[0] <= max_tokens <= BUDGET_RANGE[1]:
        v.add(field_name, f"must be between {BUDGET_RANGE[0]} and {BUDGET_RANGE[1]}")


def _check_text(v: Violations, name: str, value: str, limit: int) -> None:
    if len(value) > limit:
        v.add(name, f"must be at most {limit} characters")


def _check_as_of(v: Violations, as_of: datetime | None, has_owner: bool) -> None:
    if as_of is None:
        return
    if as_of > utcnow() + AS_OF_LEEWAY:
        v.add("asOf", "is in the future")
    if not has_owner:
        v.add("asOf", "needs an apiKeyId: memories are kept as they were per owner")


def _check_selection(v: Violations, limit: int | None, min_score: float | None) -> None:
    for name, problem in (("limit", limit_problem(limit)), ("minScore", min_score_problem(min_score))):
        if problem:
            v.add(name, problem)


#: Retrieval through a pluggable primary backend's own search; None when the built-in store
#: is the primary (see memsvc.core.backend_manager.BackendManager.retrieve).
BackendRetrieval = Callable[[RetrievalRequest], "RetrievalResult | None"]


class Engine:
    def __init__(
        self,
        backend: EngineBackend,
        settings: Settings,
        background: BackgroundWriter,
        retriever: Retriever | None = None,
        events: MemoryEvents | None = None,
        on_retrieval: Callable[[Resolution], None] | None = None,
        access_delay_s: float = 0.0,
        writer: MemoryBackend | None = None,
        backend_retrieval: BackendRetrieval | None = None,
        past: PastSource | None = None,
        embeddings: Embeddings | None = None,
        keeps_history: Callable[[], bool] = lambda: True,
    ):
        """`writer` stores extracted facts (the backend router: the primary backend), by
        default `backend`; `backend_retrieval` answers retrievals when the primary is not the
        built-in store. `past` (the built-in store) answers retrievals with asOf while
        `keeps_history()` (it is the primary), with `embeddings` for superseded versions."""
        self._past = past
        self._embeddings = embeddings
        self._keeps_history = keeps_history
        self._backend = backend
        self._writer: DraftStore = writer or backend
        self._backend_retrieval: BackendRetrieval = backend_retrieval or (lambda request: None)
        self._settings = settings
        self._retriever = retriever or Retriever(backend)
        self._background = background
        self._events: MemoryEvents = events or NoEvents()
        self._on_retrieval = on_retrieval or (lambda resolution: None)
        self.access = AccessRecorder(backend.touch, background, access_delay_s)

    # ---- retrieval ----

    def retrieve(
        self,
        api_key_id: str,
        query: str = "",
        session_id: str = "",
        strategy: str = "",
        max_tokens: int | None = None,
        scope: str = "",
        limit: int | None = None,
        min_score: float | None = None,
        as_of: datetime | None = None,
    ) -> FlooredResult:
        """The hot path. Records access on what it returns. `min_score` None: Retrieve's
        default relevance floor (memsvc.core.retrieval.relevance_floor); 0 keeps every ranked candidate.

        Everything it reads (settings, vector state, vectors, keyword hits) comes from one
        snapshot, and the settings are read once and travel with the request: one Retrieve
        answers from one consistent state, and pays for one read transaction."""
        with self._backend.snapshot():
            return self._retrieve(
                api_key_id,
                query,
                session_id,
                strategy,
                max_tokens,
                scope,
                limit,
                queryless_min_score(min_score, query),
                search=True,
                as_of=as_of,
            )

    def _retrieve(
        self,
        api_key_id: str,
        query: str,
        session_id: str,
        strategy: str,
        max_tokens: int | None,
        scope: str,
        limit: int | None,
        min_score: float | None,
        *,
        search: bool = False,
        as_of: datetime | None = None,
    ) -> FlooredResult:
        """`search`: Retrieve's default floor when `min_score` is None, else Inject's."""
        v = Violations()
        _check_strategy(v, strategy)
        _check_budget(v, max_tokens)
        _check_selection(v, limit, min_score)
        _check_text(v, "query", query, MAX_QUERY_CHARS)
        if scope and scope not in SCOPES:
            v.add("scope", f"must be one of {', '.join(SCOPES)}")
        settings = self._settings.get()
        if not api_key_id and (scope or settings.scope) != "global":
            v.add("apiKeyId", "is required")
        _check_text(v, "apiKeyId", api_key_id, MAX_ID_CHARS)
        _check_as_of(v, as_of, bool(api_key_id) and (scope or settings.scope) != "global")
        v.raise_if_any()
        if scope == "global" and settings.scope != "global":
            # Reading every tenant's memories is an operator's decision (the scope setting),
            # never a caller's.
            raise PermissionDeniedError("scope global is not enabled in the memory settings")
        if not settings.enabled:
            return FlooredResult([], 0, Resolution(strategy_used="none", fallback_reason="memory is disabled"))
        result = self._floored(
            RetrievalRequest(
                api_key_id=api_key_id,
                query=query,
                strategy=strategy or settings.strategy,
                max_tokens=settings.max_tokens if max_tokens is None else max_tokens,
                scope=retrieval_scope(scope or settings.scope),
                session_id=session_id or None,
                retention_days=settings.retention_days,
                settings=settings,
                as_of=as_of,
            ),
            limit,
            min_score,
            search,
        )
        self.access.record(item.memory.id for item in result.items)
        self._on_retrieval(result.resolution)
        return result

    def _floored(
        self, request: RetrievalRequest, limit: int | None, min_score: float | None, search: bool
    ) -> FlooredResult:
        """The relevance floor first, then the budget and the limit: candidates are fetched
        with the widest budget, so an item below the floor never takes budget or a place in
        the limit that an item above it needs."""
        if request.max_tokens <= 0:
            raw = self._run(request)
            return FlooredResult(raw.items, raw.budget, raw.resolution)
        raw = self._run(replace(request, max_tokens=BUDGET_RANGE[1]))
        floor = floor_for(min_score, raw.resolution.embedding_source, search=search)
        kept, dropped = above_floor(raw.items, request.query, floor, raw.resolution.vector_store)
        budget = min(BUDGET_RANGE[1], max(BUDGET_RANGE[0], request.max_tokens))
        return FlooredResult(
            apply_budget(kept, budget, limit), budget, raw.resolution, below_min_score=dropped, floor=floor
        )

    def preview(
        self,
        query: str,
        api_key_id: str = "",
        session_id: str = "",
        strategy: str = "",
        max_tokens: int | None = None,
        limit: int | None = None,
        as_of: datetime | None = None,
    ) -> RetrievalResult:
        """A dry run of retrieval: the same filters, nothing touched, memory on or off."""
        v = Violations()
        _check_as_of(v, as_of, bool(api_key_id))
        if not query.strip():
            v.add("query", "is required")
        _check_text(v, "query", query, MAX_QUERY_CHARS)
        _check_strategy(v, strategy)
        _check_budget(v, max_tokens)
        if limit is not None and not PREVIEW_LIMIT_RANGE[0] <= limit <= PREVIEW_LIMIT_RANGE[1]:
            v.add("limit", f"must be between {PREVIEW_LIMIT_RANGE[0]} and {PREVIEW_LIMIT_RANGE[1]}")
        v.raise_if_any()
        with self._backend.snapshot():
            settings = self._settings.get()
            scope = retrieval_scope(settings.scope if api_key_id else "global")
            return self._run(
                RetrievalRequest(
                    api_key_id=api_key_id or None,
                    query=query,
                    strategy=strategy or "hybrid",
                    max_tokens=2000 if max_tokens is None else max_tokens,
                    scope=scope,
                    session_id=session_id or None,
                    retention_days=settings.retention_days,
                    limit=PREVIEW_DEFAULT_LIMIT if limit is None else limit,
                    settings=settings,
                    as_of=as_of,
                )
            )

    def _run(self, request: RetrievalRequest) -> RetrievalResult:
        """The primary backend's own search when it is not the built-in store, else the store's
        tiers (over the memories as they were, for asOf)."""
        if request.as_of is not None:
            if self._past is None or not self._keeps_history():
                raise PreconditionError(NO_HISTORY, reason="NO_HISTORY")
            return past_retrieval(self._past, self._retriever, self._embeddings, request, request.as_of)
        result = self._backend_retrieval(request)
        return result if result is not None else self._retriever.retrieve(request)

    # ---- injection ----

    def inject(self, call: InjectCall) -> InjectOutcome:
        """Never fails the chat request over memory: every reason not to inject returns the
        body unchanged with the reason. Only an out-of-range `limit` or `minScore` is refused,
        as any bad argument is, before anything else happens."""
        v = Violations()
        _check_selection(v, call.limit, call.min_score)
        _check_as_of(v, call.as_of, True)
        v.raise_if_any()
        with self._backend.snapshot():  # the retrieval below shares it: one snapshot per Inject
            return self._inject(call)

    def _inject(self, call: InjectCall) -> InjectOutcome:
        unchanged = Injection(call.body, False, None, None)
        fmt = detect_format(call.body, call.provider)
        reason = self._skip_reason(call.api_key_id, call.no_memory, call.headers)
        if not reason and self._settings.get().max_tokens <= 0:
            reason = "maxTokens is 0"
        if not reason and fmt is None:
            reason = "the request is in no known chat format (messages, input or contents)"
        if reason or fmt is None:
            return InjectOutcome(unchanged, skipped_reason=reason)
        result = self._retrieve(
            call.api_key_id[:MAX_ID_CHARS],
            fmt.query(call.body)[:MAX_QUERY_CHARS],
            call.session_id[:MAX_ID_CHARS],
            "",
            None,
            "",
            call.limit,
            call.min_score,
            as_of=call.as_of,
        )
        below, aged = result.below_min_score, result.resolution.skipped_for_age
        if not result.items:
            why = f"no memory reached the relevance floor ({below} below minScore)" if below else "no relevant memories"
            return InjectOutcome(unchanged, skipped_reason=why, below_min_score=below, skipped_for_age=aged)
        injection = inject(call.body, [i.memory.content for i in result.items], call.provider, call.model, call.options)
        return InjectOutcome(
            injection,
            [i.memory.id for i in result.items],
            result.total_tokens,
            below_min_score=below,
            skipped_for_age=aged,
        )

    def _skip_reason(self, api_key_id: str, no_memory: bool, headers: Sequence[tuple[str, str]]) -> str:
        if no_memory or no_memory_requested(headers):
            return "no-memory requested"
        if not api_key_id:
            return "no apiKeyId"
        if not self._settings.get().enabled:
            return "memory is disabled"
        return ""

    # ---- extraction ----

    def extract(self, call: ExtractCall) -> ExtractOutcome:
        """Facts from the texts; stored now (wait), in the background, or not at all (dry
        run, disabled, no owner, opt-out)."""
        facts = self._facts((call.text, USER), (call.user_message, USER), (call.assistant_message, ASSISTANT))
        if call.dry_run:
            return ExtractOutcome(facts, skipped_reason="dry run")
        reason = self._skip_reason(call.api_key_id, call.no_memory, call.headers)
        if reason or not facts:
            return ExtractOutcome(facts, skipped_reason=reason or "no facts found")
        drafts = [authored(self._draft(fact, call.api_key_id, call.session_id)) for fact in facts]
        if call.wait:
            return ExtractOutcome(facts, stored=self._store(drafts))
        self._background.submit(EXTRACTION_FAILED, self._store, drafts)
        return ExtractOutcome(facts, accepted=True)

    def _store(self, drafts: list[NewMemory]) -> int:
        """All facts of a call or none, with their vectors, in one transaction."""
        return len(store_drafts(self._writer, self._events, drafts, each=False))

    @staticmethod
    def _facts(*turns: tuple[str, str]) -> list[Fact]:
        """The user's facts of each (text, speaker): `text` and the user message are the
        user's words, the assistant reply gives only what it restates about the user."""
        seen: dict[str, Fact] = {}
        for text, speaker in turns:
            for fact in extract_facts(text, speaker) if text else []:
                seen.setdefault(fact.key, fact)
        return list(seen.values())

    @staticmethod
    def _draft(fact: Fact, api_key_id: str, session_id: str) -> NewMemory:
        """Validated like any CreateMemory, so a bad owner is refused before acknowledging."""
        return validate_new(
            NewMemory(
                api_key_id=api_key_id,
                session_id=session_id or None,
                type=fact.type,
                key=fact.key,
                content=fact.content,
                metadata=fact_metadata(fact, utcnow()),
            )
        )

    # ---- summarization ----

    def summarize(
        self, older_than_days: int | None, api_key_id: str, dry_run: bool, all_tenants: bool = False
    ) -> SummaryOutcome:
        outcome = summarize(self._backend, older_than_days, api_key_id or None, dry_run, all_tenants)
        self._events.written(outcome.summary_ids)
        return outcome

    def summarize_to_budget(self, api_key_id: str, session_id: str = "", max_tokens: int = 4000) -> BudgetOutcome:
        v = Violations()
        if not api_key_id:
            v.add("apiKeyId", "is required")
        _check_budget(v, max_tokens, "budgetTokens")
        v.raise_if_any()
        memories: list[Memory] = self._backend.older_than(api_key_id, utcnow(), session_id or None)
        outcome = summarize_to_budget(self._backend, memories, max_tokens)
        self._events.written(outcome.rewritten_ids)
        return outcome
