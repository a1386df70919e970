"""The multilingual conversational retrieval set: parse the hand-written conversations in
bench/multilingual/src/, write bench/multilingual/set.jsonl, check it and print its counts.

    .venv/bin/python bench/multilingual_set.py           # rebuild set.jsonl and print the counts
    .venv/bin/python bench/multilingual_set.py --check   # only check the committed file

Source format (one file per conversation, UTF-8):

    id: <conversation id>
    lang: ja | zh | ru | ja-en | ru-en | zh-ja
    about: <one line>
    == D<n> <YYYY-MM-DD HH:MM>          a session and when it started (UTC)
    {tag} Speaker: text                  a turn; the optional {tag} names it for questions
    ? <type> <question lang> <tag,tag> | <question text>

A turn's id is "D<session>:<position in its session>" (1-based), as in LoCoMo and REALTALK.
Its time is the session's start plus a minute and a half per earlier turn in the session
(and up to a minute more by the turn's length), so turns in a session are ordered and a
session's turns share its day. Evidence tags resolve to turn ids when the set is built.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

FOLDER = Path(__file__).resolve().parent / "multilingual"
SOURCES = FOLDER / "src"
SET = FOLDER / "set.jsonl"

LANGS = ("ja", "zh", "ru", "ja-en", "ru-en", "zh-ja")
QUESTION_LANGS = ("ja", "zh", "ru", "en")
TYPES = ("single", "paraphrase", "multi", "temporal", "cross-lingual")

_SESSION = re.compile(r"== (D\d+) (\d{4}-\d\d-\d\d \d\d:\d\d)$")
_TURN = re.compile(r"(?:\{(\w+)\} )?([^:：]{1,20}): (.+)$")
_QUESTION = re.compile(r"\? (\S+) (\S+) ([\w,]+) \| (.+)$")


class SetError(ValueError):
    pass


def _turn_time(start: datetime, position: int, text: str) -> datetime:
    return start + timedelta(seconds=90 * (position - 1) + (len(text) * 7) % 60)


def parse(path: Path) -> dict[str, Any]:
    """One conversation from its source file; raises SetError on anything malformed."""
    head: dict[str, str] = {}
    sessions: list[dict[str, str]] = []
    turns: list[dict[str, str]] = []
    tags: dict[str, str] = {}
    raw_questions: list[tuple[int, str, str, list[str], str]] = []
    start = None
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = line.strip()
        where = f"{path.name}:{number}"
        if not line:
            continue
        if m := _SESSION.match(line):
            start = datetime.strptime(m.group(2), "%Y-%m-%d %H:%M").replace(tzinfo=UTC)
            sessions.append({"id": m.group(1), "started": start.isoformat()})
        elif m := _QUESTION.match(line):
            raw_questions.append((number, m.group(1), m.group(2), m.group(3).split(","), m.group(4)))
        elif not sessions and (m := re.match(r"(id|lang|about): (.+)$", line)):
            head[m.group(1)] = m.group(2)
        elif m := _TURN.match(line):
            if start is None:
                raise SetError(f"{where}: a turn before the first session")
            session = sessions[-1]["id"]
            position = sum(1 for t in turns if t["session"] == session) + 1
            turn_id = f"{session}:{position}"
            if m.group(1):
                if m.group(1) in tags:
                    raise SetError(f"{where}: tag {{{m.group(1)}}} used twice")
                tags[m.group(1)] = turn_id
            text = m.group(3).strip()
            turns.append(
                {
                    "id": turn_id,
                    "session": session,
                    "speaker": m.group(2).strip(),
                    "text": text,
                    "at": _turn_time(start, position, text).isoformat(),
                }
            )
        else:
            raise SetError(f"{where}: not a header, session, turn or question: {line!r}")
    for key in ("id", "lang", "about"):
        if key not in head:
            raise SetError(f"{path.name}: no '{key}:' header")
    questions = []
    for i, (number, kind, lang, names, text) in enumerate(raw_questions, start=1):
        missing = [n for n in names if n not in tags]
        if missing:
            raise SetError(f"{path.name}:{number}: evidence tag(s) {missing} name no turn")
        questions.append(
            {
                "id": f"{head['id']}/q{i:02d}",
                "question": text,
                "lang": lang,
                "type": kind,
                "evidence": [tags[n] for n in names],
            }
        )
    speakers = sorted({t["speaker"] for t in turns}, key=[t["speaker"] for t in turns].index)
    return {
        "id": head["id"],
        "lang": head["lang"],
        "about": head["about"],
        "speakers": speakers,
        "sessions": sessions,
        "turns": turns,
        "questions": questions,
    }


def build() -> list[dict[str, Any]]:
    convs = [parse(p) for p in sorted(SOURCES.glob("*.txt"))]
    problems = check(convs)
    if problems:
        raise SetError("; ".join(problems))
    return convs


def render(convs: list[dict[str, Any]] | None = None) -> str:
    return "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in (convs if convs is not None else build()))


def load(path: Path = SET) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def check(convs: list[dict[str, Any]]) -> list[str]:
    """Everything wrong with the set (empty when it is sound)."""
    problems = []
    conv_ids = [c["id"] for c in convs]
    if len(set(conv_ids)) != len(conv_ids):
        problems.append("conversation ids repeat")
    question_ids = [q["id"] for c in convs for q in c["questions"]]
    if len(set(question_ids)) != len(question_ids):
        problems.append("question ids repeat")
    for c in convs:
        ids = [t["id"] for t in c["turns"]]
        if len(set(ids)) != len(ids):
            problems.append(f"{c['id']}: turn ids repeat")
        if c["lang"] not in LANGS:
            problems.append(f"{c['id']}: unknown language {c['lang']!r}")
        if not 80 <= len(ids) <= 150:
            problems.append(f"{c['id']}: {len(ids)} turns (80–150 wanted)")
        if len(c["sessions"]) < 3:
            problems.append(f"{c['id']}: fewer than 3 sessions")
        starts = [s["started"] for s in c["sessions"]]
        if starts != sorted(starts) or len({s[:10] for s in starts}) != len(starts):
            problems.append(f"{c['id']}: sessions not on distinct, increasing days")
        known = set(ids)
        for q in c["questions"]:
            if not q["evidence"]:
                problems.append(f"{q['id']}: no evidence")
            if set(q["evidence"]) - known:
                problems.append(f"{q['id']}: evidence {sorted(set(q['evidence']) - known)} names no turn")
            if len(set(q["evidence"])) != len(q["evidence"]):
                problems.append(f"{q['id']}: evidence repeats")
            if q["type"] not in TYPES:
                problems.append(f"{q['id']}: unknown type {q['type']!r}")
            if q["lang"] not in QUESTION_LANGS:
                problems.append(f"{q['id']}: unknown question language {q['lang']!r}")
            if q["type"] == "multi" and len(q["evidence"]) < 2:
                problems.append(f"{q['id']}: a multi question with one evidence turn")
            if q["type"] in ("single", "paraphrase") and len(q["evidence"]) != 1:
                problems.append(f"{q['id']}: a {q['type']} question needs exactly one evidence turn")
    if len(question_ids) < 300:
        problems.append(f"{len(question_ids)} questions (at least 300 wanted)")
    return problems


def counts(convs: list[dict[str, Any]]) -> dict[str, Any]:
    questions = [(c["lang"], q) for c in convs for q in c["questions"]]
    return {
        "conversations": len(convs),
        "sessions": sum(len(c["sessions"]) for c in convs),
        "turns": sum(len(c["turns"]) for c in convs),
        "questions": len(questions),
        "by_language": dict(Counter(lang for lang, _ in questions)),
        "turns_by_language": dict(Counter(c["lang"] for c in convs for _ in c["turns"])),
        "by_type": dict(Counter(q["type"] for _, q in questions)),
        "by_question_language": dict(Counter(q["lang"] for _, q in questions)),
        "by_language_and_type": {
            f"{lang} {kind}": n
            for (lang, kind), n in sorted(Counter((lang, q["type"]) for lang, q in questions).items())
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="check the committed set.jsonl only")
    args = parser.parse_args()
    if args.check:
        convs = load()
        problems = check(convs)
        if SET.read_text(encoding="utf-8") != render():
            problems.append("set.jsonl differs from what the sources give: rebuild it")
    else:
        convs = build()
        SET.write_text(render(convs), encoding="utf-8")
        problems = []
    print(json.dumps(counts(convs), ensure_ascii=False, indent=1))
    for p in problems:
        print("PROBLEM:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    raise SystemExit(main())
