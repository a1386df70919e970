"""Retrieval (ENGINE.md §5): candidates by strategy, keyword relevance, the strict budget.

This is the keyword tier: semantic and hybrid run on FTS5 (plus the newest rows for hybrid)
and say so in `Resolution.fallback_reason` until a vector tier is configured.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol, Sequence

from memsvc.core.models import KeywordHit, Memory, SearchScope, estimate_tokens, utcnow
from memsvc.core.text import normalize, scoring_tokens

RECENT_LIMIT = 100
KEYWORD_LIMIT = 100
BUDGET_RANGE = (1, 16000)
STRATEGY_ALIASES = {"recent": "exact", "exact": "exact", "semantic": "semantic", "hybrid": "hybrid"}

TIER_FTS = "fts5"
TIER_RECENT = "recent"


class SearchBackend(Protocol):
    def recent(self, scope: SearchScope, limit: int) -> list[Memory]: ...

    def search_keyword(self, scope: SearchScope, text: str, limit: int) -> list[KeywordHit]: ...


@dataclass(frozen=True)
class RetrievalRequest:
    api_key_id: str | None
    query: str = ""
    strategy: str = "hybrid"          # exact | semantic | hybrid ("recent" accepted)
    max_tokens: int = 2000
    scope: str = "apiKey"             # apiKey | session | global
    session_id: str | None = None
    retention_days: int = 30
    limit: int | None = None


@dataclass(frozen=True)
class RetrievedItem:
    memory: Memory
    score: float
    tokens: int
    tier: str
    fts_score: float | None = None
    vec_score: float | None = None


@dataclass(frozen=True)
class Resolution:
    strategy_used: str
    fallback_reason: str = ""
    embedding_source: str = "none"
    embedding_model: str = ""
    vector_store: str = "none"
    rerank_applied: bool = False


@dataclass(frozen=True)
class RetrievalResult:
    items: list[RetrievedItem]
    budget: int
    resolution: Resolution
    total_tokens: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "total_tokens", sum(i.tokens for i in self.items))


def _metadata_text(value: Any) -> str:
    """The metadata's values, not its keys: matching the JSON itself would make every
    query containing "source" or "language" hit every extracted fact."""
    if isinstance(value, dict):
        return " ".join(_metadata_text(v) for v in value.values())
    if isinstance(value, list):
        return " ".join(_metadata_text(v) for v in value)
    return "" if value is None else str(value)


def relevance(memory: Memory, phrase: str, tokens: Sequence[str]) -> float:
    """ENGINE.md §5 step 4, over content, key and metadata (lower-cased): +20 when the
    whole phrase occurs; per token +6 when the key contains it and +3 per occurrence in
    content and metadata. ("User prefers dark mode" / "preference:dark_mode" / "dark mode"
    → 38.)"""
    content = normalize(memory.content)
    key = normalize(memory.key or "")
    meta = normalize(_metadata_text(memory.metadata))
    score = 20.0 if phrase and (phrase in content or phrase in key or phrase in meta) else 0.0
    for token in tokens:
        if key and token in key:
            score += 6
        score += 3 * (content.count(token) + meta.count(token))
    return score


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
    return SearchScope(
        api_key_id=None if req.scope == "global" else req.api_key_id,
        now=now,
        created_after=now - timedelta(days=req.retention_days),
        session_only=req.scope == "session",
        session_id=req.session_id or None,
    )


def _phrase(query: str) -> str:
    return normalize(query).strip(" ?!.,;:。？！，")


def _newest_first(item: RetrievedItem) -> tuple[datetime, int]:
    return (item.memory.created_at, item.memory.memory_id)


def _rank(items: list[RetrievedItem]) -> list[RetrievedItem]:
    """Score descending, then newest first."""
    items = sorted(items, key=_newest_first, reverse=True)
    return sorted(items, key=lambda i: i.score, reverse=True)


class Retriever:
    """Runs one retrieval against a SearchBackend. Touches nothing: the caller records
    access for what it actually used."""

    def __init__(self, backend: SearchBackend):
        self._backend = backend

    def retrieve(self, req: RetrievalRequest, now: datetime | None = None) -> RetrievalResult:
        strategy = STRATEGY_ALIASES.get(req.strategy, "hybrid")
        if req.max_tokens <= 0:
            return RetrievalResult([], 0, Resolution(strategy_used="none", fallback_reason="maxTokens is 0"))
        budget = min(BUDGET_RANGE[1], max(BUDGET_RANGE[0], req.max_tokens))
        scope = scope_for(req, now or utcnow())
        query = req.query.strip()
        if strategy == "exact":
            ranked, resolution = self._exact(scope, query), Resolution(strategy_used="exact")
        elif strategy == "semantic":
            ranked, resolution = self._semantic_on_keywords(scope, query)
        else:
            ranked, resolution = self._hybrid_on_keywords(scope, query)
        return RetrievalResult(apply_budget(ranked, budget, req.limit), budget, resolution)

    def _recent_items(self, scope: SearchScope) -> list[RetrievedItem]:
        return [RetrievedItem(m, 0.0, estimate_tokens(m.content), TIER_RECENT)
                for m in self._backend.recent(scope, RECENT_LIMIT)]

    def _keyword_items(self, scope: SearchScope, query: str) -> list[RetrievedItem]:
        """FTS hits scored by relevance plus a (0, 1] share of the best bm25, so a stemmed
        or trigram match the substring score misses still counts as relevant."""
        hits = self._backend.search_keyword(scope, query, KEYWORD_LIMIT)
        if not hits:
            return []
        best = max(h.score for h in hits) or 1.0
        phrase, tokens = _phrase(query), scoring_tokens(query)
        return [RetrievedItem(h.memory, relevance(h.memory, phrase, tokens) + max(h.score, 0.0) / best,
                              estimate_tokens(h.memory.content), TIER_FTS, fts_score=h.score) for h in hits]

    def _scored(self, items: list[RetrievedItem], query: str) -> list[RetrievedItem]:
        """Relevance-score items that have no score yet; drop those scoring 0."""
        phrase, tokens = _phrase(query), scoring_tokens(query)
        out = []
        for item in items:
            score = item.score or relevance(item.memory, phrase, tokens)
            if score > 0:
                out.append(RetrievedItem(item.memory, score, item.tokens, item.tier, item.fts_score, item.vec_score))
        return out

    def _exact(self, scope: SearchScope, query: str) -> list[RetrievedItem]:
        recent = self._recent_items(scope)
        return _rank(self._scored(recent, query)) if query else recent

    def _semantic_on_keywords(self, scope: SearchScope, query: str) -> tuple[list[RetrievedItem], Resolution]:
        reason = "no embedding source is configured; semantic retrieval used the FTS5 keyword index"
        hits = _rank(self._keyword_items(scope, query)) if query else []
        if hits:
            return hits, Resolution(strategy_used=TIER_FTS, fallback_reason=reason)
        why = "no keyword match" if query else "no query"
        return self._recent_items(scope), Resolution(strategy_used=TIER_RECENT,
                                                     fallback_reason=f"{reason}; {why}, newest memories returned")

    def _hybrid_on_keywords(self, scope: SearchScope, query: str) -> tuple[list[RetrievedItem], Resolution]:
        reason = "no vector tier is available; hybrid retrieval used FTS5 keyword matches and the newest memories"
        resolution = Resolution(strategy_used=f"{TIER_FTS}+{TIER_RECENT}", fallback_reason=reason)
        if not query:
            return self._recent_items(scope), resolution
        merged = {item.memory.id: item for item in self._recent_items(scope)}
        merged.update({item.memory.id: item for item in self._keyword_items(scope, query)})
        return _rank(self._scored(list(merged.values()), query)), resolution
