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
neither signal and never pass a floor above 0. An item a conversation signal brought in or
raised (RetrievedItem.via) also passes when the turn it neighbours passes, or when the query
names the day it happened: the answer next to a matching question, or what happened on the
date asked about, often shares no word with the question.

`minScore` given: that one number is the floor for both signals; 0 turns the floor off.
Not given, each use has its default, by the same rule and code. Inject puts what passes into
a prompt, where every unrelated memory costs tokens and misleads the model: KEYWORD_FLOOR
for keyword overlap (one shared term between a three-term question and a four-term memory
passes, one shared term of a seven-term question and a three-term memory does not) and, for
vector similarity, the floor of the embedding source that answered (VECTOR_FLOORS). The
static model's similarities run higher for unrelated text than MiniLM's (measured on short
facts and questions: unrelated pairs up to 0.48 against 0.37, related ones from 0.43 and
0.31), hence its higher floor. Retrieve (and MCP memory_search, which calls it) returns a
ranked list its reader judges, where a missing answer costs more than a weak neighbour:
SEARCH_KEYWORD_FLOOR and SEARCH_VECTOR_FLOORS, set below the answers' own signals on the
quality bench's labelled set (the least a paraphrased question's answer reached: cosine 0.30
with the static model, 0.29 with MiniLM; keyword overlap 0.22 without vectors), so a search
drops the memories that share nothing with the question without losing its answers. The
keyword floor is 0.10, not 0.15: on REALTALK's conversations an evidence turn often shares one
word with a long question, and 0.15 cost keyword-only search 3.1 points of R@10 (0.548 →
0.517) where 0.10 costs 0.8 (0.540), hybrid static none (0.531 → 0.534).
Inject's floors on a search lost them: recall@10 of hybrid on the static model fell from
0.86 to 0.62.

The floor is applied before the budget and the limit, so a low-relevance item never takes the
place of one above the floor.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from memsvc.core.retrieval.ranking import NAMED_DATE, RetrievalResult, RetrievedItem, is_hybrid
from memsvc.kernel.text import STOPWORDS, scoring_tokens

MIN_SCORE_RANGE = (0.0, 1.0)
LIMIT_RANGE = (1, 100)
KEYWORD_FLOOR = 0.25
VECTOR_FLOORS = {"static": 0.55, "transformers": 0.35}
DEFAULT_VECTOR_FLOOR = 0.35  # remote (OpenAI-compatible) embedding models
SEARCH_KEYWORD_FLOOR = 0.10
SEARCH_VECTOR_FLOORS = {"static": 0.28, "transformers": 0.25}
SEARCH_DEFAULT_VECTOR_FLOOR = 0.25
IGNORED_TERMS = frozenset({"user", "users"})
WORD_ENDINGS = ("s", "es", "d", "ed", "ing")
MIN_STEM = 3
TERMS_CACHE = 8192  # texts whose terms are kept: the same memories come back request after request
_ASCII_WORD = re.compile(r"[a-z0-9]+")
TIER_QDRANT = "qdrant"


@dataclass(frozen=True)
class Floor:
    """The least keyword overlap and vector similarity an item needs (either suffices)."""

    keyword: float
    vector: float

    @property
    def off(self) -> bool:
        return self.keyword <= 0 and self.vector <= 0


NO_FLOOR = Floor(0.0, 0.0)


@dataclass(frozen=True)
class FlooredResult(RetrievalResult):
    """A retrieval after the floor: `below_min_score` counts the candidates it left out,
    `floor` is the floor that was applied (NO_FLOOR: none), both reported to the caller."""

    below_min_score: int = 0
    floor: Floor = NO_FLOOR


def floor_for(min_score: float | None, embedding_source: str, *, search: bool = False) -> Floor:
    """`min_score` for both signals or, when it is None, the defaults of Inject (or, with
    `search`, of Retrieve)."""
    if min_score is not None:
        return Floor(min_score, min_score)
    if search:
        return Floor(SEARCH_KEYWORD_FLOOR, SEARCH_VECTOR_FLOORS.get(embedding_source, SEARCH_DEFAULT_VECTOR_FLOOR))
    return Floor(KEYWORD_FLOOR, VECTOR_FLOORS.get(embedding_source, DEFAULT_VECTOR_FLOOR))


