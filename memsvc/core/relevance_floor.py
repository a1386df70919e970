"""The relevance floor of Retrieve and Inject (`minScore`) and the item limit (`limit`).

Retrieval ranks candidates; it does not say whether any of them is about the question. The
recent tier returns the newest memories whatever was asked, and a vector tier returns its k
nearest whatever their distance, so without a floor a handful of stored memories are all
injected into every prompt. The ranking scores cannot serve as that floor: RRF scores depend
only on ranks, keyword scores grow with text length and repetition, and sqlite-vec and Qdrant
report similarity on different scales. So the floor is measured on two signals that mean the
same thing in every tier, each between 0 and 1:

* keyword overlap: the Dice coefficient of the question's and the memory's terms,
  2 x shared / (question terms + memory terms), so one word shared by a long question and a
  memory counts for little and most of a short question found in a memory counts for much
  ("Which database will I use for this project?" / "I will use PostgreSQL for this project":
  2 x 2 / (3 + 3) = 0.67). The memory's terms are its content's; a question term that names
  the memory's key also counts as shared. Words match when equal or when one is the other
  plus a plural or tense ending ("answer"/"answers", "use"/"used"; not "use"/"user").
  Function words and the generic subject "user" do not count.
* vector similarity: the cosine similarity of the question's and the memory's embeddings,
  when a vector tier found the memory (sqlite-vec's 1/(1+distance) is converted back).

An item passes when either signal reaches the floor. Items found only by recency carry
neither signal and never pass a floor above 0.

`minScore` given: that one number is the floor for both signals; 0 turns the floor off.
Not given: Retrieve uses no floor (it returns the ranked list as before); Inject uses
KEYWORD_FLOOR for keyword overlap (one shared term between a three-term question and a
four-term memory passes, one shared term of a seven-term question and a three-term memory
does not) and, for vector similarity, the floor of the embedding source that answered
(VECTOR_FLOORS). The static model's similarities run higher for unrelated text than
MiniLM's (measured on short facts and questions: unrelated pairs up to 0.48 against 0.37,
related ones from 0.43 and 0.31), hence its higher floor.

The floor is applied before the budget and the limit, so a low-relevance item never takes the
place of one above the floor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from memsvc.core.retrieval import TIER_HYBRID, RetrievalResult, RetrievedItem
from memsvc.core.text import scoring_tokens

MIN_SCORE_RANGE = (0.0, 1.0)
LIMIT_RANGE = (1, 100)
KEYWORD_FLOOR = 0.25
VECTOR_FLOORS = {"static": 0.55, "transformers": 0.35}
DEFAULT_VECTOR_FLOOR = 0.35  # remote (OpenAI-compatible) embedding models
IGNORED_TERMS = frozenset({"user", "users"})
WORD_ENDINGS = frozenset({"", "s", "es", "d", "ed", "ing"})
TIER_QDRANT = "qdrant"
TIER_SQLITE_VEC = "vector"


@dataclass(frozen=True)
class FlooredResult(RetrievalResult):
    """A retrieval after the floor: `below_min_score` counts the candidates it left out."""

    below_min_score: int = 0


@dataclass(frozen=True)
class Floor:
    keyword: float
    vector: float

    @property
    def off(self) -> bool:
        return self.keyword <= 0 and self.vector <= 0


def floor_for(min_score: float | None, embedding_source: str) -> Floor:
    """`min_score` for both signals, or Inject's defaults when it is None."""
    if min_score is not None:
        return Floor(min_score, min_score)
    return Floor(KEYWORD_FLOOR, VECTOR_FLOORS.get(embedding_source, DEFAULT_VECTOR_FLOOR))


def min_score_problem(min_score: float | None) -> str:
    """Why `min_score` is out of range, or "" when it is fine (None: not given)."""
    low, high = MIN_SCORE_RANGE
    if min_score is None or (math.isfinite(min_score) and low <= min_score <= high):
        return ""
    return f"must be a number between {low:g} and {high:g}"


def limit_problem(limit: int | None) -> str:
    low, high = LIMIT_RANGE
    return "" if limit is None or low <= limit <= high else f"must be between {low} and {high}"


def terms_of(text: str) -> set[str]:
    """The terms the overlap counts: scoring tokens without the ignored subject words."""
    return {t for t in scoring_tokens(text) if t not in IGNORED_TERMS}


def _same_word(a: str, b: str) -> bool:
    short, long = (a, b) if len(a) <= len(b) else (b, a)
    return long.startswith(short) and long[len(short):] in WORD_ENDINGS


def _matches(term: str, words: set[str]) -> bool:
    return term in words or any(_same_word(term, w) for w in words)


def keyword_overlap(query_terms: set[str], item: RetrievedItem) -> float:
    """Dice coefficient of the question's and the memory's terms, 0..1."""
    content_terms = terms_of(item.memory.content)
    if not query_terms or not content_terms:
        return 0.0
    named = content_terms | terms_of(item.memory.key or "")
    shared = sum(1 for q in query_terms if _matches(q, named))
    return min(1.0, 2 * shared / (len(query_terms) + len(content_terms)))


def vector_similarity(item: RetrievedItem, vector_store: str) -> float | None:
    """Cosine similarity from the item's vector score: Qdrant reports it as is, sqlite-vec
    as 1/(1+cosine distance). None when no vector tier found the item."""
    score = item.vec_score
    if score is None:
        return None
    if item.tier == TIER_QDRANT or (item.tier == TIER_HYBRID and vector_store == TIER_QDRANT):
        return score
    return 2.0 - 1.0 / score if score > 0 else None


def passes(item: RetrievedItem, query_terms: set[str], floor: Floor, vector_store: str) -> bool:
    if floor.off:
        return True
    overlap = keyword_overlap(query_terms, item)
    if overlap > 0 and overlap >= floor.keyword:
        return True
    similarity = vector_similarity(item, vector_store)
    return similarity is not None and similarity > 0 and similarity >= floor.vector


def above_floor(items: Sequence[RetrievedItem], query: str, floor: Floor,
                vector_store: str) -> tuple[list[RetrievedItem], int]:
    """The items that pass, in their order, and how many did not."""
    query_terms = terms_of(query)
    kept = [item for item in items if passes(item, query_terms, floor, vector_store)]
    return kept, len(items) - len(kept)
