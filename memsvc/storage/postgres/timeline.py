"""The timeline (`memsvc.storage.timeline`) on PostgreSQL: its row comparison alone seeks
the index."""

from memsvc.storage.dialect import POSTGRES_SQL
from memsvc.storage.postgres.rows import row_to_memory, rows_in_scope
from memsvc.storage.timeline import Timeline

_POSTGRES = Timeline(
    POSTGRES_SQL,
    row_to_memory,
    rows_in_scope,
    seek="",
    memories_from="FROM memories m WHERE m.memory_id = ANY(?::bigint[]) AND m.session_id IS NOT NULL",
)
happened_within = _POSTGRES.happened_within
neighbours = _POSTGRES.neighbours
