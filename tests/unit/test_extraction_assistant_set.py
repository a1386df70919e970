"""The assistant turns of the labelled extraction set: the committed file is what the
generator gives, and it covers every language and kind with several hundred rows."""

from __future__ import annotations

from collections import Counter

from bench import extraction_assistant_set as generated
from bench.extraction_bench import ASSISTANT_SET, load


def test_committed_set_is_the_generators_output() -> None:
    assert ASSISTANT_SET.read_text(encoding="utf-8") == generated.render(), (
        "regenerate with: .venv/bin/python bench/extraction_assistant_set.py"
    )


def test_set_covers_every_language_and_kind() -> None:
    rows = [r for r in load() if r["speaker"] == "assistant"]
    assert len(rows) >= 400 and len({r["id"] for r in rows}) == len(rows)
    by_language = Counter(r["lang"] for r in rows)
    assert set(by_language) == {"en", "ja", "zh", "ru"} and min(by_language.values()) >= 100
    kinds = Counter(r["kind"] for r in rows)
    assert set(kinds) == {"restatement", "assistant-self", "question", "suggestion", "hypothetical"}
    assert all(bool(r["facts"]) == (r["kind"] == "restatement") for r in rows)
    assert all(r["speaker"] == "user" for r in load() if not r["id"].startswith("asst-"))
