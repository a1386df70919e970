"""The embedding cache: LRU + TTL with counters, on its own and in front of a real source
(the loopback stand-in's request counters prove what was embedded)."""

from __future__ import annotations

import hashlib
import threading

import numpy as np
import pytest

from memsvc.core.settings.memory import MemorySettings
from memsvc.embedding.cache import EmbeddingCache, cache_key
from memsvc.embedding.resolver import EmbeddingConfig, Embeddings
from tests.support.model_server import shared

KEY = "test-key-123"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def vec(x: float) -> np.ndarray:
    return np.array([x, 0.0], dtype=np.float32)


def test_key_format_is_source_model_dim_sha256():
    digest = hashlib.sha256("héllo".encode()).hexdigest()
    assert cache_key("static", "m2v", 256, "héllo") == f"static:m2v:256:{digest}"


def test_hits_misses_and_size_are_counted():
    cache = EmbeddingCache(10, 60_000)
    assert cache.get("a") is None
    cache.put("a", vec(1))
    assert np.array_equal(cache.get("a"), vec(1))
    assert cache.stats() == {"hits": 1, "misses": 1, "size": 1}


def test_ttl_is_respected():
    clock = Clock()
    cache = EmbeddingCache(10, ttl_ms=5_000, clock=clock)
    cache.put("a", vec(1))
    clock.now += 4.999
    assert cache.get("a") is not None
    clock.now += 0.002
    assert cache.get("a") is None
    assert cache.stats() == {"hits": 1, "misses": 1, "size": 0}


def test_size_stat_drops_expired_entries():
    clock = Clock()
    cache = EmbeddingCache(10, ttl_ms=1_000, clock=clock)
    cache.put("a", vec(1))
    cache.put("b", vec(2))
    clock.now += 2
    assert cache.stats()["size"] == 0


def test_max_entries_evicts_the_least_recently_used():
    cache = EmbeddingCache(3, 60_000)
    for name in "abc":
        cache.put(name, vec(ord(name)))
    assert cache.get("a") is not None  # a is now the most recently used
    cache.put("d", vec(4))  # evicts b, the least recently used
    assert len(cache) == 3
    assert cache.get("b") is None
    assert all(cache.get(name) is not None for name in "acd")
    assert cache.evictions == 1


def test_zero_size_or_zero_ttl_disables_caching():
    for cache in (EmbeddingCache(0, 60_000), EmbeddingCache(10, 0)):
        cache.put("a", vec(1))
        assert cache.get("a") is None


def test_cached_vectors_cannot_be_changed_in_place():
    cache = EmbeddingCache(10, 60_000)
    original = vec(1)
    cache.put("a", original)
    original[0] = 99  # the caller's array is copied
    stored = cache.get("a")
    assert stored[0] == 1
    with pytest.raises(ValueError):
        stored[0] = 5


def test_concurrent_use_keeps_counts_exact():
    cache = EmbeddingCache(50, 60_000)

    def work(offset: int) -> None:
        for i in range(200):
            key = f"k{(i + offset) % 80}"
            if cache.get(key) is None:
                cache.put(key, vec(i))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stats = cache.stats()
    assert stats["hits"] + stats["misses"] == 8 * 200
    assert stats["size"] <= 50


# -- in front of a real source --------------------------------------------------------


@pytest.fixture
def server():
    s = shared(KEY)
    s.reset()
    yield s
    s.reset()


def remote_embeddings(server, clock=None, **config) -> tuple[Embeddings, MemorySettings]:
    cfg = EmbeddingConfig(providers=(("local", server.base_url),), api_keys=(("local", KEY),), **config)
    settings = MemorySettings(embedding_source="remote", embedding_provider_model="local/all-MiniLM-L6-v2")
    return Embeddings(cfg, clock=clock), settings


def test_repeated_text_is_embedded_once(server):
    embeddings, settings = remote_embeddings(server)
    _, first = embeddings.embed(settings, ["dark mode in my editor"])
    _, again = embeddings.embed(settings, ["dark mode in my editor"])
    assert np.array_equal(first, again)
    assert server.inputs == 1 and server.requests["/v1/embeddings"] == 1
    stats = embeddings.cache.stats()
    assert stats == {"hits": 1, "misses": 1, "size": 1}


def test_only_the_misses_are_sent_in_one_batch(server):
    embeddings, settings = remote_embeddings(server)
    embeddings.embed(settings, ["a fact", "another fact"])
    server.reset()
    _, matrix = embeddings.embed(settings, ["a fact", "third", "fourth", "third", "another fact"])
    assert matrix.shape == (5, 384)
    assert server.requests["/v1/embeddings"] == 1
    assert server.inputs == 2  # "third" and "fourth"; duplicates and hits are not sent
    assert np.array_equal(matrix[1], matrix[3])


def test_ttl_expiry_embeds_again(server):
    clock = Clock()
    embeddings, settings = remote_embeddings(server, clock=clock, cache_ttl_ms=1_000)
    embeddings.embed(settings, ["ttl text"])
    clock.now += 0.5
    embeddings.embed(settings, ["ttl text"])
    assert server.inputs == 1
    clock.now += 1.0
    embeddings.embed(settings, ["ttl text"])
    assert server.inputs == 2


def test_max_size_evicts_and_the_evicted_text_is_embedded_again(server):
    embeddings, settings = remote_embeddings(server, cache_max=2)
    for text in ("one", "two", "three"):
        embeddings.embed(settings, [text])
    assert embeddings.cache.stats()["size"] == 2
    server.reset()
    embeddings.embed(settings, ["three"])  # still cached
    assert server.inputs == 0
    embeddings.embed(settings, ["one"])  # evicted
    assert server.inputs == 1


def test_entries_are_per_source_and_model(server):
    embeddings, settings = remote_embeddings(server)
    embeddings.embed(settings, ["same text"])
    other = MemorySettings(embedding_source="remote", embedding_provider_model="local/other-model")
    embeddings.embed(other, ["same text"])
    assert server.inputs == 2
