"""The remote embedding source against a real loopback OpenAI-compatible server computing
MiniLM vectors (tests/support/model_server.py), and the URL policy before every call."""

from __future__ import annotations

import socket
import time

import numpy as np
import pytest

from memsvc.embedding import EmbeddingError, EmbeddingURLRefused
from memsvc.embedding.sources import RemoteSource
from memsvc.kernel.url_policy import AMBIGUOUS_IPV4, check_url
from tests.support.model_server import shared

KEY = "test-key-123"
MODEL = "all-MiniLM-L6-v2"


@pytest.fixture
def server():
    s = shared(KEY)
    s.reset()
    yield s
    s.reset()


def test_dimension_is_learned_from_the_first_answer(server):
    source = RemoteSource(server.base_url, MODEL, KEY)
    assert source.dimensions is None
    vectors = source.embed(["dark mode in my editor"])
    assert vectors.shape == (1, 384)
    assert vectors.dtype == np.float32
    assert source.dimensions == 384  # recorded: never "unknown" after one embedding
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_many_texts_are_one_request_and_the_key_is_sent(server):
    source = RemoteSource(server.base_url, MODEL, KEY)
    texts = [f"fact number {i}" for i in range(7)]
    vectors = source.embed(texts)
    assert vectors.shape == (7, 384)
    assert server.requests["/v1/embeddings"] == 1
    assert server.inputs == 7
    assert server.auth_headers == [f"Bearer {KEY}"]


def test_batch_size_splits_large_inputs(server):
    source = RemoteSource(server.base_url, MODEL, KEY, batch_size=3)
    assert source.embed([f"t{i}" for i in range(7)]).shape == (7, 384)
    assert server.requests["/v1/embeddings"] == 3


def test_rows_follow_the_index_field_not_the_answer_order(server):
    source = RemoteSource(server.base_url, MODEL, KEY)
    texts = ["dark mode in my editor", "I will use PostgreSQL", "tabs, not spaces"]
    in_order = source.embed(texts)
    server.mode = "shuffle"
    shuffled = source.embed(texts)
    assert np.allclose(in_order, shuffled, atol=1e-6)


def test_real_vectors_rank_the_related_fact_first(server):
    source = RemoteSource(server.base_url, MODEL, KEY)
    fact, query, other = source.embed(
        ["dark mode in my editor", "What editor theme do I like?", "I will use PostgreSQL"]
    )
    assert float(query @ fact) > float(query @ other)


def test_wrong_key_is_an_error_that_does_not_echo_the_key(server):
    secret = "sk-wrong-SECRET-9876"
    source = RemoteSource(server.base_url, MODEL, secret)
    with pytest.raises(EmbeddingError) as info:
        source.embed(["x"])
    message = str(info.value)
    assert "401" in message
    assert secret not in message and "SECRET" not in message
    assert server.base_url not in message  # the URL is never echoed either, the host at most
    assert secret not in repr(source)
    assert source.last_error == message


def test_missing_key_is_refused_by_a_server_that_wants_one(server):
    with pytest.raises(EmbeddingError, match="401"):
        RemoteSource(server.base_url, MODEL).embed(["x"])
    assert server.auth_headers == [None]


@pytest.mark.parametrize(
    "mode, fragment",
    [
        ("fail", "HTTP 500"),
        ("garbage", "wrong shape"),
        ("short", "wrong shape"),
    ],
)
def test_bad_answers_are_embedding_errors(server, mode, fragment):
    server.mode = mode
    source = RemoteSource(server.base_url, MODEL, KEY)
    with pytest.raises(EmbeddingError, match=fragment):
        source.embed(["a", "b"])
    assert source.dimensions is None  # nothing learned from a bad answer


def test_a_hanging_endpoint_times_out(server):
    server.mode = "hang"
    source = RemoteSource(server.base_url, MODEL, KEY, timeout_s=0.5)
    started = time.monotonic()
    with pytest.raises(EmbeddingError, match="did not answer in time"):
        source.embed(["a"])
    assert time.monotonic() - started < 3


def test_a_closed_port_is_an_embedding_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(EmbeddingError, match="could not reach 127.0.0.1"):
        RemoteSource(f"http://127.0.0.1:{port}/v1", MODEL, KEY, timeout_s=2).embed(["a"])


@pytest.mark.parametrize(
    "url, problem",
    [
        ("http://user:pass@127.0.0.1:{port}/v1", "credentials"),
        ("http://127.0.0.1:{port}/v1?token=abc", "query string"),
        ("file:///etc/passwd", "http or https"),
        ("http://169.254.169.254/latest", "link-local or cloud metadata"),
        ("http://metadata.google.internal/v1", "link-local or cloud metadata"),
        ("http://[fe80::1]/v1", "link-local or cloud metadata"),
        ("http://[::ffff:169.254.169.254]/v1", "link-local or cloud metadata"),
        ("http://[fd00:ec2::254]/v1", "link-local or cloud metadata"),
    ],
)
def test_url_policy_refuses_before_any_request(server, url, problem):
    url = url.format(port=server.port)
    source = RemoteSource(url, MODEL, KEY)
    with pytest.raises(EmbeddingURLRefused) as info:
        source.embed(["a"])
    assert problem in str(info.value)
    assert "pass@" not in str(info.value) and "token=abc" not in str(info.value)
    assert server.requests["/v1/embeddings"] == 0


@pytest.mark.parametrize(
    "host", ["2852039166", "0xa9fea9fe", "169.254.43518", "0251.0376.0251.0376", "169.254.169.254."]
)
def test_ambiguous_spellings_of_an_ipv4_address_are_refused_before_any_request(server, host):
    """Spellings of 169.254.169.254 that the C resolver turns into the metadata address, while
    httpx passes them on as names: refused as written, so the check and the connection can
    never read one host two ways."""
    url = f"http://{host}:{server.port}/v1"
    assert check_url(url) == AMBIGUOUS_IPV4
    with pytest.raises(EmbeddingURLRefused, match="four decimal numbers"):
        RemoteSource(url, MODEL, KEY).embed(["a"])
    assert server.requests["/v1/embeddings"] == 0
