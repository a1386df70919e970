"""Retrieval: candidates by strategy, keyword relevance, hybrid fusion,
the strict budget.

The keyword list comes from the SearchBackend, the vector list from a VectorLookup; without
a vector tier, semantic and hybrid run on FTS5 (plus the newest rows for hybrid) and say so
in `Resolution.fallback_reason`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from memsvc.core.retrieval import conversation_signals as signals
from memsvc.kernel import tracing
from memsvc.kernel.models import KeywordHit, Memory, SearchScope, estimate_tokens, utcnow
from memsvc.kernel.text import is_sentence, normalize, scoring_tokens
from memsvc.kernel.time_phrases import TimeWindow, time_windows

RECENT_LIMIT = 100
KEYWORD_LIMIT = 100
# For a sentence, whose keyword score is bm25 first (relevance a smaller second signal), the
# keyword candidates hybrid scores are the best SENTENCE_WINDOW × top_k by bm25: rows further
# down rarely reach the top. Scoring 40 rows instead of 100 halves the keyword tier's cost
# (bench/hot_path.py) and leaves the quality benches' numbers where they were
# (bench/quality_bench.py, bench/realtalk_bench.py).
SENTENCE_WINDOW = 2
# How much of the keyword list hybrid fuses: its best FUSED_KEYWORDS × top_k by keyword score
# (the whole window of a sentence). A question's evidence is often several turns, each sharing
# a word or two with it: cutting the list at top_k lost them (REALTALK R@10, both halves).
FUSED_KEYWORDS = 2
BUDGET_RANGE = (1, 16000)
STRATEGY_ALIASES = {"recent": "exact", "exact": "exact", "semantic": "semantic", "hybrid": "hybrid"}

#: The keyword tier, whichever engine answered (the working set, FTS5 or PostgreSQL's
#: full-text search). It was named "fts5" until it also served PostgreSQL.
TIER_KEYWORD = "keyword"
TIER_RECENT = "recent"
#: The hybrid tier's name is this and the fusion that ranked it (hybrid-gated-convex by
#: default, hybrid-gated-rrf, hybrid-rrf): what served, not one name for every fusion.
TIER_HYBRID = "hybrid"
# An item neither list found, brought in by a conversation signal (a neighbouring turn, a named date).
TIER_CONTEXT = "context"
#: RetrievedItem.via: the query names the day the memory happened.
NAMED_DATE = "named-date"
DEFAULT_RRF_K = 60
DEFAULT_VEC_TOP_K = 20
FUSION_GATED = "gated-rrf"
FUSION_RRF = "rrf"
FUSION_GATED_CONVEX = "gated-convex"
DEFAULT_FUSION = FUSION_GATED_CONVEX
# The keyword list's share of a gated-convex score, fitted on half of the REALTALK
# conversations and checked on the other half (bench/realtalk_bench.py).
KEYWORD_WEIGHT = 0.8
# For a sentence query the substring relevance counts 1/SENTENCE_RELEVANCE_SCALE beside the
# bm25 share (0..1): two more occurrences of the question's words (+6) weigh as much as 0.12
# of the best bm25. Fitted on half A of the REALTALK conversations (1000, a tie-break only, to
# 10), checked on half B (bench/realtalk_bench.py): R@5 and R@10 rose on both halves.
SENTENCE_RELEVANCE_SCALE = 50.0
# A keyword match is strong (worth fusing) with the whole query phrase or this many distinct query terms.
STRONG_MIN_TERMS = 2


class VectorUnavailable(Exception):
    """No vector tier could answer; `reason` (English) goes into the resolution."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class VectorMatch:
    memory: Memory
    # Higher is better: 1/(1+distance) for sqlite-vec, cosine similarity for Qdrant.
    score: float


@dataclass(frozen=True)
class VectorResult:
    matches: list[VectorMatch]
    tier: str  # "vector" (sqlite-vec) or "qdrant"
    resolution: Resolution  # embedding source/model, vector store, any fallback on the way


