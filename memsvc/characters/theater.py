"""Theater capsules in a save: read-only stored messages the client may show but not edit.

Each client item is matched to the snapshot it was edited from: by `source_index` when the
client sent one, else by the next stored message (from the last match on) with the same
(role, text); an item flagged `theater` without an index is matched to the next capsule.
A capsule's match is written back verbatim (an edit of its text is refused); a capsule no
item matched is put back at its place, between the items matched to its neighbours.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memsvc.characters.messages import is_theater_capsule, message_dict, role_and_text
from memsvc.characters.models import ChatItem
from memsvc.kernel.errors import ConflictError

THEATER_READONLY = "RECENT_FILE_THEATER_READONLY"


@dataclass
class _Slot:
    message: Any
    index: int | None  # the snapshot position it came from, None for new or edited items


def _readonly(index: int) -> ConflictError:
    return ConflictError(
        f"chat item for message {index} edits a theater capsule, which is read-only; "
        "reload the file and keep the capsule as it is",
        reason=THEATER_READONLY,
    )


class _Matcher:
    def __init__(self, snapshot: list[Any]):
        self.snapshot = snapshot
        self.capsules = {i for i, m in enumerate(snapshot) if is_theater_capsule(m)}
        self.used: set[int] = set()
        self.cursor = 0

    def match(self, item: ChatItem) -> int | None:
        if item.source_index is not None:
            index = item.source_index
            found = index if 0 <= index < len(self.snapshot) and index not in self.used else None
        elif item.theater:
            found = next((i for i in sorted(self.capsules) if i >= self.cursor and i not in self.used), None)
        else:
            found = next(
                (
                    i
                    for i in range(self.cursor, len(self.snapshot))
                    if i not in self.used and role_and_text(self.snapshot[i]) == (item.role, item.text or "")
                ),
                None,
            )
        if found is not None:
            self.used.add(found)
            self.cursor = max(self.cursor, found + 1)
        return found


def _slot(matcher: _Matcher, item: ChatItem) -> _Slot | None:
    index = matcher.match(item)
    if index is not None and index in matcher.capsules:
        role, text = role_and_text(matcher.snapshot[index])
        if item.role != role or (item.text is not None and item.text != (text or "")):
            raise _readonly(index)
        return _Slot(matcher.snapshot[index], index)
    if item.theater:
        return None  # never written as ordinary text; its capsule is restored below
    return _Slot(message_dict(item.role, item.text or ""), index)


def _restore_omitted(slots: list[_Slot], matcher: _Matcher) -> list[_Slot]:
    for capsule in sorted(matcher.capsules - matcher.used):
        after = next((pos for pos, s in enumerate(slots) if s.index is not None and s.index > capsule), None)
        if after is None:
            before = [pos for pos, s in enumerate(slots) if s.index is not None and s.index < capsule]
            after = before[-1] + 1 if before else min(capsule, len(slots))
        slots.insert(after, _Slot(matcher.snapshot[capsule], capsule))
    return slots


def merge_chat(snapshot: list[Any], chat: list[ChatItem]) -> list[Any]:
    """The messages a save writes: the client's chat with every capsule kept verbatim."""
    matcher = _Matcher(snapshot)
    slots = [s for s in (_slot(matcher, item) for item in chat) if s is not None]
    if matcher.capsules:
        slots = _restore_omitted(slots, matcher)
    return [s.message for s in slots]
