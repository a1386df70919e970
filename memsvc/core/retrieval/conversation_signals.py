"""Three ranking signals of conversations, applied after a query's own ranking: when a memory
happened, the turns around it, and who said it.

* A date the question names ("What did Kate cook on 29 Dec 2023?") favours the memories
  that happened then (`happened_at`: occurredAt, else createdAt), including those the
  question's words did not find: the answer turn rarely repeats the date.
* A turn of a conversation is often answered, or explained, by the turn before or after it
  ("Elise: what did you cook?" / "Kate: carbonara"). A conversation turn (an episodic memory
  of a session) the ranking found lends a share of its score to its neighbours in that
  session, so the answer next to a matching question comes back too.

* A question about a person ("What is Paola learning?") is answered by that person's own
  turns: a memory whose speaker the question names gains a share of the best score, when the
  ranking also holds turns of other speakers. A boost, never a filter (the question's names
  are not always the speakers', and a filter by speaker is known to lose most answers).
  The speaker is the memory's metadata `speaker`, else the "Name: " a turn starts with.

The weights were fitted on half A of the REALTALK conversations and checked on half B
(bench/realtalk_bench.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from memsvc.kernel.models import Memory
from memsvc.kernel.text import normalize
from memsvc.kernel.time_phrases import TimeWindow

if TYPE_CHECKING:
    from memsvc.core.retrieval.ranking import RetrievedItem

#: How many of the best items lend score to their neighbours.
NEIGHBOUR_SOURCES = 10
#: The share of a turn's score its neighbours receive.
NEIGHBOUR_WEIGHT = 0.3
#: What a memory that happened inside a date the question names gains, as a share of the
#: ranking's best score.
DATE_WEIGHT = 0.5
#: How many memories of a named date are considered beyond those the ranking found.
DATED_LIMIT = 200
#: What a memory of a speaker the question names gains, as a share of the ranking's best score.
SPEAKER_WEIGHT = 0.3
#: "Kevin: ...", "Fahim Khan: ...": a name of up to 40 characters that starts with a letter.
_SPEAKER_PREFIX = re.compile(r"([^\W\d_][\w .'’-]{0,38}?):\s")
_WORD = re.compile(r"[^\W_]+")
#: Only conversation turns have neighbours: facts extracted into a session are not in any order.
TURN_TYPE = "episodic"

NewItem = Callable[[Memory, float], "RetrievedItem"]


def is_turn(memory: Memory) -> bool:
    """A memory with neighbours: an episodic memory of a session."""
    return memory.type == TURN_TYPE and bool(memory.session_id)


def lend_to_neighbours(
    ranked: Sequence[RetrievedItem], neighbours: Mapping[str, Sequence[Memory]], new_item: NewItem
) -> list[RetrievedItem]:
    """Each neighbour gains NEIGHBOUR_WEIGHT × the best score among the turns next to it
    (`neighbours`: memory id → the turns before and after it); a neighbour the ranking did
    not have joins it with that share plus its own score from `new_item`. Unordered."""
    lent: dict[str, float] = {}
    found: dict[str, Memory] = {}
    for item in ranked[:NEIGHBOUR_SOURCES]:
        for memory in neighbours.get(item.memory.id, ()):
            share = NEIGHBOUR_WEIGHT * item.score
            if share > lent.get(memory.id, 0.0):
                lent[memory.id], found[memory.id] = share, memory
    return _raised(ranked, lent, found, new_item)


def favour_dates(
    ranked: Sequence[RetrievedItem], windows: Sequence[TimeWindow], dated: Iterable[Memory], new_item: NewItem
) -> list[RetrievedItem]:
    """Every memory that happened inside one of `windows` gains DATE_WEIGHT × the best score;
    `dated` are the memories of those windows the ranking may lack. Unordered."""
    best = max((item.score for item in ranked), default=0.0) or 1.0
    bonus = DATE_WEIGHT * best
    found = {m.id: m for m in dated}
    found.update({item.memory.id: item.memory for item in ranked})
    lent = {i: bonus for i, m in found.items() if any(w.holds(m.happened_at) for w in windows)}
    return _raised(ranked, lent, found, new_item)


def _raised(
    ranked: Sequence[RetrievedItem], gains: Mapping[str, float], memories: Mapping[str, Memory], new_item: NewItem
) -> list[RetrievedItem]:
    """`ranked` with `gains` added to the scores, and new items for the ids it lacks; in no
    particular order (the caller ranks)."""
    out = [
        replace(item, score=item.score + gains[item.memory.id]) if item.memory.id in gains else item for item in ranked
    ]
    have = {item.memory.id for item in ranked}
    return out + [new_item(memories[i], gain) for i, gain in gains.items() if i not in have]


def speaker(memory: Memory) -> str:
    """Who said a memory, case-folded: its metadata `speaker`, else, for a conversation turn,
    the "Name: " its content starts with; "" when neither says. A fact's own prefix
    ("Reminder: ...", "Note: ...") names no speaker."""
    given = memory.metadata.get("speaker") if isinstance(memory.metadata, dict) else None
    if isinstance(given, str) and given.strip():
        return normalize(given)
    found = _SPEAKER_PREFIX.match(memory.content) if is_turn(memory) else None
    return normalize(found.group(1)) if found else ""


def favour_named_speakers(ranked: Sequence[RetrievedItem], query: str) -> list[RetrievedItem]:
    """Every item whose speaker the query names (one of the speaker's words is a word of the
    query: "Fahim Khan" is named by "Fahim") gains SPEAKER_WEIGHT × the best score; unchanged
    when the query names no speaker of the ranking, or every one of them. Unordered."""
    said_by = {item.memory.id: speaker(item.memory) for item in ranked}
    speakers = set(said_by.values()) - {""}
    words = set(_WORD.findall(normalize(query)))
    named = {s for s in speakers if words.intersection(_WORD.findall(s))}
    if not named or named == speakers:
        return list(ranked)
    bonus = SPEAKER_WEIGHT * (max(item.score for item in ranked) or 1.0)
    return [replace(item, score=item.score + bonus) if said_by[item.memory.id] in named else item for item in ranked]