class VectorLookup(Protocol):
    """Embeds the query and searches the configured vector tier for the scope's best k;
    raises VectorUnavailable when no tier can answer. `settings` are the request's memory
    settings (None: the lookup reads the current ones)."""

    def __call__(self, scope: SearchScope, query: str, k: int, settings: Any = None) -> VectorResult: ...


class Reranker(Protocol):
    """Reorders items for the query, or returns None when reranking is off; raises on any
    failure (the caller fails open)."""

    def __call__(self, query: str, items: list[RetrievedItem], settings: Any = None) -> list[RetrievedItem] | None: ...


class SearchBackend(Protocol):
    def recent(self, scope: SearchScope, limit: int) -> list[Memory]: ...

    def search_keyword(self, scope: SearchScope, text: str, limit: int) -> list[KeywordHit]: ...

    def count_aged(self, scope: SearchScope) -> int:
        """Memories the scope hides for their age alone (older than retention, not kept)."""
        ...

    def happened_within(self, scope: SearchScope, windows: Sequence[TimeWindow], limit: int) -> list[Memory]:
        """Up to `limit` memories of the scope per window that happened inside it."""
        ...

    def neighbours(self, scope: SearchScope, memories: Sequence[Memory]) -> dict[str, list[Memory]]:
        """memory id → the scope's memories just before and after it in its session."""
        ...


@dataclass(frozen=True)
class RetrievalRequest:
    api_key_id: str | None
    query: str = ""
    strategy: str = "hybrid"  # exact | semantic | hybrid ("recent" accepted)
    max_tokens: int = 2000
    scope: str = "apiKey"  # apiKey | session | global
    session_id: str | None = None
    retention_days: int = 30  # 0 = no age limit
    limit: int | None = None
    #: The memory settings the request runs under, read once where it starts (None: each
    #: tier reads the current ones).
    settings: Any = field(default=None, compare=False)
    #: Answer with the memories as they were at this instant (None: as they are).
    as_of: datetime | None = None


@dataclass(frozen=True)
class RetrievedItem:
    memory: Memory
    score: float
    tokens: int
    tier: str
    fts_score: float | None = None
    vec_score: float | None = None
    #: Whose relevance a conversation signal lent this item: the ids of the found turns it
    #: neighbours, and NAMED_DATE when the query names the day it happened. The relevance
    #: floor lets it through when one of them passes (memsvc.core.retrieval.relevance_floor).
    via: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Resolution:
    strategy_used: str
    fallback_reason: str = ""
    embedding_source: str = "none"
    embedding_model: str = ""
    vector_store: str = "none"
    rerank_applied: bool = False
    #: The memory backend whose data answered: the built-in store ("sqlite" or "postgres",
    #: Retriever's backend_name), or the backend whose own search ran.
    backend: str = "sqlite"
    #: Memories of the scope not considered because they are older than retentionDays (and not kept).
    skipped_for_age: int = 0


@dataclass(frozen=True)
class RetrievalResult:
    items: list[RetrievedItem]
    budget: int
    resolution: Resolution
    total_tokens: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "total_tokens", sum(i.tokens for i in self.items))


def _occurs(text: str, folded: tuple[str, str, str]) -> bool:
    return bool(text) and any(text in part for part in folded)


def relevance(memory: Memory, phrase: str, tokens: Sequence[str]) -> float:
    """Keyword relevance over content, key and metadata (lower-cased): +20 when the
    whole phrase occurs; per token +6 when the key contains it and +3 per occurrence in
    content and metadata. ("User prefers dark mode" / "preference:dark_mode" / "dark mode"
    → 38.)"""
    return evidence(memory, phrase, tokens)[0]


def evidence(memory: Memory, phrase: str, tokens: Sequence[str]) -> tuple[float, bool]:
    """`relevance` and `strong_match` of one memory in one pass over its text: the keyword
    tier needs both for every candidate, and reading the text once halves its Python cost."""
    content, key, meta = memory.folded
    whole = _occurs(phrase, memory.folded)
    score = 20.0 if whole else 0.0
    found: set[str] = set()
    for token in tokens:
        in_key = bool(key) and token in key
        occurrences = content.count(token) + meta.count(token)
        score += (6 if in_key else 0) + 3 * occurrences
        if token and (in_key or occurrences):
            found.add(token)
    return score, whole or len(found) >= STRONG_MIN_TERMS


