"""Which memories retention (retentionDays) spares by default: the durable facts.

retentionDays hides a memory from retrieval once it is older than the window, which is right
for what a conversation was about and wrong for who the user is: a name, an allergy or a
child's name stated once must not stop being injected after a month. So a memory whose key
starts with one of DURABLE_KEY_PREFIXES (the keys extraction gives these facts, and any
client may use) is stored with `keep` unless its writer said `keep` itself; it stays exempt
from the age limit until someone releases it (`keep: false`). Expiry (`expiresAt`) still
applies to it. Conversation turns and notes (type `episodic`, whatever their key), decisions
(`decision:`, stored as episodic), habits (`pattern:`) and keys outside the table age as
before.

Decided once, at write time, into the stored `keep` column, so every tier (keyword search,
sqlite-vec, pgvector, Qdrant's payload, Summarize's candidates) applies it with the filter it
already has for `keep`.
"""

from __future__ import annotations

#: Key prefix -> what it records. The prefixes are those of memsvc.core.extraction.facts's facts.
DURABLE_KEY_PREFIXES: dict[str, str] = {
    "name:": "identity: the user's name or what to call them",
    "diet:": "diet and allergies",
    "family:": "family members, their names and professions; marital status",
    "pet:": "pets and their names",
    "language:": "the reply language, languages spoken or learnt",
    "profession:": "profession and employer",
    "location:": "where the user lives or comes from",
    "preference:": "lasting preferences (likes, dislikes, how answers should be)",
}
#: Types that age whatever their key says: a conversation turn or an episodic note.
AGING_TYPES = frozenset({"episodic"})


def durable(key: str | None, memory_type: str) -> bool:
    """Whether a memory with this key and type is a durable fact, kept by default."""
    if not key or memory_type in AGING_TYPES:
        return False
    return key.startswith(tuple(DURABLE_KEY_PREFIXES))


def default_keep(keep: bool | None, key: str | None, memory_type: str) -> bool | None:
    """The `keep` a write stores: the writer's own when it said one; True for a durable
    fact; otherwise None (false for a new memory, unchanged by an upsert)."""
    if keep is not None:
        return keep
    return True if durable(key, memory_type) else None
