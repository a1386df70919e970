"""The write path's duplicate check over a real SQLite store: a keyless draft that repeats an
owner's memory is marked to merge, and a check that cannot run (its store failing under it)
never fails the write: the draft goes on unmarked, to be stored as a memory of its own."""

from __future__ import annotations

from pathlib import Path

from memsvc.core.duplicates import Duplicates
from memsvc.core.settings.memory import Settings
from memsvc.kernel.models import NewMemory
from memsvc.storage.database import Database
from memsvc.storage.settings_store import SqlSettingsStore
from memsvc.storage.sqlite_backend import SqliteMemoryBackend


class NoVectors:
    """A store without embeddings: no nearest neighbours (the keyword list still runs)."""

    def nearest(self, scope, vectors, k):
        return [[] for _ in vectors]


def _store(path: Path) -> tuple[SqliteMemoryBackend, Settings]:
    """The memories, and the settings on a handle of their own (closing the memories'
    handle below leaves the settings readable, as a failing search would)."""
    backend = SqliteMemoryBackend(Database(path))
    backend.initialize()
    return backend, Settings(SqlSettingsStore(Database(path)))


def test_a_repeat_is_marked_and_a_failing_check_marks_nothing(tmp_path: Path) -> None:
    backend, settings = _store(tmp_path / "m.db")
    kept = backend.create(NewMemory(api_key_id="alice", content="User's dentist is Dr. Ortega"))
    duplicates = Duplicates(settings, NoVectors(), backend, applies=lambda: True)
    repeat = NewMemory(api_key_id="alice", content="user's dentist is dr. ortega!")
    [marked] = duplicates.mark([repeat])
    assert marked.merge_into == kept.id
    backend.shutdown()  # the keyword search now raises: the check cannot run
    [unmarked] = duplicates.mark([repeat])
    assert unmarked.merge_into is None
