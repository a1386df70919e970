"""Reflections: what the review learns about a character's user, on its way into the
character's long-term memory (`memories` owned by `character:<name>`).

A fact the engine's extractor finds in a human message is `pending` the first time,
`confirmed` when a later message shows it again, and `promoted` into a memory either by
evidence (Powerful Memory on: seen 3 times) or by age (confirmed for 14 days, whatever the
switch: the time-driven fallback). "I hate X" after "I love X" gives the same fact key with
the opposite polarity; with Powerful Memory on it denies the older reflection.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from memsvc.characters.common import Hooks, owner_id
from memsvc.characters.toggles import POWERFUL_KEY, CoreConfig
from memsvc.core.extraction.facts import Fact, extract_facts
from memsvc.core.memories import Memories
from memsvc.kernel.models import NewMemory
from memsvc.storage.reflection_store import NewReflection, ReflectionRow, ReflectionStore

log = logging.getLogger("memsvc.characters.reflections")

PROMOTE_AFTER_SEEN = 3
PROMOTE_AFTER_CONFIRMED = timedelta(days=14)
MAX_EVIDENCE_CHARS = 500
# Cues that turn a fact around ("I hate X", "Xが嫌い", "我不喜欢X", "я не люблю X"). The
# extractor gives "I love X" and "I hate X" the same key; the cue in the fact's clause says
# which way it goes.
_NEGATIVE = re.compile(
    r"\b(?:hate|hates|dislike|dislikes|avoid|never|can['’]?t\s+stand|don['’]?t\s+(?:really\s+)?like|"
    r"do\s+not\s+(?:really\s+)?like)\b"
    r"|嫌い|苦手|決して|不(?:太|怎么|是很|是太)?(?:喜欢|爱)|讨厌|厌恶|受不了|反感|从不|从来不|从来没有"
    r"|не\s+(?:люблю|нравится|нравятся|переношу)|ненавижу|избегаю|терпеть\s+не\s+могу|никогда",
    re.IGNORECASE,
)
_CLAUSE_END = re.compile(r"[.,;!?…。，、！？；．\n\r]")


def clause_of(text: str, content: str) -> str:
    """The clause of `text` that holds `content` (the whole text when not found)."""
    at = text.casefold().find(content.casefold())
    if at < 0:
        return text.strip()[:MAX_EVIDENCE_CHARS]
    start = max((m.end() for m in _CLAUSE_END.finditer(text, 0, at)), default=0)
    end_match = _CLAUSE_END.search(text, at + len(content))
    end = end_match.start() if end_match else len(text)
    return text[start:end].strip()[:MAX_EVIDENCE_CHARS]


def polarity(clause: str) -> int:
    return -1 if _NEGATIVE.search(clause) else 1


class Reflections:
    def __init__(
        self,
        store: ReflectionStore,
        memories: Memories,
        toggles: CoreConfig,
        clock: Callable[[], datetime],
        hooks: Hooks,
    ):
        self.store = store
        self.memories = memories
        self.toggles = toggles
        self.clock = clock
        self.hooks = hooks
        # One recorder at a time; a rename holds it while it re-owns the rows.
        self.lock = threading.RLock()

    def _powerful(self) -> bool:
        try:
            return self.toggles.get(POWERFUL_KEY)
        except Exception:  # noqa: BLE001 - an unreadable switch means "off", never a crash
            return False

    def review(self, character: str, text: str) -> None:
        """Record the facts of one human message, then promote what is due by age."""
        powerful = self._powerful()
        with self.lock:
            now = self.clock()
            for fact in extract_facts(text):
                self._observe(character, fact, clause_of(text, fact.phrase), powerful, now)
            self._promote_due(now, character)

    def _observe(self, character: str, fact: Fact, clause: str, powerful: bool, now: datetime) -> None:
        sign = polarity(clause)
        if powerful:
            older = self.store.live(character, fact.key, -sign)
            if older is not None and older.status in ("pending", "confirmed"):
                self.store.deny(older.id, now)
        live = self.store.live(character, fact.key, sign)
        if live is None:
            self.store.insert(
                NewReflection(character, fact.key, sign, fact.category, fact.type, fact.content, clause), now
            )
            return
        self.store.seen_again(live.id, now)
        if powerful and live.seen_count + 1 >= PROMOTE_AFTER_SEEN and live.status in ("pending", "confirmed"):
            self._promote(self.store.get(live.id), now)

    def _promote(self, row: ReflectionRow | None, now: datetime) -> None:
        if row is None:
            return
        content = row.content if row.polarity > 0 else row.evidence
        metadata = {
            "source": "reflection",
            "category": row.category,
            "reflectionId": row.id,
            "polarity": "positive" if row.polarity > 0 else "negative",
        }
        try:
            result = self.memories.create(
                NewMemory(
                    api_key_id=owner_id(row.character),
                    content=content,
                    type=row.type,
                    key=row.fact_key,
                    metadata=metadata,
                )
            )
        except Exception as exc:  # noqa: BLE001 - stays confirmed; the next sweep retries
            log.error("reflection.promote.failed", extra={"error_type": type(exc).__name__})
            return
        self.store.mark_promoted(row.id, result.id, now)

    def _promote_due(self, now: datetime, character: str | None = None) -> int:
        due = self.store.confirmed_before(now - PROMOTE_AFTER_CONFIRMED, character)
        for row in due:
            self._promote(row, now)
        return len(due)

    def sweep(self) -> int:
        """The time-driven fallback for every character: promote what has been confirmed
        for 14 days."""
        with self.lock:
            return self._promote_due(self.clock())

    def reset_confirmed(self) -> int:
        """Powerful Memory ON → OFF: every confirmed reflection's 14-day clock restarts now."""
        with self.lock:
            self.hooks.fire("powerful_memory.reset")
            return self.store.reset_confirmed_at(self.clock())
