"""The multilingual conversational retrieval set (bench/multilingual/set.jsonl): the committed
file is what its sources give, and it is sound — at least 300 questions, every evidence id a
turn of its conversation, every language and type present, ids unique."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from bench import multilingual_set as ml


def test_committed_set_is_what_the_sources_give() -> None:
    assert ml.SET.read_text(encoding="utf-8") == ml.render(), "rebuild with: .venv/bin/python bench/multilingual_set.py"


def test_set_has_no_problems() -> None:
    assert ml.check(ml.load()) == []


def test_every_evidence_id_names_a_turn_of_its_conversation() -> None:
    convs = ml.load()
    questions = [q for c in convs for q in c["questions"]]
    assert len(questions) >= 300
    for c in convs:
        turns = {t["id"] for t in c["turns"]}
        for q in c["questions"]:
            assert q["evidence"], q["id"]
            assert set(q["evidence"]) <= turns, q["id"]


def test_ids_are_unique() -> None:
    convs = ml.load()
    assert len({c["id"] for c in convs}) == len(convs)
    questions = [q["id"] for c in convs for q in c["questions"]]
    assert len(set(questions)) == len(questions)
    for c in convs:
        ids = [t["id"] for t in c["turns"]]
        assert len(set(ids)) == len(ids), c["id"]
        assert all(t["id"].split(":")[0] == t["session"] for t in c["turns"])


def test_every_language_and_type_is_present() -> None:
    convs = ml.load()
    by_lang = Counter(c["lang"] for c in convs for _ in c["questions"])
    assert set(by_lang) == set(ml.LANGS)
    assert min(by_lang[lang] for lang in ("ja", "zh", "ru")) >= 60
    types = Counter(q["type"] for c in convs for q in c["questions"])
    assert set(types) == set(ml.TYPES) and min(types.values()) >= 30
    assert set(Counter(q["lang"] for c in convs for q in c["questions"])) == set(ml.QUESTION_LANGS)


def test_turns_are_timestamped_in_order_with_speakers() -> None:
    for c in ml.load():
        assert 80 <= len(c["turns"]) <= 150 and len(c["sessions"]) >= 3
        times = [datetime.fromisoformat(t["at"]) for t in c["turns"]]
        assert times == sorted(times), c["id"]
        assert all(t["speaker"] in c["speakers"] and t["text"] for t in c["turns"])
        assert len(c["speakers"]) == 2


def test_a_broken_evidence_id_is_caught() -> None:
    convs = ml.load()
    convs[0]["questions"][0] = dict(convs[0]["questions"][0], evidence=["D99:1"])
    convs[1]["questions"][0] = dict(convs[1]["questions"][0], evidence=[])
    problems = ml.check(convs)
    assert any("D99:1" in p for p in problems) and any("no evidence" in p for p in problems)
