"""Embeddings and the sqlite-vec tier through the real gRPC server: the
remote source against a real loopback embeddings server (MiniLM vectors), the URL
policy of customBaseUrl, secrets never echoed, MiniLM semantic ranking, hybrid RRF scores,
budgets, per-owner KNN, vector sync on delete/update, lazy backfill, int8 storage, the
embedding cache, rerank, GetEngineStatus in each configuration and ListEmbeddingProviders.

Request paths never wait for a model to load, so tests that assert vector results with a
local model warm it first (`warm`). The remote source needs no loading.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import numpy as np
import pytest
from conftest import make_config, start_server

from memsvc.v1 import engine_pb2 as epb
from memsvc.v1 import memory_pb2 as mpb
from memsvc.v1 import settings_pb2 as spb
from tests.support.model_server import encode
from tests.support.vectors import (
    MINILM_DIM,
    STATIC_DIM,
    STATIC_NAME,
    TRANSFORMERS_MODEL,
    C,
    contents,
    create,
    error,
    error_text,
    models,  # noqa: F401 - fixture
    preview,
    remote_settings,
    set_memory,
    sql,
    static_model,  # noqa: F401 - fixture
    status,
    stored_vector,
    struct,
    vec_rows,
    vec_table_exists,
    violated_fields,
    warm,
)

EDITOR = "I prefer dark mode in my editor"
UNRELATED = ["I will use PostgreSQL for this project", "My cat is called Miso", "I usually run in the morning"]
PROVIDER_KEY = "sk-memsvc-test-9f8e7d6c5b4a"


# ---- servers ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tf(tmp_path_factory):
    """One server with the transformers source (MiniLM), warmed; tests use their own owner."""
    handle = start_server(make_config(tmp_path_factory.mktemp("transformers")))
    stubs = handle.stubs()
    set_memory(stubs, enabled=True, embeddingSource="transformers", transformersEnabled=True)
    warm(handle)
    yield handle, stubs
    handle.stop()


def settings_of(stubs) -> spb.MemorySettings:
    return stubs.settings.GetMemorySettings(spb.GetMemorySettingsRequest())


# ---- the remote source -----------------------------------------------------------------------


def test_remote_dimension_is_learned_from_the_first_answer_and_the_table_exists_after_the_first_write(boot, models):
    server, stubs = boot()
    set_memory(stubs, **remote_settings(models))
    before = status(stubs)
    assert before.embedding.source == "remote" and before.embedding.model == "minilm"
    assert before.embedding.available
    assert before.embedding.dimensions == 0 and before.embedding.signature == ""  # not known before an answer
    assert not vec_table_exists(server) and models.embed_calls == 0

    memory_id = create(stubs, "key-remote", EDITOR)

    assert models.embed_calls == 1
    assert vec_table_exists(server)  # the reference's "no such table" cannot recur
    assert vec_rows(server) == 1
    assert len(stored_vector(server, memory_id)) == 4 * MINILM_DIM  # float32
    after = status(stubs)
    assert after.embedding.dimensions == MINILM_DIM
    assert after.embedding.signature == "remote:minilm:384"
    assert after.vector_store.signature == "remote:minilm:384"
    assert after.vector_store.available and after.vector_store.backend == "sqlite-vec"
    assert after.vector_store.row_count == 1 and after.vector_store.needs_reindex == 0
    found = preview(stubs, "What editor theme do I like?", "key-remote")
    assert found.memories[0].id == memory_id and found.memories[0].tier == "vector"
    assert found.resolution.embedding_source == "remote" and found.resolution.embedding_model == "minilm"


BAD_URLS = [
    pytest.param("http://user:hunter2pw@127.0.0.1:9/v1", id="credentials"),
    pytest.param("http://127.0.0.1:9/v1?token=hunter2pw", id="query-string"),
    pytest.param("file:///etc/passwd", id="file-scheme"),
    pytest.param("http://169.254.169.254/latest/meta-data", id="metadata-address"),
    pytest.param("http://2852039166/", id="name-resolving-to-link-local"),
]


@pytest.mark.parametrize("url", BAD_URLS)
def test_a_forbidden_custom_base_url_is_refused_and_nothing_is_stored(server, stubs, url):
    before = settings_of(stubs)
    err = error(
        stubs.settings.UpdateMemorySettings,
        spb.UpdateMemorySettingsRequest(
            settings=struct(
                {"enabled": True, "embeddingSource": "remote", "customBaseUrl": url, "customModelId": "minilm"}
            )
        ),
    )
    assert err.code() == C.INVALID_ARGUMENT, err
    assert "customBaseUrl" in violated_fields(err)
    assert "hunter2pw" not in error_text(err)  # the credential is never echoed
    assert settings_of(stubs) == before  # all or nothing: enabled and embeddingSource unchanged too
    assert not settings_of(stubs).HasField("custom_base_url")


def test_the_provider_api_key_never_appears_in_a_response_an_error_or_a_log(boot, models, caplog):
    caplog.set_level(logging.DEBUG)
    models.api_key = PROVIDER_KEY
    server, stubs = boot(
        embedding_providers=(("local", models.base_url),), embedding_api_keys=(("local", PROVIDER_KEY),)
    )
    seen: list[str] = []

    def collect(message: Any) -> Any:
        seen.append(str(message))
        return message

    collect(
        set_memory(
            stubs,
            enabled=True,
            embeddingSource="remote",
            embeddingProviderModel="local/minilm",
            rerankEnabled=True,
            rerankProviderModel="local/minilm",
        )
    )
    memory_id = create(stubs, "key-secret", "my cat is called Miso")
    assert vec_rows(server) == 1
    assert f"Bearer {PROVIDER_KEY}" in models.auth_headers  # the key is really used...
    resp = collect(preview(stubs, "cat", "key-secret", strategy="hybrid"))
    assert resp.memories[0].id == memory_id and resp.resolution.rerank_applied
    collect(stubs.engine.Retrieve(epb.RetrieveRequest(api_key_id="key-secret", query="cat")))
    collect(status(stubs))
    collect(stubs.engine.ListEmbeddingProviders(epb.ListEmbeddingProvidersRequest()))
    collect(settings_of(stubs))
    collect(stubs.settings.ListQdrantEmbeddingModels(spb.ListQdrantEmbeddingModelsRequest()))
    # ...and failures (a refused key, a failing endpoint) do not echo it either.
    models.api_key = "another-key-entirely"
    create(stubs, "key-secret", "a memory written while the key is refused")
    collect(preview(stubs, "refused key query", "key-secret", strategy="hybrid"))
    refused = collect(status(stubs))
    assert "401" in refused.embedding.reason and not refused.embedding.available
    models.api_key = PROVIDER_KEY
    models.mode = "fail"
    collect(preview(stubs, "failing endpoint query", "key-secret", strategy="semantic"))
    collect(list(stubs.engine.Reindex(epb.ReindexRequest(force=True), timeout=60)))
    err = error(stubs.settings.SearchQdrant, spb.SearchQdrantRequest(query="cat"))
    seen.append(error_text(err))
    for text in seen:
        assert PROVIDER_KEY not in text and PROVIDER_KEY[-8:] not in text, text[:3000]
    for record in caplog.records:
        assert PROVIDER_KEY not in str(record.__dict__)


# ---- MiniLM semantic retrieval (transformers source) ---------------------------------------


def test_semantic_ranks_the_editor_preference_above_facts_that_share_no_words(tf):
    server, stubs = tf
    owner = "key-semantic"
    unrelated = [create(stubs, owner, text) for text in UNRELATED]
    editor = create(stubs, owner, EDITOR)
    unrelated.append(create(stubs, owner, UNRELATED[0] + " again"))  # newer rows do not matter
    for strategy in ("semantic", "hybrid"):
        resp = preview(stubs, "What editor theme do I like?", owner, strategy=strategy)
        assert resp.memories[0].id == editor, (strategy, contents(resp))
        assert resp.memories[0].HasField("vec_score")
    resp = preview(stubs, "What editor theme do I like?", owner, strategy="semantic")
    assert resp.resolution.strategy_used == "vector" and resp.resolution.fallback_reason == ""
    assert resp.resolution.embedding_source == "transformers" and resp.resolution.vector_store == "sqlite-vec"
    assert {m.tier for m in resp.memories} == {"vector"}
    top = resp.memories[0]
    assert top.vec_score == pytest.approx(top.score) and 0.5 < top.vec_score <= 1.0  # 1/(1+distance)
    assert all(top.vec_score > m.vec_score for m in resp.memories[1:])
    hot = stubs.engine.Retrieve(
        epb.RetrieveRequest(api_key_id=owner, query="What editor theme do I like?", strategy="semantic")
    )
    assert hot.memories[0].id == editor and hot.memories[0].tier == "vector"


def test_hybrid_scores_follow_both_lists_shares_of_their_best(tf):
    """The default fusion (gated-convex): 0.8 × keyword share + 0.2 × vector share."""
    server, stubs = tf
    owner = "key-hybrid"
    made = {text: create(stubs, owner, text) for text in UNRELATED + ["The quokka habitat is Rottnest Island"]}
    resp = preview(stubs, "quokka habitat", owner, strategy="hybrid")
    assert resp.resolution.strategy_used == "hybrid-gated-convex" and resp.resolution.fallback_reason == ""
    assert len(resp.memories) == 4 and {m.tier for m in resp.memories} == {"hybrid-gated-convex"}
    first = resp.memories[0]
    # The best of the keyword list (its only, strong hit) and of the vector list: 0.8 + 0.2.
    assert first.id == made["The quokka habitat is Rottnest Island"]
    assert first.HasField("fts_score") and first.HasField("vec_score")
    assert first.score == pytest.approx(1.0)
    # Everything else is in the vector list only: 0.2 × its vector score / the best one.
    by_vector = sorted(resp.memories, key=lambda m: m.vec_score, reverse=True)
    assert by_vector[0].id == first.id
    for item in by_vector[1:]:
        assert not item.HasField("fts_score")
        assert item.score == pytest.approx(0.2 * item.vec_score / first.vec_score), item.content
    assert [m.id for m in resp.memories] == [m.id for m in by_vector]


# ---- hybrid fusion (MEMORY_FUSION) -------------------------------------------------------------

NUTS = "I am allergic to peanuts and cashews"
ONE_WORD = "Cooking makes me happy"  # shares one word ("make") with the question below, nothing else
NUTS_QUESTION = "Which nuts make me sick?"


def fusion_server(boot, models, **config: Any) -> tuple[Any, dict[str, str]]:
    server, stubs = boot(**config)
    set_memory(stubs, **remote_settings(models))
    return stubs, {text: create(stubs, "key-fusion", text) for text in (NUTS, ONE_WORD, *UNRELATED)}


def by_vector(resp) -> list[str]:
    return [m.id for m in sorted(resp.memories, key=lambda m: m.vec_score, reverse=True)]


def test_gated_convex_is_the_default_and_a_one_word_keyword_match_cannot_outvote_the_vector_list(boot, models):
    stubs, made = fusion_server(boot, models)
    st = status(stubs).retrieval
    assert (st.fusion, st.rrf_k, st.list_top_k) == ("gated-convex", 60, 20)
    resp = preview(stubs, NUTS_QUESTION, "key-fusion", strategy="hybrid")
    ranks = by_vector(resp)
    assert ranks[0] == made[NUTS] and [m.id for m in resp.memories] == ranks  # the weak match is not fused
    strong = preview(stubs, "cooking makes me happy", "key-fusion", strategy="hybrid")
    assert strong.memories[0].id == made[ONE_WORD] and strong.memories[0].score == pytest.approx(1.0)


def test_memory_fusion_gated_rrf_counts_only_strong_keyword_matches_by_rank(boot, models):
    stubs, made = fusion_server(boot, models, fusion="gated-rrf")
    st = status(stubs).retrieval
    assert (st.fusion, st.rrf_k, st.list_top_k) == ("gated-rrf", 60, 20)
    resp = preview(stubs, NUTS_QUESTION, "key-fusion", strategy="hybrid")
    # The tier names the fusion that ranked it.
    assert resp.resolution.strategy_used == "hybrid-gated-rrf" and len(resp.memories) == 5
    assert {m.tier for m in resp.memories} == {"hybrid-gated-rrf"}
    ranks = by_vector(resp)
    assert ranks[0] == made[NUTS]  # the vector list's first; no keyword hit (FTS has no "nuts" in "peanuts")
    weak = next(m for m in resp.memories if m.id == made[ONE_WORD])
    assert weak.HasField("fts_score") and ranks.index(weak.id) > 0  # the keyword list's only (weak) hit
    # The weak match is not fused: every score is 1/(60 + vector rank), the vector order stands.
    assert [m.id for m in resp.memories] == ranks
    assert [m.score for m in resp.memories] == pytest.approx([1 / (60 + r) for r in range(1, 6)])
    # A strong keyword match (here the whole phrase) counts in full: first in both lists, 2/61.
    strong = preview(stubs, "cooking makes me happy", "key-fusion", strategy="hybrid")
    assert strong.memories[0].id == made[ONE_WORD] and strong.memories[0].score == pytest.approx(2 / 61)


def test_memory_fusion_rrf_switches_back_to_equal_weights(boot, models):
    stubs, made = fusion_server(boot, models, fusion="rrf")
    assert status(stubs).retrieval.fusion == "rrf"
    resp = preview(stubs, NUTS_QUESTION, "key-fusion", strategy="hybrid")
    assert resp.resolution.strategy_used == "hybrid-rrf" and {m.tier for m in resp.memories} == {"hybrid-rrf"}
    ranks = by_vector(resp)
    assert ranks[0] == made[NUTS]
    # Plain equal-weight RRF: first in the keyword list plus any vector rank beats the vector list's first.
    first, second = resp.memories[0], resp.memories[1]
    assert first.id == made[ONE_WORD]
    assert first.score == pytest.approx(1 / 61 + 1 / (60 + ranks.index(first.id) + 1))
    assert second.id == made[NUTS] and second.score == pytest.approx(1 / 61)


def test_budgets_still_hold_with_vector_tiers(tf):
    server, stubs = tf
    owner = "key-budget"
    big = create(stubs, owner, "The editor uses a dark color theme at night. " * 12)  # 135 tokens
    small = [create(stubs, owner, text) for text in (EDITOR, "Dark themes are easier on my eyes", *UNRELATED)]
    for strategy in ("semantic", "hybrid"):
        for budget in (1, 9, 20, 60, 200):
            resp = preview(stubs, "What editor theme do I like?", owner, strategy=strategy, max_tokens=budget)
            used = sum(m.tokens for m in resp.memories)
            assert used <= budget and resp.total_tokens_used == used and resp.budget_max_tokens == budget
            assert all(m.tokens == math.ceil(len(m.content) / 4) for m in resp.memories)
            if budget == 60:  # the big one does not fit and does not hide the smaller ones
                assert big not in [m.id for m in resp.memories] and set(small) <= {m.id for m in resp.memories}
        hot = stubs.engine.Retrieve(
            epb.RetrieveRequest(
                api_key_id=owner, query="What editor theme do I like?", strategy=strategy, max_tokens=20
            )
        )
        assert 0 < hot.total_tokens == sum(m.tokens for m in hot.memories) <= 20


def test_a_knn_for_one_owner_finds_its_memories_despite_many_closer_vectors_of_another(tf):
    server, stubs = tf
    query = "Which database engine did we pick for the analytics warehouse?"
    for i in range(60):  # 60 exact copies of the query: distance 0, the nearest vectors there are
        create(stubs, "key-knn-crowd", query, key=f"crowd:{i}")
    mine = [create(stubs, "key-knn-mine", text) for text in UNRELATED]
    resp = preview(stubs, query, "key-knn-mine", strategy="semantic")
    assert resp.resolution.strategy_used == "vector"
    assert sorted(m.id for m in resp.memories) == sorted(mine)
    crowd = preview(stubs, query, "key-knn-crowd", strategy="semantic")
    assert len(crowd.memories) == 20 and all(m.content == query for m in crowd.memories)  # vec top-k
    assert crowd.memories[0].vec_score == pytest.approx(1.0, abs=1e-3)


def test_deleting_a_memory_removes_its_vector_in_the_same_request(tf):
    server, stubs = tf
    owner = "key-delete"
    keep = create(stubs, owner, "I keep my notes in plain text files")
    gone = create(stubs, owner, "I delete old branches every Friday")
    assert stored_vector(server, gone) is not None
    rows = vec_rows(server)
    stubs.memory.DeleteMemory(mpb.DeleteMemoryRequest(id=gone))
    assert vec_rows(server) == rows - 1
    with server.app.database.read() as conn:
        orphans = conn.execute(
            "SELECT count(*) FROM vec_memories v WHERE NOT EXISTS "
            "(SELECT 1 FROM memories m WHERE m.memory_id = v.rowid)"
        ).fetchone()[0]
    assert orphans == 0
    resp = preview(stubs, "old git branches", owner, strategy="semantic")
    assert [m.id for m in resp.memories] == [keep]
    rows = vec_rows(server)
    cleared = stubs.memory.ClearMemories(mpb.ClearMemoriesRequest(api_key_id=owner))
    assert cleared.deleted_count == 1 and vec_rows(server) == rows - 1  # vectors go with their rows
    assert list(preview(stubs, "notes", owner, strategy="semantic").memories) == []


def test_a_metadata_only_update_does_not_re_embed_but_a_content_update_does(boot, models):
    server, stubs = boot(embedding_cache_max=0)  # no cache: any re-embed reaches the model server
    set_memory(stubs, **remote_settings(models))
    memory_id = create(stubs, "key-update", "I drink green tea in the afternoon")
    other = create(stubs, "key-update", "I enjoy hot chocolate with honey")
    vector = stored_vector(server, memory_id)
    question = "What do I drink in the afternoon?"
    assert preview(stubs, question, "key-update").memories[0].id == memory_id
    calls, inputs = models.embed_calls, models.inputs
    stubs.memory.UpdateMemory(mpb.UpdateMemoryRequest(id=memory_id, metadata=struct({"source": "manual"})))
    assert (models.embed_calls, models.inputs) == (calls, inputs)
    assert stored_vector(server, memory_id) == vector
    assert status(stubs).vector_store.needs_reindex == 0

    stubs.memory.UpdateMemory(mpb.UpdateMemoryRequest(id=memory_id, content="My favourite language is Rust"))
    assert models.embed_calls == calls + 1 and models.inputs == inputs + 1
    assert stored_vector(server, memory_id) != vector
    # Searches see the new vector at once (no stale copy anywhere).
    assert preview(stubs, question, "key-update").memories[0].id == other
    assert preview(stubs, "Which programming language do I like?", "key-update").memories[0].id == memory_id


def test_an_upsert_into_another_session_moves_the_vector_with_it(boot, models):
    server, stubs = boot()
    set_memory(stubs, **remote_settings(models), scope="session")
    first = create(stubs, "key-session", EDITOR, key="pref:editor", session_id="s1")
    create(stubs, "key-session", "My cat is called Miso", session_id="s1")
    calls = models.embed_calls
    moved = create(stubs, "key-session", EDITOR, key="pref:editor", session_id="s2")  # same text, new session
    assert moved == first and models.embed_calls == calls  # no new embedding for the same text

    def semantic(session: str) -> list[str]:
        return [
            m.id
            for m in stubs.engine.Retrieve(
                epb.RetrieveRequest(
                    api_key_id="key-session",
                    session_id=session,
                    query="What editor theme do I like?",
                    strategy="semantic",
                )
            ).memories
        ]

    assert semantic("s2") == [first]
    assert first not in semantic("s1")


def test_lazy_backfill_makes_memories_written_without_a_source_searchable_without_reindex(boot, models):
    server, stubs = boot()
    set_memory(stubs, enabled=True)  # memory on, no embedding source: keyword only
    editor = create(stubs, "key-lazy", EDITOR)
    for text in UNRELATED:
        create(stubs, "key-lazy", text)
    create(stubs, "key-lazy-other", "Another owner's row stays pending")
    assert not vec_table_exists(server) and models.embed_calls == 0
    keyword_only = preview(stubs, "What editor theme do I like?", "key-lazy", strategy="semantic")
    assert keyword_only.resolution.fallback_reason  # says why there is no vector tier

    set_memory(stubs, **remote_settings(models))
    assert status(stubs).vector_store.needs_reindex == 5
    resp = preview(stubs, "What editor theme do I like?", "key-lazy", strategy="semantic")
    assert resp.resolution.strategy_used == "vector", resp.resolution
    assert resp.memories[0].id == editor and len(resp.memories) == 4
    st = status(stubs).vector_store
    assert st.row_count == 4 and st.needs_reindex == 1  # only the searching owner's rows


def test_a_failed_embed_marks_the_row_and_a_later_search_backfills_it(boot, models):
    server, stubs = boot()
    set_memory(stubs, **remote_settings(models))
    create(stubs, "key-flaky", "I usually run in the morning")
    models.mode = "fail"
    flaky = create(stubs, "key-flaky", EDITOR)  # the write succeeds; its vector is deferred
    assert sql(server, "SELECT needs_reindex FROM memories WHERE id = ?", (flaky,)) == [(1,)]
    assert stored_vector(server, flaky) is None
    assert status(stubs).vector_store.needs_reindex == 1
    models.mode = "ok"
    resp = preview(stubs, "What editor theme do I like?", "key-flaky", strategy="semantic")
    assert resp.memories[0].id == flaky
    assert status(stubs).vector_store.needs_reindex == 0


def test_int8_mode_stores_one_byte_per_dimension(boot, models):
    server, stubs = boot(vec_quantization="int8")
    set_memory(stubs, **remote_settings(models))
    editor = create(stubs, "key-int8", EDITOR)
    for text in UNRELATED:
        create(stubs, "key-int8", text)
    st = status(stubs)
    assert st.vector_store.signature == "remote:minilm:384:int8"
    assert st.embedding.signature.endswith(":int8")
    assert len(stored_vector(server, editor)) == MINILM_DIM  # int8: one byte each (float32 would be 1536)
    with server.app.database.read() as conn:
        ddl = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'vec_memories'").fetchone()[0]
    assert "int8[384]" in ddl
    resp = preview(stubs, "What editor theme do I like?", "key-int8", strategy="semantic")
    assert resp.memories[0].id == editor and resp.resolution.strategy_used == "vector"


# ---- the embedding cache ---------------------------------------------------------------------


def test_repeated_text_is_embedded_once(boot, models):
    server, stubs = boot()
    set_memory(stubs, **remote_settings(models))
    create(stubs, "key-cache-1", "I prefer tabs over spaces")
    create(stubs, "key-cache-2", "I prefer tabs over spaces")  # same text, another owner
    assert models.inputs == 1
    for _ in range(3):
        preview(stubs, "indentation style", "key-cache-1", strategy="semantic")
    assert models.inputs == 2 and models.embed_calls == 2
    cache = status(stubs).embedding.cache_stats
    assert (cache.hits, cache.misses, cache.size) == (3, 2, 2)


def test_the_cache_respects_its_size_and_ttl(boot, models):
    server, stubs = boot(embedding_cache_max=2, embedding_cache_ttl_ms=1500)
    set_memory(stubs, **remote_settings(models))
    for text in ("first text", "second text", "third text"):
        create(stubs, "key-lru", text)
    assert status(stubs).embedding.cache_stats.size == 2
    create(stubs, "key-lru-2", "third text")  # still cached
    assert models.inputs == 3
    create(stubs, "key-lru-2", "first text")  # evicted (least recently used)
    assert models.inputs == 4
    time.sleep(1.6)
    assert status(stubs).embedding.cache_stats.size == 0  # expired
    create(stubs, "key-lru-3", "first text")
    assert models.inputs == 5


# ---- rerank ------------------------------------------------------------------------------------


RERANK_QUERY = "note about my pet animal"
RERANK_DOCS = [
    "note note: I will use PostgreSQL for this project",
    "note note: I usually run in the morning",
    "note: my cat is called Miso",
    "note note note: the build takes four minutes",
]


def test_rerank_reorders_by_the_loopback_scores_and_fails_open(boot, models):
    models.api_key = PROVIDER_KEY
    server, stubs = boot(
        embedding_providers=(("local", models.base_url),), embedding_api_keys=(("local", PROVIDER_KEY),)
    )
    set_memory(stubs, enabled=True)
    for text in RERANK_DOCS:
        create(stubs, "key-rerank", text)
    baseline = preview(stubs, RERANK_QUERY, "key-rerank", strategy="hybrid")
    assert len(baseline.memories) == 4 and not baseline.resolution.rerank_applied

    set_memory(stubs, rerankEnabled=True, rerankProviderModel="local/minilm")
    rr = status(stubs).rerank
    assert (rr.enabled, rr.provider, rr.model, rr.available) == (True, "local", "minilm", True)
    resp = preview(stubs, RERANK_QUERY, "key-rerank", strategy="hybrid")
    assert resp.resolution.rerank_applied and models.rerank_calls == 1
    assert models.auth_headers[-1] == f"Bearer {PROVIDER_KEY}"  # the endpoint's own credentials
    vectors = encode([RERANK_QUERY, *contents(baseline)])
    relevance = vectors[1:] @ vectors[0]
    expected = [contents(baseline)[i] for i in np.argsort(-relevance, kind="stable")]
    assert contents(resp) == expected
    assert contents(resp) != contents(baseline) and contents(resp)[0] == "note: my cat is called Miso"
    assert [m.score for m in resp.memories] == pytest.approx(sorted(relevance.tolist(), reverse=True), abs=1e-4)

    models.mode = "fail"
    failed = preview(stubs, RERANK_QUERY, "key-rerank", strategy="hybrid")
    assert contents(failed) == contents(baseline)
    assert [m.score for m in failed.memories] == [m.score for m in baseline.memories]
    assert not failed.resolution.rerank_applied
    assert "rerank failed" in failed.resolution.fallback_reason
    models.mode = "garbage"
    garbage = preview(stubs, RERANK_QUERY, "key-rerank", strategy="hybrid")
    assert contents(garbage) == contents(baseline) and "rerank failed" in garbage.resolution.fallback_reason


# ---- engine status in each configuration -----------------------------------------------------


def test_engine_status_with_no_embedding_source(server, stubs):
    st = status(stubs)
    assert st.keyword.available and st.keyword.backend == "FTS5"
    assert st.embedding.source == "none" and not st.embedding.available and st.embedding.reason
    assert st.embedding.dimensions == 0 and st.embedding.signature == ""
    assert not st.vector_store.available and "no embedding source" in st.vector_store.reason
    assert st.vector_store.row_count == 0 and st.vector_store.signature == ""
    assert not st.qdrant.enabled and not st.qdrant.healthy
    assert not st.rerank.enabled and not st.rerank.available
    set_memory(stubs, enabled=True)
    create(stubs, "key-none", "I prefer dark mode in my editor")
    assert status(stubs).vector_store.needs_reindex == 1
    resp = preview(stubs, "dark mode", "key-none", strategy="semantic")
    assert resp.resolution.strategy_used == "keyword" and resp.resolution.embedding_source == "none"
    assert "no embedding source" in resp.resolution.fallback_reason
    assert resp.memories[0].tier == "keyword"


def test_engine_status_with_a_static_model_folder(boot, static_model):
    server, stubs = boot(static_model=str(static_model))
    set_memory(stubs, enabled=True, embeddingSource="static", staticEnabled=True)
    st = status(stubs)
    assert st.embedding.source == "static" and st.embedding.model == STATIC_NAME
    assert st.embedding.state == "not_loaded" and not st.embedding.available and not st.embedding.loaded
    assert st.embedding.dimensions == STATIC_DIM and st.embedding.signature == f"static:{STATIC_NAME}:{STATIC_DIM}"
    warm(server)
    memory_id = create(stubs, "key-static", EDITOR)
    st = status(stubs)
    assert st.embedding.loaded
    assert st.vector_store.signature == f"static:{STATIC_NAME}:{STATIC_DIM}" and st.vector_store.row_count == 1
    assert len(stored_vector(server, memory_id)) == 4 * STATIC_DIM
    resp = preview(stubs, "dark mode editor", "key-static", strategy="semantic")
    assert resp.memories[0].id == memory_id and resp.resolution.embedding_source == "static"


def test_engine_status_with_transformers(tf):
    server, stubs = tf
    create(stubs, "key-status-tf", "status probe memory")
    st = status(stubs)
    assert st.embedding.source == "transformers" and st.embedding.model == TRANSFORMERS_MODEL
    assert st.embedding.available and st.embedding.loaded and st.embedding.dimensions == MINILM_DIM
    assert st.embedding.signature == f"transformers:{TRANSFORMERS_MODEL}:384"
    assert st.vector_store.signature == st.embedding.signature
    assert st.vector_store.available and st.vector_store.row_count == vec_rows(server) > 0
    assert not st.qdrant.enabled


def test_engine_status_with_the_remote_source_before_and_after_one_embed(boot, models):
    server, stubs = boot()
    set_memory(stubs, **remote_settings(models, "minilm-status"))
    st = status(stubs)
    assert (st.embedding.source, st.embedding.model, st.embedding.dimensions) == ("remote", "minilm-status", 0)
    preview(stubs, "one embed", "key-remote-status", strategy="semantic")
    st = status(stubs)
    assert st.embedding.dimensions == MINILM_DIM and st.embedding.signature == "remote:minilm-status:384"
    assert st.embedding.available and st.embedding.cache_stats.misses == 1
    models.mode = "fail"
    preview(stubs, "another embed", "key-remote-status", strategy="semantic")
    failing = status(stubs)
    assert not failing.embedding.available and "500" in failing.embedding.reason  # measured, not assumed


# ---- ListEmbeddingProviders ------------------------------------------------------------------


def test_list_embedding_providers(boot, models, static_model):
    openai_key = "sk-openai-should-never-show-0042"
    server, stubs = boot(
        embedding_providers=(("local", models.base_url), ("nokey", "http://127.0.0.1:9/v1")),
        embedding_api_keys=(("local", PROVIDER_KEY), ("openai", openai_key)),
        static_model=str(static_model),
    )
    resp = stubs.engine.ListEmbeddingProviders(epb.ListEmbeddingProvidersRequest())
    by_name = {p.provider: p for p in resp.providers}
    assert set(by_name) == {"local", "nokey", "openai", "static", "transformers"}
    assert by_name["local"].has_key and by_name["local"].kind == "remote"
    assert not by_name["nokey"].has_key
    assert by_name["openai"].has_key
    assert {m.name: m.dimensions for m in by_name["openai"].models}["text-embedding-3-small"] == 1536
    assert not by_name["static"].has_key and by_name["static"].kind == "local"
    assert [(m.name, m.dimensions) for m in by_name["static"].models] == [(STATIC_NAME, STATIC_DIM)]
    assert [(m.name, m.dimensions) for m in by_name["transformers"].models] == [(TRANSFORMERS_MODEL, MINILM_DIM)]
    text = str(resp)
    assert PROVIDER_KEY not in text and openai_key not in text and "0042" not in text
