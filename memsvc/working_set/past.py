"""An owner's memories as they were at an instant, searchable as the live store is: what a
Retrieve or Inject with `asOf` ranks.

Why a working set of its own: the owner's live set (and the store's keyword index) holds the
current versions; at an earlier instant some of them did not exist yet and some facts held
another content (a key's superseded version). The memories valid then are a different
corpus, with their own word statistics, so they get their own `OwnerSet`, built from the
store's read of them (`memsvc.storage.lifecycle.Lifecycle.valid_at`): the same tokens, BM25
and scope filters as the live search, over the past. Building costs one tokenization of the
owner's memories, so an asOf retrieval costs about a cold search; the registry keeps the last
few for the next question about the same instant, until the owner's memories change
(`memsvc.working_set.registry.WorkingSets.past`; bench/lifecycle_bench.py measures both).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memsvc.kernel.models import KeywordHit, Memory, SearchScope
from memsvc.kernel.time_phrases import TimeWindow
from memsvc.working_set.owner import OwnerSet, Tokenizer

#: The aged count a retrieval reports is capped as the store's (memory_store.AGED_COUNT_CAP).
AGED_COUNT_CAP = 10_000


@dataclass
class PastView:
    """The SearchBackend of one owner's memories valid at an instant. `memories`: the
    versions valid then (a superseded one has `valid_to`); `newer`: how many of the owner's
    current memories began after the instant (what a search of the live vector index must
    skip to find the past's best)."""

    owner_set: OwnerSet
    memories: list[Memory]
    newer: int

    @classmethod
    def build(
        cls, owner: str, memories: Sequence[Memory], newer: int, tokenize_document: Tokenizer, tokenize_query: Tokenizer
    ) -> PastView:
        return cls(OwnerSet.build(owner, memories, tokenize_document, tokenize_query), list(memories), newer)

    def recent(self, scope: SearchScope, limit: int) -> list[Memory]:
        return self.owner_set.recent(scope, limit)

    def search_keyword(self, scope: SearchScope, text: str, limit: int) -> list[KeywordHit]:
        return self.owner_set.search_keyword(scope, text, limit)

    def count_aged(self, scope: SearchScope) -> int:
        return self.owner_set.count_aged(scope, AGED_COUNT_CAP)

    def happened_within(self, scope: SearchScope, windows: Sequence[TimeWindow], limit: int) -> list[Memory]:
        return self.owner_set.happened_within(scope, windows, limit)

    def neighbours(self, scope: SearchScope, memories: Sequence[Memory]) -> dict[str, list[Memory]]:
        return self.owner_set.neighbours(scope, memories) or {}

    def in_scope(self, scope: SearchScope, memory_ids: Sequence[int]) -> list[Memory]:
        """The versions of these memory ids the scope may see (a vector search's hits)."""
        return self.owner_set.in_scope(scope, memory_ids)
