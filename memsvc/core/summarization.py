"""Summarization: fold old memories into one semantic summary per owner.

Never across tenants by accident: an apiKeyId is required unless the caller explicitly asks
for all tenants, and even then each owner gets its own summary of its own memories.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from memsvc.core.memories import MAX_CONTENT_BYTES
from memsvc.kernel.errors import Violations
from memsvc.kernel.models import Memory, NewMemory, UpsertResult, estimate_tokens, utcnow
from memsvc.kernel.text import first_sentences

DAYS_RANGE = (1, 365)
DEFAULT_DAYS = 30
DEFAULT_BUDGET_TOKENS = 4000


class SummaryBackend(Protocol):
    def older_than(
        self, api_key_id: str | None, cutoff: datetime, session_id: str | None = None, *, include_kept: bool = True
    ) -> list[Memory]: ...

    def replace_with_summary(self, ids: Sequence[str], summary: NewMemory) -> tuple[UpsertResult, int]: ...

    def rewrite_contents(self, contents: dict[str, str]) -> int: ...


@dataclass(frozen=True)
class SummaryOutcome:
    candidates: list[Memory]
    total_tokens: int
    dry_run: bool
    deleted_count: int = 0
    summary_ids: list[str] = field(default_factory=list)
    tokens_saved: int = 0


@dataclass(frozen=True)
class BudgetOutcome:
    original_count: int
    summarized_count: int
    tokens_saved: int
    rewritten_ids: list[str] = field(default_factory=list)


def validate(older_than_days: int | None, api_key_id: str | None, all_tenants: bool) -> int:
    v = Violations()
    days = DEFAULT_DAYS if older_than_days is None else older_than_days
    if not DAYS_RANGE[0] <= days <= DAYS_RANGE[1]:
        v.add("olderThanDays", f"must be between {DAYS_RANGE[0]} and {DAYS_RANGE[1]}")
    if not api_key_id and not all_tenants:
        v.add("apiKeyId", "is required (set allTenants to summarize every owner, each separately)")
    if api_key_id and all_tenants:
        v.add("allTenants", "cannot be combined with apiKeyId")
    v.raise_if_any()
    return days


def summary_line(memory: Memory) -> str:
    return f"[{memory.type}] {memory.key or memory.id}: {first_sentences(memory.content)}"


# Room kept for the header line ("Summary of N memories older than D days (generated T):").
HEADER_RESERVE = 128


def _chunks(memories: list[Memory]) -> list[list[Memory]]:
    """Split so every summary's content fits the content limit (one chunk in the usual case)."""
    chunks: list[list[Memory]] = [[]]
    size = HEADER_RESERVE
    for memory in memories:
        line = len(summary_line(memory).encode()) + 1
        if chunks[-1] and size + line > MAX_CONTENT_BYTES:
            chunks.append([])
            size = HEADER_RESERVE
        chunks[-1].append(memory)
        size += line
    return chunks


def _summary(owner: str, memories: list[Memory], days: int, now: datetime, part: int) -> NewMemory:
    stamp = now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    header = f"Summary of {len(memories)} memories older than {days} days (generated {stamp}):"
    content = "\n".join([header, *(summary_line(m) for m in memories)])
    # Only a single line longer than the limit gets here; cut it at a character boundary.
    content = content.encode()[:MAX_CONTENT_BYTES].decode("utf-8", "ignore")
    return NewMemory(
        api_key_id=owner,
        type="semantic",
        key=f"summary_{stamp}" + (f"_{part}" if part > 1 else ""),
        content=content,
        metadata={"summarizedCount": len(memories), "olderThanDays": days, "generatedAt": stamp},
    )


def summarize(
    backend: SummaryBackend,
    older_than_days: int | None,
    api_key_id: str | None,
    dry_run: bool,
    all_tenants: bool = False,
    now: datetime | None = None,
) -> SummaryOutcome:
    days = validate(older_than_days, api_key_id, all_tenants)
    now = now or utcnow()
    # A kept memory has no age limit: it is never a candidate, in a dry run or a real one.
    candidates = backend.older_than(api_key_id or None, now - timedelta(days=days), include_kept=False)
    total = sum(estimate_tokens(m.content) for m in candidates)
    if dry_run or not candidates:
        return SummaryOutcome(candidates, total, dry_run)
    by_owner: dict[str, list[Memory]] = defaultdict(list)
    for memory in candidates:
        by_owner[memory.api_key_id].append(memory)
    deleted, summary_ids, summary_tokens = 0, [], 0
    for owner, memories in by_owner.items():
        for part, chunk in enumerate(_chunks(memories), start=1):
            summary = _summary(owner, chunk, days, now, part)
            created, removed = backend.replace_with_summary([m.id for m in chunk], summary)
            deleted += removed
            summary_ids.append(created.id)
            summary_tokens += estimate_tokens(summary.content)
    return SummaryOutcome(candidates, total, False, deleted, summary_ids, total - summary_tokens)


def summarize_to_budget(
    backend: SummaryBackend, memories: list[Memory], max_tokens: int = DEFAULT_BUDGET_TOKENS
) -> BudgetOutcome:
    """Keep the newest memories that fit `max_tokens` as they are; rewrite older ones in
    place to their first three sentences. `memories` is one owner's (or session's) rows."""
    newest_first = sorted(memories, key=lambda m: (m.created_at, m.memory_id), reverse=True)
    used, rewrites = 0, {}
    for memory in newest_first:
        tokens = estimate_tokens(memory.content)
        if used + tokens <= max_tokens:
            used += tokens
            continue
        shorter = first_sentences(memory.content)
        if len(shorter) < len(memory.content):
            rewrites[memory.id] = shorter
    saved = sum(estimate_tokens(m.content) - estimate_tokens(rewrites[m.id]) for m in memories if m.id in rewrites)
    if rewrites:
        backend.rewrite_contents(rewrites)
    return BudgetOutcome(len(memories), len(rewrites), saved, list(rewrites))
