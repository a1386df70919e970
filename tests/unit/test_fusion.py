"""Hybrid fusion: plain equal-weight RRF, the gated RRF (strong keyword matches only), and the
gated convex combination that is the default (MEMORY_FUSION; its gate decided per query), with
exact scores on small lists."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memsvc.config import Config, ConfigError
from memsvc.core.retrieval.ranking import (
    DEFAULT_FUSION,
    FUSION_GATED,
    FUSION_GATED_CONVEX,
    FUSION_RRF,
    FUSIONS,
    KEYWORD_WEIGHT,
    Candidate,
    query_gate,
    strong_match,
)
from memsvc.kernel.models import Memory
from memsvc.kernel.text import scoring_tokens

NOW = datetime(2026, 11, 30, tzinfo=UTC)


def _memory(content: str, key: str | None = None, metadata: dict | None = None) -> Memory:
    return Memory(
        id="id1",
        memory_id=1,
        api_key_id="k",
        session_id=None,
        type="factual",
        key=key,
        content=content,
        metadata=metadata or {},
        created_at=NOW,
        updated_at=NOW,
    )


def _strong(content: str, query: str, key: str | None = None) -> bool:
    return strong_match(_memory(content, key), query.lower(), scoring_tokens(query))


def _fuse(name: str, keyword: list[Candidate], vector: list[str], k: int = 60) -> dict[str, float]:
    return FUSIONS[name].fuse(keyword, [Candidate(i, 0.0) for i in vector], k)


# Keyword list: "a" (a weak match: one shared word), then "b" (strong); vector list: "a", then "c".
KEYWORD = [Candidate("a", 9.0, strong=False), Candidate("b", 8.0, strong=True)]
VECTOR = ["a", "c"]


def test_the_default_is_gated_convex_in_the_config_and_the_code():
    # Changed deliberately from gated-rrf: on real conversations (bench/realtalk_bench.py)
    # gated-convex finds more of the right turns with the same lists; gated-rrf stays one setting away.
    assert DEFAULT_FUSION == FUSION_GATED_CONVEX == Config().fusion
    assert set(FUSIONS) == {"gated-convex", "gated-rrf", "rrf"}
    assert KEYWORD_WEIGHT == 0.8


def test_gated_convex_weighs_each_list_by_its_share_of_the_best_score():
    keyword = [Candidate("b", 8.0, strong=True), Candidate("d", 4.0, strong=True)]
    vector = [Candidate("a", 0.5), Candidate("c", 0.25)]
    assert FUSIONS[FUSION_GATED_CONVEX].fuse(keyword, vector, 60) == pytest.approx(
        {"a": 0.2 * 1.0, "b": 0.8 * 1.0, "c": 0.2 * 0.5, "d": 0.8 * 0.5}
    )


def test_gated_convex_counts_every_keyword_match_once_one_is_strong():
    # The list holds a strong match ("b"), so the weak "a" counts too, by its share of the best (9.0).
    keyword = [Candidate("a", 9.0, strong=False), Candidate("b", 8.0, strong=True)]
    vector = [Candidate("a", 0.5), Candidate("c", 0.25)]
    assert FUSIONS[FUSION_GATED_CONVEX].fuse(keyword, vector, 60) == pytest.approx(
        {"a": 0.8 * 1.0 + 0.2 * 1.0, "b": 0.8 * 8 / 9, "c": 0.2 * 0.5}
    )
    assert query_gate(keyword) == keyword


def test_gated_convex_keeps_the_vector_order_when_no_keyword_match_is_strong():
    weak = [Candidate("x", 3.0, strong=False), Candidate("c", 2.0, strong=False)]
    vector = [Candidate("c", 0.6), Candidate("e", 0.3)]
    assert FUSIONS[FUSION_GATED_CONVEX].fuse(weak, vector, 60) == pytest.approx({"c": 0.2, "e": 0.1})
    assert query_gate(weak) == []
    assert FUSIONS[FUSION_GATED_CONVEX].fuse([], [], 60) == {}


def test_equal_rrf_keeps_the_documented_numbers():
    # First in both lists: 2/61; first in one only: 1/61; second in one only: 1/62.
    assert _fuse(FUSION_RRF, [Candidate("a", 1.0)], ["a"]) == pytest.approx({"a": 2 / 61})
    assert _fuse(FUSION_RRF, [Candidate("a", 1.0)], ["b"]) == pytest.approx({"a": 1 / 61, "b": 1 / 61})
    assert _fuse(FUSION_RRF, KEYWORD, VECTOR) == pytest.approx({"a": 2 / 61, "b": 1 / 62, "c": 1 / 62})


def test_equal_rrf_ignores_whether_a_keyword_match_is_strong():
    assert _fuse(FUSION_RRF, [Candidate("a", 1.0, strong=False)], ["a"]) == pytest.approx({"a": 2 / 61})


def test_gated_rrf_counts_only_strong_keyword_matches_ranked_among_themselves():
    # "a" keeps only its vector rank; "b" is the first strong keyword match: 1/61.
    assert _fuse(FUSION_GATED, KEYWORD, VECTOR) == pytest.approx({"a": 1 / 61, "b": 1 / 61, "c": 1 / 62})


def test_gated_rrf_scores_a_strong_first_in_both_2_over_61_like_rrf():
    strong = [Candidate("a", 30.0, strong=True), Candidate("b", 3.0, strong=True)]
    assert _fuse(FUSION_GATED, strong, VECTOR) == _fuse(FUSION_RRF, strong, VECTOR)
    assert _fuse(FUSION_GATED, strong, VECTOR) == pytest.approx({"a": 2 / 61, "b": 1 / 62, "c": 1 / 62})


def test_gated_rrf_drops_weak_keyword_only_matches_and_uses_k():
    weak = [Candidate("x", 3.0, strong=False), Candidate("y", 3.0, strong=False)]
    assert _fuse(FUSION_GATED, weak, ["c"], k=10) == pytest.approx({"c": 1 / 11})
    assert _fuse(FUSION_RRF, weak, ["c"], k=10) == pytest.approx({"x": 1 / 11, "y": 1 / 12, "c": 1 / 11})


@pytest.mark.parametrize(
    "content, query, key, strong",
    [
        ("User prefers dark mode", "dark mode", None, True),  # the phrase occurs
        ("My cat is called Pixel", "Pixel", None, True),  # a one-word query is its phrase
        ("I drive a 2015 Subaru Outback", "Subaru Outback", None, True),
        ("Our team standup is at 9:30 every weekday", "standup weekday time", None, True),  # two of three terms
        ("tea", "oolong kettle", "oolong:kettle", True),  # terms in the key count
        ("I usually run in the morning", "What do I do in the morning to relax?", None, False),  # one shared word
        ("I work night shifts at the hospital", "What is my job and when do I work?", None, False),
        ("unrelated words", "dark mode", None, False),
    ],
)
def test_strong_match_is_the_phrase_or_two_distinct_query_terms(content, query, key, strong):
    assert _strong(content, query, key) is strong


def test_strong_match_counts_a_repeated_term_once():
    assert not _strong("night night night", "night night shifts")


def test_config_refuses_an_unknown_fusion():
    Config(fusion="rrf").validate()
    with pytest.raises(ConfigError, match="MEMORY_FUSION must be gated-convex or gated-rrf or rrf"):
        Config(fusion="weighted").validate()
