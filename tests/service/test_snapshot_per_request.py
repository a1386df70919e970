"""One Retrieve, Inject or RetrievePreview reads everything it needs (settings, vector state,
pending rows, vectors, keyword hits, the aged count) inside one read transaction: one
consistent state, and one BEGIN instead of one per read. Counted on the server's own
database (`Database.read_transactions` counts outermost read transactions)."""

from __future__ import annotations

import pytest

from memsvc.core.engine import InjectCall
from tests.support.vectors import create, set_memory, sql, static_model, warm  # noqa: F401 - fixture

OWNER = "key-snapshot"
FACTS = [
    "I prefer dark mode in my editor",
    "My cat is called Miso",
    "I usually run in the morning",
    "I will use PostgreSQL for this project",
    "My sister lives in Lisbon",
]


@pytest.fixture
def hybrid(boot, static_model):
    server, stubs = boot(static_model=str(static_model))
    set_memory(stubs, enabled=True, embeddingSource="static", staticEnabled=True, strategy="hybrid", retentionDays=30)
    warm(server)
    for fact in FACTS:
        create(stubs, OWNER, fact)
    return server, stubs


def _reads(server, call) -> tuple[int, object]:
    before = server.app.database.read_transactions
    result = call()
    return server.app.database.read_transactions - before, result


@pytest.mark.parametrize("strategy", ["hybrid", "semantic", "exact"])
def test_a_retrieval_reads_under_one_snapshot(hybrid, strategy):
    server, _ = hybrid
    engine = server.app.engine
    engine.retrieve(OWNER, "dark mode editor", strategy=strategy)  # caches filled: the count is the steady state
    reads, result = _reads(server, lambda: engine.retrieve(OWNER, "which editor theme do I like", strategy=strategy))
    assert result.items, "the retrieval found nothing: it would prove nothing about its reads"
    if strategy != "exact":
        assert result.resolution.embedding_source == "static" and not result.resolution.fallback_reason
    assert reads == 1


def test_an_inject_and_a_preview_read_under_one_snapshot(hybrid):
    server, _ = hybrid
    engine = server.app.engine
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "what theme does my editor use, dark mode?"}]}
    engine.inject(InjectCall(body=body, provider="openai", api_key_id=OWNER))
    reads, outcome = _reads(server, lambda: engine.inject(InjectCall(body=body, provider="openai", api_key_id=OWNER)))
    assert outcome.memory_ids and reads == 1
    reads, preview = _reads(server, lambda: engine.preview("dark mode", api_key_id=OWNER))
    assert preview.items and reads == 1


def test_a_backfill_inside_the_snapshot_is_seen_by_the_same_search(hybrid):
    """Rows waiting for a vector are embedded before the search; the search, still inside
    the request's snapshot, finds them at once (the snapshot moves past the request's own
    write, it does not hide it)."""
    server, _ = hybrid
    sql(server, "DELETE FROM vec_memories WHERE rowid = (SELECT memory_id FROM memories WHERE content LIKE '%Lisbon%')")
    sql(server, "UPDATE sequences SET value = value + 1 WHERE name = 'vec_generation'")  # as any vector write does
    result = server.app.engine.retrieve(OWNER, "where does my sister live", strategy="semantic")
    assert result.items[0].memory.content == "My sister lives in Lisbon"
    assert result.items[0].vec_score is not None
    assert sql(
        server,
        "SELECT count(*) FROM vec_memories WHERE rowid = "
        "(SELECT memory_id FROM memories WHERE content LIKE '%Lisbon%')",
    ) == [(1,)]
