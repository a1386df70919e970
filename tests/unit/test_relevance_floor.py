"""The relevance floor: keyword overlap, vector similarity per tier, and the defaults."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memsvc.core.retrieval.ranking import RetrievedItem
from memsvc.core.retrieval.relevance_floor import (
    KEYWORD_FLOOR,
    Floor,
    above_floor,
    floor_for,
    keyword_overlap,
    limit_problem,
    min_score_problem,
    terms_of,
    tokens_of,
    vector_similarity,
)
from memsvc.kernel.models import Memory
from memsvc.kernel.text import scoring_tokens


def memory(content: str, key: str = "") -> Memory:
    now = datetime.now(UTC)
    return Memory(
        id=content[:20],
        memory_id=1,
        api_key_id="k",
        session_id=None,
        type="factual",
        key=key,
        content=content,
        metadata={},
        created_at=now,
        updated_at=now,
    )


def item(content: str, key: str = "", tier: str = "keyword", vec: float | None = None) -> RetrievedItem:
    return RetrievedItem(memory(content, key), 1.0, 10, tier, vec_score=vec)


def overlap(query: str, content: str, key: str = "") -> float:
    return keyword_overlap(terms_of(query), item(content, key))


@pytest.mark.parametrize(
    "query,content,expected",
    [
        ("Which database will I use for this project?", "I will use PostgreSQL for this project", 4 / 6),
        (
            "Can you help me write a Python script to parse the logs of my project?",
            "I will use PostgreSQL for this project",
            2 / 10,
        ),
        ("How should you format answers? concise?", "User prefers concise answers", 4 / 6),
        ("Where do I live?", "User lives in Berlin", 2 / 3),  # live ~ lives
        ("Which tool do I use?", "User prefers the terminal", 0.0),  # "use" is not "user"
        ("What is the capital of France?", "User lives in Berlin", 0.0),
        ("", "anything", 0.0),
    ],
)
def test_keyword_overlap_is_the_dice_coefficient_of_the_terms(query: str, content: str, expected: float) -> None:
    assert overlap(query, content) == pytest.approx(expected)


def test_a_question_naming_the_key_counts_as_shared() -> None:
    assert overlap("decision db?", "I will use PostgreSQL", key="decision:db") == pytest.approx(1.0)


def test_the_default_keyword_floor_keeps_a_short_match_and_drops_one_word_of_a_long_question() -> None:
    assert overlap("How should you format answers? concise?", "User usually answers in bullet points") >= KEYWORD_FLOOR
    assert (
        overlap(
            "Can you help me write a Python script to parse the logs of my project?",
            "I will use PostgreSQL for this project",
        )
        < KEYWORD_FLOOR
    )


def test_vector_similarity_is_cosine_in_every_tier() -> None:
    cosine = 0.6
    sqlite_score = 1 / (1 + (1 - cosine))  # sqlite-vec: 1/(1+cosine distance)
    assert vector_similarity(item("x", tier="vector", vec=sqlite_score), "sqlite-vec") == pytest.approx(cosine)
    assert vector_similarity(item("x", tier="hybrid-rrf", vec=sqlite_score), "sqlite-vec") == pytest.approx(cosine)
    assert vector_similarity(item("x", tier="qdrant", vec=cosine), "qdrant") == pytest.approx(cosine)
    assert vector_similarity(item("x", tier="hybrid-rrf", vec=cosine), "qdrant") == pytest.approx(cosine)
    assert vector_similarity(item("x", tier="keyword"), "none") is None


def test_defaults_per_embedding_source_and_an_explicit_floor_for_both_signals() -> None:
    assert floor_for(None, "static").vector > floor_for(None, "transformers").vector
    assert floor_for(None, "remote") == Floor(KEYWORD_FLOOR, 0.35)
    assert floor_for(0.4, "static") == Floor(0.4, 0.4)
    assert floor_for(0.0, "static").off


def test_recency_only_items_never_pass_a_floor_and_pass_when_it_is_off() -> None:
    recent = [item("User lives in Berlin", tier="recent"), item("User has a dog", tier="recent")]
    assert above_floor(recent, "Write a haiku", Floor(0.1, 0.1), "none") == ([], 2)
    assert above_floor(recent, "Write a haiku", Floor(0.0, 0.0), "none") == (recent, 0)


def test_either_signal_passes() -> None:
    by_vector = item("User has a dog named Rex", tier="hybrid-rrf", vec=1 / (1 + 0.5))  # cosine 0.5
    by_words = item("User lives in Berlin", tier="keyword")
    kept, dropped = above_floor([by_vector, by_words], "Where do I live? Any pet?", Floor(0.45, 0.45), "sqlite-vec")
    assert kept == [by_vector, by_words] and dropped == 0


@pytest.mark.parametrize(
    "value,ok",
    [
        (None, True),
        (0.0, True),
        (1.0, True),
        (0.5, True),
        (-0.01, False),
        (1.01, False),
        (math.nan, False),
        (math.inf, False),
    ],
)
def test_min_score_range(value: float | None, ok: bool) -> None:
    assert (min_score_problem(value) == "") is ok


@pytest.mark.parametrize("value,ok", [(None, True), (1, True), (100, True), (0, False), (101, False), (-1, False)])
def test_limit_range(value: int | None, ok: bool) -> None:
    assert (limit_problem(value) == "") is ok


@settings(max_examples=300)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=80))
def test_the_ascii_shortcut_gives_the_relevance_scores_own_terms(text: str) -> None:
    assert list(dict.fromkeys(tokens_of(text))) == scoring_tokens(text)


def test_non_ascii_text_uses_the_full_tokenizer() -> None:
    assert overlap("Ｐｏｓｔｇｒｅｓ？", "Postgres") == pytest.approx(1.0)  # full-width letters fold
    assert overlap("数据库", "我用数据库") > 0  # CJK bigrams


def test_search_has_its_own_lower_defaults_by_the_same_rule() -> None:
    for source in ("static", "transformers", "remote"):
        search, inject = floor_for(None, source, search=True), floor_for(None, source)
        assert 0 < search.keyword < inject.keyword and 0 < search.vector < inject.vector
    assert floor_for(0.4, "static", search=True) == Floor(0.4, 0.4)
