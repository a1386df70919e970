"""Rerank against the loopback stand-in (cosine similarity with MiniLM), its
failures (down, 500, slow, refused URL, wrong shape) and the pure reordering rule."""

from __future__ import annotations

import socket
import time
from dataclasses import replace

import pytest

from memsvc.core.settings.memory import MemorySettings
from memsvc.embedding import RerankError
from memsvc.embedding.rerank import RERANK_TIMEOUT_S, RerankClient, rerank_url
from memsvc.embedding.resolver import EmbeddingConfig, Embeddings
from memsvc.kernel.embedding import apply_rerank
from tests.support.model_server import shared

KEY = "test-key-123"
DOCS = [
    "I will use PostgreSQL for this project",
    "the weather is nice today",
    "dark mode in my editor",
    "I usually drink tea",
]
QUERY = "What editor theme do I like?"


@pytest.fixture
def server():
    s = shared(KEY)
    s.reset()
    yield s
    s.reset()


@pytest.fixture(scope="module")
def client():
    c = RerankClient(timeout_s=1.0)
    yield c
    c.close()


def test_the_reranker_reorders_by_relevance(server, client):
    ranking = client.rerank(server.root_url, KEY, "minilm-rerank", QUERY, DOCS, top_n=3)
    assert len(ranking) == 3
    assert ranking[0][0] == 2  # "dark mode in my editor"
    scores = [score for _, score in ranking]
    assert scores == sorted(scores, reverse=True)
    assert server.requests["/v1/rerank"] == 1 and server.auth_headers == [f"Bearer {KEY}"]
    reordered = apply_rerank(DOCS, ranking)
    assert reordered[0] == (DOCS[2], ranking[0][1])
    assert [doc for doc, _ in reordered][3:] == [d for i, d in enumerate(DOCS) if i not in {i for i, _ in ranking}]


def test_a_base_ending_in_v1_is_not_doubled(server, client):
    assert rerank_url("https://api.example.com/v1/") == "https://api.example.com/v1/rerank"
    assert rerank_url("https://api.example.com") == "https://api.example.com/v1/rerank"
    assert client.rerank(server.base_url, KEY, "m", QUERY, DOCS)[0][0] == 2


def test_wrong_credentials_fail_without_echoing_them(server, client):
    with pytest.raises(RerankError) as info:
        client.rerank(server.root_url, "sk-WRONG-rerank-key", "m", QUERY, DOCS)
    assert "401" in str(info.value) and "WRONG" not in str(info.value)


def test_server_error_is_a_rerank_error(server, client):
    server.mode = "fail"
    with pytest.raises(RerankError, match="HTTP 500"):
        client.rerank(server.root_url, KEY, "m", QUERY, DOCS)


def test_a_slow_reranker_fails_within_the_timeout(server, client):
    server.mode = "hang"
    started = time.monotonic()
    with pytest.raises(RerankError, match="did not answer in time"):
        client.rerank(server.root_url, KEY, "m", QUERY, DOCS)
    assert time.monotonic() - started < 3


def test_the_default_timeout_is_five_seconds():
    assert RERANK_TIMEOUT_S == 5.0
    assert RerankClient()._timeout_s == 5.0


def test_a_server_that_is_down_is_a_rerank_error(client):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(RerankError, match="could not reach"):
        client.rerank(f"http://127.0.0.1:{port}", KEY, "m", QUERY, DOCS)
    assert time.monotonic() - started < 3


def test_a_wrong_shaped_answer_is_a_rerank_error(server, client):
    server.mode = "garbage"
    with pytest.raises(RerankError, match="wrong shape"):
        client.rerank(server.root_url, KEY, "m", QUERY, DOCS)


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254",
        "http://u:p@127.0.0.1:1",
        "ftp://127.0.0.1",
        "http://127.0.0.1:1/?x=1",
        "http://2852039166",
    ],
)
def test_url_policy_applies_to_rerank(client, url):
    with pytest.raises(RerankError, match="URL policy") as info:
        client.rerank(url, KEY, "m", QUERY, DOCS)
    assert "u:p" not in str(info.value)


def test_no_documents_means_no_call(server, client):
    assert client.rerank(server.root_url, KEY, "m", QUERY, []) == []
    assert server.requests["/v1/rerank"] == 0


# -- apply_rerank ---------------------------------------------------------------------------


def test_apply_rerank_orders_by_score_and_keeps_the_rest_in_order():
    items = ["a", "b", "c", "d", "e"]
    out = apply_rerank(items, [(3, 0.2), (1, 0.9)])
    assert out == [("b", 0.9), ("d", 0.2), ("a", None), ("c", None), ("e", None)]


def test_apply_rerank_ignores_bad_and_repeated_indices():
    out = apply_rerank(["a", "b"], [(5, 1.0), (-1, 0.8), (1, 0.5), (1, 0.4)])
    assert out == [("b", 0.5), ("a", None)]


def test_apply_rerank_with_nothing_ranked_keeps_the_order():
    assert apply_rerank(["a", "b"], []) == [("a", None), ("b", None)]


# -- through the configured provider ------------------------------------------------------


def test_rerank_target_uses_the_providers_own_key(server):
    embeddings = Embeddings(EmbeddingConfig(providers=(("local", server.root_url),), api_keys=(("local", KEY),)))
    settings = MemorySettings(rerank_enabled=True, rerank_provider_model="local/minilm-rerank")
    target, reason = embeddings.rerank_target(settings)
    assert target is not None and target.api_key == KEY and KEY not in repr(target)
    assert embeddings.rerank(settings, QUERY, DOCS)[0][0] == 2
    assert server.auth_headers == [f"Bearer {KEY}"]
    assert embeddings.rerank_status(settings) == {
        "enabled": True,
        "provider": "local",
        "model": "minilm-rerank",
        "available": True,
        "reason": reason,
    }


@pytest.mark.parametrize(
    "changes, reason",
    [
        ({"rerank_enabled": False}, "rerankEnabled is false"),
        ({"rerank_provider_model": None}, "rerankProviderModel is not set"),
        ({"rerank_provider_model": "cohere/rerank-v3.5"}, "rerank provider cohere is not configured"),
        ({"rerank_provider_model": "nokey/m"}, "rerank provider nokey has no API key"),
    ],
)
def test_rerank_unavailable_reasons(changes, reason):
    embeddings = Embeddings(EmbeddingConfig(providers=(("nokey", "http://127.0.0.1:9"),)))
    settings = replace(MemorySettings(rerank_enabled=True, rerank_provider_model="nokey/m"), **changes)
    target, why = embeddings.rerank_target(settings)
    assert target is None and why.startswith(reason)
    assert embeddings.rerank_status(settings)["available"] is False
    with pytest.raises(RerankError, match="rerank unavailable"):
        embeddings.rerank(settings, QUERY, DOCS)