def keyword_score(rel: float, bm25_share: float, sentence: bool) -> float:
    """The keyword tier's score of a row from its substring relevance and its bm25 as a share
    of the best hit's (0 for a row FTS5 did not find).

    Keywords ("dark mode"): relevance first, the share breaking ties, as the substring rule
    says. A sentence ("What did Kevin cook last week?"): bm25 first, relevance /
    SENTENCE_RELEVANCE_SCALE second — counting substrings alone rewards long rows that repeat
    the question's commonest words, which bm25 weighs down, while bm25 alone misses what the
    substrings see (a word inside another, every repeat); on real conversations the two
    together find more of the right turns than either (bench/realtalk_bench.py)."""
    return bm25_share + rel / SENTENCE_RELEVANCE_SCALE if sentence else rel + bm25_share


def apply_budget(items: Sequence[RetrievedItem], budget: int, limit: int | None = None) -> list[RetrievedItem]:
    """Take every item that still fits, skipping (not stopping at) one that does not: a
    large memory early in the ranking must not hide smaller relevant ones after it."""
    taken: list[RetrievedItem] = []
    used = 0
    for item in items:
        if limit is not None and len(taken) >= limit:
            break
        if used + item.tokens <= budget:
            taken.append(item)
            used += item.tokens
    return taken


def scope_for(req: RetrievalRequest, now: datetime) -> SearchScope:
    """What the request may see; retention_days 0 sets no age limit."""
    return SearchScope(
        api_key_id=None if req.scope == "global" else req.api_key_id,
        now=now,
        created_after=now - timedelta(days=req.retention_days) if req.retention_days > 0 else None,
        session_only=req.scope == "session",
        session_id=req.session_id or None,
    )


def _phrase(query: str) -> str:
    return normalize(query).strip(" ?!.,;:。？！，")


def _rank_key(item: RetrievedItem) -> tuple[float, datetime, int]:
    return (item.score, item.memory.created_at, item.memory.memory_id)


def _rank(items: list[RetrievedItem]) -> list[RetrievedItem]:
    """Score descending, then newest first."""
    return sorted(items, key=_rank_key, reverse=True)


def _own_scale(ranked: Sequence[RetrievedItem], phrase: str, tokens: Sequence[str], sentence: bool) -> float:
    """What turns a memory's own keyword score into the ranking's scale, for a memory a
    conversation signal brings in. A keyword query's own score is in relevance points (3 per
    occurrence of a term), while a fused or vector ranking scores near 0..1: there the points
    are taken as a share of the best own score among the items that lend, times the best ranked
    score. Without it a question in Japanese that names a speaker ranked that speaker's
    neighbouring turns above everything the lists found (multilingual bench, R@5 of hybrid
    static 0.40 → 0.47). A sentence's own score (relevance / SENTENCE_RELEVANCE_SCALE) and a
    keyword ranking's scores are on the ranking's scale already: 1."""
    if not ranked or sentence or ranked[0].tier in (TIER_KEYWORD, TIER_RECENT):
        return 1.0
    best_own = max(
        keyword_score(relevance(item.memory, phrase, tokens), 0.0, sentence)
        for item in ranked[: signals.NEIGHBOUR_SOURCES]
    )
    return ranked[0].score / best_own if best_own > 0 else 0.0


def strong_match(memory: Memory, phrase: str, tokens: Sequence[str]) -> bool:
    """Keyword evidence worth fusing: the whole query phrase occurs (the +20 bonus) or
    at least STRONG_MIN_TERMS distinct query terms do. One shared word is what a paraphrase,
    or an unrelated memory, usually has in common with the query."""
    return evidence(memory, phrase, tokens)[1]