def queryless_min_score(min_score: float | None, query: str) -> float | None:
    """Retrieve's `min_score`: a Retrieve without a query asks for the newest memories, with
    nothing to measure relevance against, so the default floor does not apply to it (0).
    Inject always floors: a chat turn with no text gets no memory."""
    return 0.0 if min_score is None and not query.strip() else min_score


def min_score_problem(min_score: float | None) -> str:
    """Why `min_score` is out of range, or "" when it is fine (None: not given)."""
    low, high = MIN_SCORE_RANGE
    if min_score is None or (math.isfinite(min_score) and low <= min_score <= high):
        return ""
    return f"must be a number between {low:g} and {high:g}"


def limit_problem(limit: int | None) -> str:
    low, high = LIMIT_RANGE
    return "" if limit is None or low <= limit <= high else f"must be between {low} and {high}"


@lru_cache(maxsize=TERMS_CACHE)
def _stems(word: str) -> frozenset[str]:
    """The word and the word without one plural/tense ending: two words match when their
    stems meet ("lives"/"live", "answers"/"answer"; "user" keeps its r)."""
    stems = [word]
    for ending in WORD_ENDINGS:
        if word.endswith(ending) and len(word) - len(ending) >= MIN_STEM:
            stems.append(word[: -len(ending)])
    return frozenset(stems)


@dataclass(frozen=True)
class TermStems:
    """A text's terms (scoring tokens without the ignored subject words), each as its stems."""

    stems: tuple[frozenset[str], ...]
    all_stems: frozenset[str]

    def __len__(self) -> int:
        return len(self.stems)


def tokens_of(text: str) -> list[str]:
    """The relevance score's tokens (memsvc.kernel.text.scoring_tokens); ASCII text, the usual
    case, takes a shortcut that gives the same words several times faster."""
    if not text.isascii():
        return scoring_tokens(text)
    return [w for w in _ASCII_WORD.findall(text.lower()) if (len(w) >= 2 or w.isdigit()) and w not in STOPWORDS]


@lru_cache(maxsize=TERMS_CACHE)
def terms_of(text: str) -> TermStems:
    stems = tuple(_stems(t) for t in dict.fromkeys(tokens_of(text)) if t not in IGNORED_TERMS)
    return TermStems(stems, frozenset().union(*stems))


def keyword_overlap(query: TermStems, item: RetrievedItem) -> float:
    """Dice coefficient of the question's and the memory's terms, 0..1."""
    content = terms_of(item.memory.content)
    if not len(query) or not len(content):
        return 0.0
    named = content.all_stems | terms_of(item.memory.key or "").all_stems
    shared = sum(1 for stems in query.stems if not stems.isdisjoint(named))
    return min(1.0, 2 * shared / (len(query) + len(content)))


def vector_similarity(item: RetrievedItem, vector_store: str) -> float | None:
    """Cosine similarity from the item's vector score: Qdrant reports it as is, sqlite-vec
    as 1/(1+cosine distance). None when no vector tier found the item."""
    score = item.vec_score
    if score is None:
        return None
    if item.tier == TIER_QDRANT or (is_hybrid(item.tier) and vector_store == TIER_QDRANT):
        return score
    return 2.0 - 1.0 / score if score > 0 else None


def passes(item: RetrievedItem, query: TermStems, floor: Floor, vector_store: str) -> bool:
    """Either signal reaches the floor (the cheap vector check first)."""
    if floor.off:
        return True
    similarity = vector_similarity(item, vector_store)
    if similarity is not None and similarity > 0 and similarity >= floor.vector:
        return True
    overlap = keyword_overlap(query, item)
    return overlap > 0 and overlap >= floor.keyword


def above_floor(
    items: Sequence[RetrievedItem], query: str, floor: Floor, vector_store: str
) -> tuple[list[RetrievedItem], int]:
    """The items that pass, in their order, and how many did not: on their own signals, or
    through what lent them relevance (a passing neighbour, the date the query names)."""
    if floor.off:
        return list(items), 0
    query_terms = terms_of(query)
    own = {item.memory.id for item in items if passes(item, query_terms, floor, vector_store)}
    kept = [item for item in items if item.memory.id in own or NAMED_DATE in item.via or not own.isdisjoint(item.via)]
    return kept, len(items) - len(kept)
