"""Extraction quality: precision and recall of the rule-based extractor on a labelled set,
by speaker.

    .venv/bin/python bench/extraction_bench.py

The set is bench/extraction_set.jsonl: our own sentences in English, Japanese, Chinese and
Russian, one JSON object a line: `text`, `lang`, `kind` (statement, negation, hypothetical,
question, reported, plain) and `facts`, the facts a careful reader would store for the user
(none for a question, a hypothetical, or what someone else likes). Those are the user's
words. The assistant's turns are bench/extraction_assistant_set.jsonl (generated from
templates × slots by bench/extraction_assistant_set.py, `speaker: "assistant"`): its
restatements of the user must give the user's fact, its own first-person statements,
questions, suggestions and hypotheticals nothing. Each row is extracted as its speaker's
words (`extract_facts(text, speaker)`), and precision and recall are reported per speaker. Each expected fact is
`{category, polarity, about}`: `about` is the user's words the fact is about ("long
answers", "Emma"), and `category` may list accepted alternatives as "pattern/diet".

Fact-level match. A predicted fact matches an expected one when all of these hold:
- the category is the expected one (or one of its alternatives);
- the polarity is the same (positive / negative);
- the stored content, normalised (NFKC, case-folded, punctuation removed, whitespace
  collapsed), contains the normalised `about` (as a substring, or word by word as
  consecutive words that start with `about`'s words, so that "answer in bullet points"
  is found in "User usually answers in bullet points"), and names the user as its subject
  ("user", "ユーザー", "用户", "пользовател…"): a fact that says "long answers" without
  "does not like" and without a subject does not count.
Each expected fact is matched at most once (greedy, in order). Precision = matched
predictions / predictions; recall = matched expected facts / expected facts.

Held-out split: every 5th sentence of each file (0-based index 4, 9, 14, ...) is held out;
the rules were developed looking only at the misses of the other four fifths, and both
parts are reported. The bench runs extract_facts in process: extraction is pure Python, and
the stored content is exactly the fact's content (the service tests check that through the
real server).
"""

from __future__ import annotations

import json
import sys
import time
import unicodedata
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import BENCH, Target, md_table, write_results  # noqa: E402
from memsvc.core.extraction.facts import Fact, extract_facts  # noqa: E402

SET = BENCH / "extraction_set.jsonl"
ASSISTANT_SET = BENCH / "extraction_assistant_set.jsonl"
SPEAKERS = ("user", "assistant")
HELD_OUT_EVERY = 5
PRECISION_TARGET = 0.95
SUBJECTS = ("user", "ユーザー", "用户", "пользовател")
LANGUAGES = ("en", "ja", "zh", "ru")
MUST_NOT = ("hypothetical", "question", "reported", "assistant-self", "suggestion")


def normalise(text: str) -> str:
    """NFKC, case-folded, every run of non-letters/digits one space."""
    out: list[str] = []
    for ch in unicodedata.normalize("NFKC", text).casefold():
        out.append(ch if unicodedata.category(ch)[0] in "LNM" else " ")
    return " ".join("".join(out).split())


def load(*paths: Path) -> list[dict[str, Any]]:
    """The rows of the set's files (the user's and the assistant's by default), each with
    its speaker ("user" unless the row says) and its split (counted within its file)."""
    out: list[dict[str, Any]] = []
    for path in paths or (SET, ASSISTANT_SET):
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        for i, row in enumerate(rows):
            row.setdefault("speaker", "user")
            row["split"] = "held-out" if i % HELD_OUT_EVERY == HELD_OUT_EVERY - 1 else "dev"
        out += rows
    return out


def mentions(content: str, about: str) -> bool:
    """`about` in `content` (both normalised): as a substring, or as consecutive words that
    start with its words (an inflected verb: "answer" → "answers")."""
    if about in content:
        return True
    words, wanted = content.split(), about.split()
    return any(
        all(w.startswith(a) for w, a in zip(words[i : i + len(wanted)], wanted))
        for i in range(len(words) - len(wanted) + 1)
    )


def matches(expected: dict[str, str], fact: Fact) -> bool:
    content = normalise(fact.content)
    return (
        fact.category in expected["category"].split("/")
        and fact.polarity == expected["polarity"]
        and mentions(content, normalise(expected["about"]))
        and any(subject in content for subject in SUBJECTS)
    )