def rrf(ranked_lists: Sequence[Sequence[str]], k: int = DEFAULT_RRF_K) -> dict[str, float]:
    """Reciprocal rank fusion: Σ 1/(k + rank), ranks from 1, equal weights.
    First in both lists → 2/(k+1); first in one only → 1/(k+1)."""
    fused: dict[str, float] = {}
    for ranked in ranked_lists:
        for rank, item_id in enumerate(ranked, start=1):
            fused[item_id] = fused.get(item_id, 0.0) + 1.0 / (k + rank)
    return fused


@dataclass(frozen=True)
class Candidate:
    """One entry of a list to fuse, best first: the memory id, the list's own score (keyword
    relevance or vector similarity) and, for the keyword list, whether the match is strong."""

    id: str
    score: float
    strong: bool = True


@dataclass(frozen=True)
class Fusion:
    """How hybrid retrieval fuses the keyword and the vector list into one score per id."""

    name: str
    fuse: Callable[[Sequence[Candidate], Sequence[Candidate], int], dict[str, float]]


def _equal_rrf(keyword: Sequence[Candidate], vector: Sequence[Candidate], k: int) -> dict[str, float]:
    return rrf([[c.id for c in keyword], [c.id for c in vector]], k)


def _gated_rrf(keyword: Sequence[Candidate], vector: Sequence[Candidate], k: int) -> dict[str, float]:
    """RRF in which the keyword list keeps only its strong matches (ranked 1, 2, ... among
    themselves): a keyword list of one-word matches, the usual answer to a paraphrase, cannot
    outvote the vector list, while a phrase or multi-term match still counts in full."""
    return _equal_rrf([c for c in keyword if c.strong], vector, k)


def _shares(candidates: Sequence[Candidate]) -> dict[str, float]:
    """Each candidate's score as a share of the list's best (1.0 for the best)."""
    best = max((c.score for c in candidates), default=0.0)
    return {c.id: c.score / best if best > 0 else 1.0 for c in candidates}


def query_gate(keyword: Sequence[Candidate]) -> list[Candidate]:
    """The keyword list as gated-convex counts it, decided per query: in full when it holds a
    strong match, not at all when it holds none.

    A strong match shows that the query shares words with the memories, and then its one-word
    matches are likely about the question too: in a conversation the name and the topic of a
    question often sit in different turns, each sharing one word with it. A list of one-word
    matches only is the usual answer to a paraphrase, and the vector list ranks alone. On the
    REALTALK conversations this per-query gate found more of the right turns than gating each
    match (R@10 of hybrid static 0.534 → 0.56 with the speaker signal, on both halves) while the
    paraphrase bench kept its figures (bench/realtalk_bench.py, bench/quality_bench.py)."""
    return list(keyword) if any(c.strong for c in keyword) else []


def gated_convex(
    weight: float = KEYWORD_WEIGHT,
) -> Callable[[Sequence[Candidate], Sequence[Candidate], int], dict[str, float]]:
    """weight × (keyword score / best keyword score) + (1 − weight) × (vector score / best
    vector score), the keyword list counted by `query_gate`. Unlike RRF it keeps how far apart
    two candidates are: a turn that matches the question's rare words far better than the next
    one stays ahead of it, while a paraphrase with no strong keyword match is ranked by the
    vector list alone."""

    def fuse(keyword: Sequence[Candidate], vector: Sequence[Candidate], k: int) -> dict[str, float]:
        kw, vec = _shares(query_gate(keyword)), _shares(vector)
        return {i: weight * kw.get(i, 0.0) + (1.0 - weight) * vec.get(i, 0.0) for i in kw | vec}

    return fuse


# MEMORY_FUSION: gated-convex (default), gated-rrf or rrf (plain equal-weight RRF); measured in
# bench/quality_bench.py and bench/realtalk_bench.py.
FUSIONS: dict[str, Fusion] = {
    f.name: f
    for f in (
        Fusion(FUSION_GATED_CONVEX, gated_convex()),
        Fusion(FUSION_GATED, _gated_rrf),
        Fusion(FUSION_RRF, _equal_rrf),
    )
}


