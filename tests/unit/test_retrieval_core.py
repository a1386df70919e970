"""Core retrieval rules: the relevance score, the budget walk, query terms."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from memsvc.core.retrieval.ranking import RetrievedItem, apply_budget, relevance
from memsvc.kernel.models import Memory, estimate_tokens
from memsvc.kernel.text import first_sentences, ngrams, scoring_tokens, terms

NOW = datetime(2026, 11, 30, tzinfo=UTC)


def _memory(content: str, key: str | None = None, metadata: dict | None = None, n: int = 1) -> Memory:
    return Memory(
        id=f"id{n}",
        memory_id=n,
        api_key_id="k",
        session_id=None,
        type="factual",
        key=key,
        content=content,
        metadata=metadata or {},
        created_at=NOW,
        updated_at=NOW,
    )


def test_relevance_example_of_the_spec_is_38():
    memory = _memory("User prefers dark mode", key="preference:dark_mode")
    assert relevance(memory, "dark mode", scoring_tokens("dark mode")) == 38


def test_relevance_counts_metadata_values_not_keys():
    memory = _memory("tea", metadata={"language": "en", "source": "llm_response", "topic": "kettle"})
    assert relevance(memory, "language", scoring_tokens("language")) == 0
    assert relevance(memory, "kettle", scoring_tokens("kettle")) == 20 + 3


def test_estimate_tokens_is_ceil_chars_over_4():
    assert [estimate_tokens(t) for t in ("abcd", "abcde", "x" * 100, "")] == [1, 2, 25, 0]


def _items(sizes: list[int]) -> list[RetrievedItem]:
    return [RetrievedItem(_memory("x" * s, n=i), 1.0, estimate_tokens("x" * s), "keyword") for i, s in enumerate(sizes)]


def test_budget_skips_an_oversized_item_and_keeps_filling():
    taken = apply_budget(_items([400, 4, 8, 400, 4]), budget=10)
    assert [i.tokens for i in taken] == [1, 2, 1]


@given(
    st.lists(st.integers(min_value=0, max_value=4000), max_size=40),
    st.integers(min_value=1, max_value=16000),
    st.none() | st.integers(min_value=1, max_value=100),
)
def test_budget_is_never_exceeded_and_is_greedy(sizes, budget, limit):
    items = _items(sizes)
    taken = apply_budget(items, budget, limit)
    assert sum(i.tokens for i in taken) <= budget
    assert limit is None or len(taken) <= limit
    if limit is None:  # every skipped item really did not fit at the moment it was reached
        used = 0
        chosen = {id(i) for i in taken}
        for item in items:
            if id(item) in chosen:
                used += item.tokens
            else:
                assert used + item.tokens > budget


def test_terms_drop_function_words_and_split_cjk_runs():
    t = terms("What editor theme do I like? 我喜欢深色模式")
    assert t.words == ("editor", "theme", "like")
    assert t.cjk_runs == ("我喜欢深色模式",)
    assert "深色" in scoring_tokens("深色模式") and ngrams("深色模式", 3) == ["深色模", "色模式"]
    # The iteration mark belongs to the word it repeats a character of.
    assert terms("佐々木さんと時々会う").cjk_runs == ("佐々木さんと時々会う",)


def test_terms_never_contain_query_syntax():
    for text in [
        "C++ language",
        "Johnson & Johnson",
        "parens(test)",
        "asterisk*wildcard",
        "single'quote",
        '"quoted phrase"',
    ]:
        for word in terms(text).words:
            assert word.isalnum(), (text, word)


def test_first_three_sentences():
    assert first_sentences("Alpha. Beta. Gamma. Delta.") == "Alpha. Beta. Gamma."
    assert first_sentences("一つ。二つ。三つ。四つ。") == "一つ。 二つ。 三つ。"
    assert first_sentences("no full stop") == "no full stop"


def test_access_recorder_coalesces_a_burst_into_one_write():
    import threading

    from memsvc.core.access import AccessRecorder
    from memsvc.core.background import BackgroundWriter

    writes: list[dict[str, int]] = []
    gate = threading.Event()
    background = BackgroundWriter()
    background.submit("blocked", gate.wait)  # hold the writer so the burst queues up
    recorder = AccessRecorder(lambda counts: writes.append(dict(counts)), background)
    for _ in range(50):
        recorder.record(["a", "b"])
    recorder.record(["a"])
    gate.set()
    background.drain()
    assert writes == [{"a": 51, "b": 50}]


def test_access_recorder_waits_its_delay_and_flush_writes_at_once():
    """With a delay, nothing is written until the delay passes (or flush is called), and
    every access recorded meanwhile goes into that one write."""
    import time

    from memsvc.core.access import AccessRecorder
    from memsvc.core.background import BackgroundWriter

    writes: list[dict[str, int]] = []
    background = BackgroundWriter()
    slow = AccessRecorder(lambda counts: writes.append(dict(counts)), background, delay_s=3600)
    slow.record(["a"])
    slow.record(["a", "b"])
    assert slow.pending() and background.pending() == 0 and writes == []
    slow.flush()
    background.drain()
    assert writes == [{"a": 2, "b": 1}] and not slow.pending()

    writes.clear()
    background = BackgroundWriter()
    timed = AccessRecorder(lambda counts: writes.append(dict(counts)), background, delay_s=0.05)
    timed.record(["c"])
    timed.record(["c"])
    deadline = time.monotonic() + 30
    while (timed.pending() or background.pending()) and time.monotonic() < deadline:
        time.sleep(0.01)
    background.drain()
    assert writes == [{"c": 2}]


def test_access_recorded_after_shutdown_is_dropped_quietly():
    """A retrieval racing the shutdown (or a delayed flush firing after it) must not raise:
    the writer is gone and the counters are statistics."""
    from memsvc.core.access import AccessRecorder
    from memsvc.core.background import BackgroundWriter

    writes: list[dict[str, int]] = []
    background = BackgroundWriter()
    background.drain()
    recorder = AccessRecorder(lambda counts: writes.append(dict(counts)), background)
    recorder.record(["a"])
    recorder.flush()
    assert writes == []
