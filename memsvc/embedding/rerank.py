"""Rerank: `POST {base}/v1/rerank {model, query, documents, top_n}` with the endpoint's own
credentials (a rerank call without them silently does nothing),
a 5 s timeout and the URL policy; any failure is a RerankError and the engine fails open.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from memsvc.embedding import _http
from memsvc.kernel.embedding_errors import RerankError

RERANK_TIMEOUT_S = 5.0


def rerank_url(base_url: str) -> str:
    """`{base}/v1/rerank`; a base that already ends in /v1 (as embedding bases do) is not doubled."""
    base = base_url.rstrip("/")
    base = base.removesuffix("/v1")
    return base + "/v1/rerank"


class RerankClient:
    def __init__(self, timeout_s: float = RERANK_TIMEOUT_S):
        self._timeout_s = timeout_s
        self._client = _http.make_client(timeout_s)

    def close(self) -> None:
        self._client.close()

    def rerank(
        self,
        base_url: str,
        api_key: str | None,
        model: str,
        query: str,
        documents: Sequence[str],
        top_n: int | None = None,
    ) -> list[tuple[int, float]]:
        """[(index into documents, relevance_score)], best first. Raises RerankError."""
        documents = list(documents)
        if not documents:
            return []
        top_n = len(documents) if top_n is None else max(1, min(int(top_n), len(documents)))
        url = rerank_url(base_url)
        body = {"model": model, "query": query, "documents": documents, "top_n": top_n}
        try:
            answer = _http.post_json(self._client, url, body, api_key, timeout_s=self._timeout_s)
        except _http.CallFailed as exc:
            if exc.refused:
                raise RerankError(f"rerank endpoint refused by the URL policy: it {exc.refused}") from None
            raise RerankError(f"rerank failed: {exc}") from None
        return _parse(answer, len(documents))


def _parse(answer: Any, count: int) -> list[tuple[int, float]]:
    # Cohere/Jina answer {"results": [...]}, Voyage {"data": [...]}; both items carry
    # {"index", "relevance_score"}.
    results = None
    if isinstance(answer, dict):
        results = answer.get("results", answer.get("data"))
    if not isinstance(results, list):
        raise RerankError("rerank answered with a wrong shape: no results list")
    ranking: list[tuple[int, float]] = []
    seen: set[int] = set()
    for item in results:
        if not isinstance(item, dict):
            raise RerankError("rerank answered with a wrong shape: a result is not an object")
        index, score = item.get("index"), item.get("relevance_score")
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
            raise RerankError("rerank answered with a wrong shape: an index is missing or out of range")
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
            raise RerankError("rerank answered with a wrong shape: a relevance_score is not a number")
        if index in seen:
            continue
        seen.add(index)
        ranking.append((index, float(score)))
    ranking.sort(key=lambda pair: pair[1], reverse=True)  # stable: ties keep the answer's order
    return ranking