def hybrid_tier(fusion: Fusion) -> str:
    """The tier of a hybrid ranking: "hybrid-" and the fusion's name."""
    return f"{TIER_HYBRID}-{fusion.name}"


def is_hybrid(tier: str) -> bool:
    """Whether a tier is a hybrid ranking, whichever fusion ranked it."""
    return tier.startswith(TIER_HYBRID + "-")


class Retriever:
    """Runs one retrieval against a SearchBackend and, when given, a vector tier and a
    reranker. Touches nothing: the caller records access for what it actually used."""

    def __init__(
        self,
        backend: SearchBackend,
        vectors: VectorLookup | None = None,
        reranker: Reranker | None = None,
        rrf_k: int = DEFAULT_RRF_K,
        top_k: int = DEFAULT_VEC_TOP_K,
        fusion: Fusion = FUSIONS[DEFAULT_FUSION],
        backend_name: str = "sqlite",
    ):
        self._backend = backend
        #: What the resolution names as the backend that answered: the built-in store's kind.
        self._backend_name = backend_name
        self._vectors = vectors
        self._reranker = reranker
        self._rrf_k = rrf_k
        self._top_k = top_k
        self._fusion = fusion

    @property
    def vectors(self) -> VectorLookup | None:
        return self._vectors

    def over(self, backend: SearchBackend, vectors: VectorLookup | None) -> Retriever:
        """The same ranking (fusion, list sizes, reranker) over other sources: an owner's
        memories as they were at an instant (memsvc.core.retrieval.as_of)."""
        return Retriever(
            backend, vectors, self._reranker, self._rrf_k, self._top_k, self._fusion, backend_name=self._backend_name
        )

    def status(self) -> dict[str, Any]:
        """How hybrid lists are fused, for GetEngineStatus."""
        return {"fusion": self._fusion.name, "rrf_k": self._rrf_k, "list_top_k": self._top_k}

    def retrieve(self, req: RetrievalRequest, now: datetime | None = None) -> RetrievalResult:
        strategy = STRATEGY_ALIASES.get(req.strategy, "hybrid")
        if req.max_tokens <= 0:
            return RetrievalResult(
                [], 0, Resolution(strategy_used="none", fallback_reason="maxTokens is 0", backend=self._backend_name)
            )
        budget = min(BUDGET_RANGE[1], max(BUDGET_RANGE[0], req.max_tokens))
        scope = scope_for(req, now or utcnow())
        query = req.query.strip()
        if strategy == "exact":
            ranked, resolution = self._exact(scope, query), Resolution(strategy_used="exact")
        elif strategy == "semantic":
            ranked, resolution = self._semantic(scope, query, req.settings)
        else:
            ranked, resolution = self._hybrid(scope, query, req.settings)
        if query and ranked and strategy != "exact":
            ranked = self._in_conversation(scope, query, ranked)
        if self._reranker is not None and query and ranked and strategy != "exact":
            ranked, resolution = self._rerank(self._reranker, query, ranked, resolution, req.settings)
        resolution = replace(resolution, skipped_for_age=self._backend.count_aged(scope), backend=self._backend_name)
        return RetrievalResult(apply_budget(ranked, budget, req.limit), budget, resolution)

    def _in_conversation(self, scope: SearchScope, query: str, ranked: list[RetrievedItem]) -> list[RetrievedItem]:
        """The ranking with the conversation signals added: neighbouring turns of what it
        found, the memories of a date the query names, and the turns of a speaker it names
        (memsvc.core.retrieval.conversation_signals)."""
        sentence = is_sentence(query)
        phrase, tokens = _phrase(query), scoring_tokens(query)
        scale = _own_scale(ranked, phrase, tokens, sentence)

        def new_item(memory: Memory, gain: float) -> RetrievedItem:
            own = scale * keyword_score(relevance(memory, phrase, tokens), 0.0, sentence)
            return RetrievedItem(memory, own + gain, estimate_tokens(memory.content), TIER_CONTEXT)

        via: dict[str, set[str]] = {}
        turns = [item.memory for item in ranked[: signals.NEIGHBOUR_SOURCES] if signals.is_turn(item.memory)]
        if turns:
            near = self._backend.neighbours(scope, turns)
            ranked = signals.lend_to_neighbours(ranked, near, new_item)
            for source, memories in near.items():
                for memory in memories:
                    via.setdefault(memory.id, set()).add(source)
        windows = time_windows(query, scope.now)
        if windows:
            dated = self._backend.happened_within(scope, windows, signals.DATED_LIMIT)
            ranked = signals.favour_dates(ranked, windows, dated, new_item)
            for item in ranked:
                if any(w.holds(item.memory.happened_at) for w in windows):
                    via.setdefault(item.memory.id, set()).add(NAMED_DATE)
        ranked = signals.favour_named_speakers(ranked, query)
        return _rank(
            [replace(item, via=frozenset(via[item.memory.id])) if item.memory.id in via else item for item in ranked]
        )

    def _vector_result(self, scope: SearchScope, query: str, settings: Any) -> VectorResult:
        if self._vectors is None:
            raise VectorUnavailable("no embedding source is configured")
        if not query:
            raise VectorUnavailable("no query to embed")
        return self._vectors(scope, query, self._top_k, settings)

    def _semantic(self, scope: SearchScope, query: str, settings: Any) -> tuple[list[RetrievedItem], Resolution]:
        try:
            result = self._vector_result(scope, query, settings)
        except VectorUnavailable as exc:
            return self._semantic_on_keywords(scope, query, exc.reason)
        items = [
            RetrievedItem(m.memory, m.score, estimate_tokens(m.memory.content), result.tier, vec_score=m.score)
            for m in result.matches
        ]
        return sorted(items, key=lambda i: i.score, reverse=True), replace(result.resolution, strategy_used=result.tier)

    def _hybrid(self, scope: SearchScope, query: str, settings: Any) -> tuple[list[RetrievedItem], Resolution]:
        try:
            result = self._vector_result(scope, query, settings)
        except VectorUnavailable as exc:
            return self._hybrid_on_keywords(scope, query, exc.reason)
        window = SENTENCE_WINDOW * self._top_k if is_sentence(query) else KEYWORD_LIMIT
        scored = self._keyword_evidence(scope, query, window)
        strong = {item.memory.id: is_strong for item, is_strong in scored}
        keyword = _rank([item for item, _ in scored])[: FUSED_KEYWORDS * self._top_k]
        fts_scores = {i.memory.id: i.fts_score for i in keyword}
        vec_scores = {m.memory.id: m.score for m in result.matches}
        memories = {i.memory.id: i.memory for i in keyword} | {m.memory.id: m.memory for m in result.matches}
        fused = self._fusion.fuse(
            [Candidate(i.memory.id, i.score, strong[i.memory.id]) for i in keyword],
            [Candidate(m.memory.id, m.score) for m in result.matches],
            self._rrf_k,
        )
        tier = hybrid_tier(self._fusion)
        items = [
            RetrievedItem(
                memories[i],
                score,
                estimate_tokens(memories[i].content),
                tier,
                fts_score=fts_scores.get(i),
                vec_score=vec_scores.get(i),
            )
            for i, score in fused.items()
        ]
        return _rank(items), replace(result.resolution, strategy_used=tier)

    @staticmethod
    def _rerank(
        reranker: Reranker, query: str, ranked: list[RetrievedItem], resolution: Resolution, settings: Any
    ) -> tuple[list[RetrievedItem], Resolution]:
        """Fail open: any reranker failure keeps the original order and says why."""
        try:
            reranked = reranker(query, ranked, settings)
        except Exception as exc:  # noqa: BLE001 - the reranker is a remote dependency
            note = f"rerank failed ({type(exc).__name__}: {str(exc)[:200]}); original order kept"
            reason = f"{resolution.fallback_reason}; {note}" if resolution.fallback_reason else note
            return ranked, replace(resolution, fallback_reason=reason)
        if reranked is None:
            return ranked, resolution
        return reranked, replace(resolution, rerank_applied=True)

    def _recent_items(self, scope: SearchScope) -> list[RetrievedItem]:
        with tracing.span("recent_memories", {tracing.TIER: TIER_RECENT, tracing.LIMIT: RECENT_LIMIT}) as span:
            recent = self._backend.recent(scope, RECENT_LIMIT)
            span.set_attribute(tracing.HITS, len(recent))
        return [RetrievedItem(m, 0.0, estimate_tokens(m.content), TIER_RECENT) for m in recent]

    def _keyword_items(self, scope: SearchScope, query: str, limit: int = KEYWORD_LIMIT) -> list[RetrievedItem]:
        return [item for item, _ in self._keyword_evidence(scope, query, limit)]

    def _keyword_evidence(self, scope: SearchScope, query: str, limit: int) -> list[tuple[RetrievedItem, bool]]:
        """The best `limit` FTS hits by bm25, each scored by relevance plus a (0, 1] share of
        the best bm25 (so a stemmed or trigram match the substring score misses still
        counts), with whether the match is strong; in bm25 order."""
        with tracing.span("keyword_search", {tracing.TIER: TIER_KEYWORD, tracing.LIMIT: limit}) as span:
            hits = self._backend.search_keyword(scope, query, limit)
            span.set_attribute(tracing.HITS, len(hits))
        if not hits:
            return []
        best = max(h.score for h in hits) or 1.0
        phrase, tokens, sentence = _phrase(query), scoring_tokens(query), is_sentence(query)
        out: list[tuple[RetrievedItem, bool]] = []
        for h in hits:
            rel, strong = evidence(h.memory, phrase, tokens)
            out.append(
                (
                    RetrievedItem(
                        h.memory,
                        keyword_score(rel, max(h.score, 0.0) / best, sentence),
                        estimate_tokens(h.memory.content),
                        TIER_KEYWORD,
                        fts_score=h.score,
                    ),
                    strong,
                )
            )
        return out

    def _scored(self, items: list[RetrievedItem], query: str, sentence: bool = False) -> list[RetrievedItem]:
        """Relevance-score items that have no score yet (as `keyword_score` with no bm25
        share when `sentence`); drop those scoring 0."""
        phrase, tokens = _phrase(query), scoring_tokens(query)
        out = []
        for item in items:
            score = item.score or keyword_score(relevance(item.memory, phrase, tokens), 0.0, sentence)
            if score > 0:
                out.append(RetrievedItem(item.memory, score, item.tokens, item.tier, item.fts_score, item.vec_score))
        return out

    def _exact(self, scope: SearchScope, query: str) -> list[RetrievedItem]:
        recent = self._recent_items(scope)
        return _rank(self._scored(recent, query)) if query else recent

    def _semantic_on_keywords(
        self, scope: SearchScope, query: str, why_not: str
    ) -> tuple[list[RetrievedItem], Resolution]:
        reason = f"{why_not}; semantic retrieval used the FTS5 keyword index"
        hits = _rank(self._keyword_items(scope, query)) if query else []
        if hits:
            return hits, Resolution(strategy_used=TIER_KEYWORD, fallback_reason=reason)
        why = "no keyword match" if query else "no query"
        return self._recent_items(scope), Resolution(
            strategy_used=TIER_RECENT, fallback_reason=f"{reason}; {why}, newest memories returned"
        )

    def _hybrid_on_keywords(
        self, scope: SearchScope, query: str, why_not: str
    ) -> tuple[list[RetrievedItem], Resolution]:
        reason = f"{why_not}; hybrid retrieval used FTS5 keyword matches and the newest memories"
        resolution = Resolution(strategy_used=f"{TIER_KEYWORD}+{TIER_RECENT}", fallback_reason=reason)
        if not query:
            return self._recent_items(scope), resolution
        merged = {item.memory.id: item for item in self._recent_items(scope)}
        merged.update({item.memory.id: item for item in self._keyword_items(scope, query)})
        return _rank(self._scored(list(merged.values()), query, is_sentence(query))), resolution