def score_row(row: dict[str, Any]) -> dict[str, Any]:
    """The predictions of one sentence, which of them matched, and what was missed."""
    facts = extract_facts(row["text"], row["speaker"])
    unmatched = list(facts)
    missed = []
    for expected in row["facts"]:
        hit = next((f for f in unmatched if matches(expected, f)), None)
        if hit is None:
            missed.append(expected)
        else:
            unmatched.remove(hit)
    return {
        "id": row["id"],
        "lang": row["lang"],
        "kind": row["kind"],
        "split": row["split"],
        "speaker": row["speaker"],
        "expected": len(row["facts"]),
        "predicted": len(facts),
        "matched": len(facts) - len(unmatched),
        "wrong": [f"{f.key} = {f.content} ({f.polarity})" for f in unmatched],
        "missed": missed,
        "text": row["text"],
    }


def totals(scored: list[dict[str, Any]]) -> dict[str, Any]:
    expected = sum(s["expected"] for s in scored)
    predicted = sum(s["predicted"] for s in scored)
    matched = sum(s["matched"] for s in scored)
    return {
        "sentences": len(scored),
        "expected": expected,
        "predicted": predicted,
        "matched": matched,
        "precision": matched / predicted if predicted else 1.0,
        "recall": matched / expected if expected else 1.0,
    }


def run() -> dict[str, Any]:
    rows = load()
    started = time.perf_counter()
    scored = [score_row(r) for r in rows]
    seconds = time.perf_counter() - started
    groups: dict[str, Any] = {"all": totals(scored)}
    for split in ("dev", "held-out"):
        part = [s for s in scored if s["split"] == split]
        groups[split] = totals(part)
        for lang in LANGUAGES:
            groups[f"{split}/{lang}"] = totals([s for s in part if s["lang"] == lang])
    for speaker in SPEAKERS:
        said = [s for s in scored if s["speaker"] == speaker]
        groups[f"speaker/{speaker}"] = totals(said)
        groups[f"speaker/{speaker}/held-out"] = totals([s for s in said if s["split"] == "held-out"])
        for lang in LANGUAGES:
            groups[f"speaker/{speaker}/{lang}"] = totals([s for s in said if s["lang"] == lang])
    must_not = {
        speaker: {
            kind: sum(
                len(s["wrong"]) for s in scored if s["speaker"] == speaker and s["kind"] == kind and s["expected"] == 0
            )
            for kind in MUST_NOT
            if any(r["speaker"] == speaker and r["kind"] == kind for r in rows)
        }
        for speaker in SPEAKERS
    }
    return {
        "set": [str(p.relative_to(BENCH.parent)) for p in (SET, ASSISTANT_SET)],
        "kinds": {speaker: Counter(r["kind"] for r in rows if r["speaker"] == speaker) for speaker in SPEAKERS},
        "groups": groups,
        "wrong_on_must_not": must_not,
        "seconds": round(seconds, 3),
        "errors": [s for s in scored if s["wrong"] or s["missed"]],
    }


def report(out: dict[str, Any]) -> tuple[str, list[Target]]:
    g = out["groups"]
    rows = [
        [
            name,
            v["sentences"],
            v["expected"],
            v["predicted"],
            v["matched"],
            f"{v['precision']:.3f}",
            f"{v['recall']:.3f}",
        ]
        for name, v in g.items()
    ]
    table = md_table(["part", "sentences", "expected facts", "predicted", "matched", "precision", "recall"], rows)
    for speaker in SPEAKERS:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(out["kinds"][speaker].items()))
        wrong = ", ".join(f"{k} {v}" for k, v in out["wrong_on_must_not"][speaker].items())
        table += (
            f"\n\n{speaker.capitalize()} sentences by kind: {kinds}. Facts wrongly taken from "
            f"{speaker} sentences that must give none: {wrong}."
        )
    table += f" Held out: every {HELD_OUT_EVERY}th sentence of each file."
    targets = [
        Target("extraction precision, all", g["all"]["precision"], ">=", PRECISION_TARGET),
        Target("extraction precision, held-out", g["held-out"]["precision"], ">=", PRECISION_TARGET),
        Target("extraction precision, user's words", g["speaker/user"]["precision"], ">=", PRECISION_TARGET),
        Target(
            "extraction precision, assistant's words",
            g["speaker/assistant"]["precision"],
            ">=",
            PRECISION_TARGET,
            note=f"recall {g['speaker/assistant']['recall']:.3f}",
        ),
        Target(
            "extraction recall, held-out (reported, no goal)",
            g["held-out"]["recall"],
            ">=",
            0.0,
            note=f"dev recall {g['dev']['recall']:.3f}",
        ),
    ]
    return table, targets


def main() -> int:
    out = run()
    table, targets = report(out)
    out["targets"] = [t.as_dict() for t in targets]
    write_results("extraction", out, table, "Extraction quality")
    for err in (e for e in out["errors"] if e["split"] == "dev"):  # held-out misses stay unread
        print(
            f"{err['split']:8} {err['speaker']:9} {err['id']}: {err['text']}\n    wrong={err['wrong']} missed={err['missed']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
