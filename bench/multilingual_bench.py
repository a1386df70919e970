"""Multilingual conversational retrieval (Japanese, Chinese, Russian, mixed chats): does the
right turn come back?

The set (bench/multilingual/set.jsonl, built by bench/multilingual_set.py from the
hand-written conversations in bench/multilingual/src/, described in bench/multilingual/README.md):
12 conversations written for memsvc (original text, no existing dataset copied), 60 sessions
over days or weeks, 1019 turns, 324 labelled questions. Three conversations each in Japanese,
simplified Chinese and Russian (two friends, a user and a companion character, coworkers or a
couple), and three mixed-language chats: Japanese–English and Russian–English code-switching,
and one where one person writes Chinese and the other Japanese. Facts (plans, pets, jobs,
trips, health, dates) are buried in chit-chat, with distractor turns sharing their words.
Each question names its evidence turns ("D3:9"), its language and a type:

    by conversation language   ja 81 · zh 81 · ru 81 · ja-en 27 · ru-en 27 · zh-ja 27
    by type                    single 108 · paraphrase 69 · multi 60 · temporal 48 · cross-lingual 39
    by question language       ja 96 · zh 88 · ru 88 · en 52

single = one evidence turn, asked with its words; paraphrase = one turn, other words
(synonyms, another script, another inflection); multi = two or more turns, often across
sessions; temporal = when something was said or what happened on a date (the turns'
timestamps are the answer); cross-lingual = asked in another language than the evidence
(English about a Russian chat, Japanese about a Chinese one, ...).

Every turn is one memory (`"Speaker: text"`, its session as sessionId, its time as
occurredAt), every conversation one owner; one Retrieve per question through the real gRPC
server (`memsvc serve` in a subprocess), keyword only (no vectors), hybrid with the static
model, hybrid with MiniLM — the settings, loading and server helpers of
bench/realtalk_bench.py. Reported: recall@5 and @10 of the evidence turns (per question the
share of its evidence in the top k, averaged), hit@10 (any evidence turn in the top 10),
overall, per conversation language, per question type and per question language, and the p50
latency of a Retrieve. In-process baselines over the same turns, each conversation its own
corpus: FTS5 BM25 with the unicode61 tokenizer (every word), FTS5 BM25 with the trigram
tokenizer (a CJK question as its trigrams), dense cosine with the static model, and equal RRF
(k = 60) of the two BM25 lists with the dense one.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import Target, md_table, pct, targets_table, write_results  # noqa: E402
from bench.multilingual_set import LANGS, QUESTION_LANGS, TYPES
from bench.multilingual_set import load as load_set
from bench.realtalk_bench import SERVER_CONFIGS, Bm25, Dense, Turn, equal_rrf  # noqa: E402
from bench.realtalk_bench import server_rows as realtalk_server_rows  # noqa: E402

KS = (5, 10)
GROUPS = {"ja": ("ja",), "zh": ("zh",), "ru": ("ru",), "mixed": ("ja-en", "ru-en", "zh-ja")}


# ------------------------------------------------------------------------------------ data


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    evidence: frozenset[str]
    type: str
    lang: str  # the question's language


@dataclass(frozen=True)
class Conversation:
    number: int
    id: str
    lang: str  # the conversation's language (ja, zh, ru, ja-en, ru-en, zh-ja)
    turns: list[Turn]
    questions: list[Question]

    @property
    def owner(self) -> str:
        return f"multilingual-{self.id}"


def load() -> list[Conversation]:
    convs = []
    for number, raw in enumerate(load_set(), start=1):
        turns = [
            Turn(t["id"], t["session"], f"{t['speaker']}: {t['text']}", datetime.fromisoformat(t["at"]))
            for t in raw["turns"]
        ]
        questions = [
            Question(q["id"], q["question"], frozenset(q["evidence"]), q["type"], q["lang"]) for q in raw["questions"]
        ]
        convs.append(Conversation(number, raw["id"], raw["lang"], turns, questions))
    return convs


# --------------------------------------------------------------------------------- metrics

Ranker = Callable[[Conversation, Question], list[str]]  # → turn ids, best first


def score(convs: Sequence[Conversation], ranker: Ranker) -> dict[str, Any]:
    """recall@5/@10 and hit@10 per question, averaged overall, per conversation language (and
    the ja/zh/ru/mixed groups), per type and per question language; the p50 of one ranking."""
    rows: list[tuple[Conversation, Question, dict[str, float]]] = []
    times: list[float] = []
    for conv in convs:
        for q in conv.questions:
            t0 = time.perf_counter()
            got = ranker(conv, q)
            times.append((time.perf_counter() - t0) * 1000)
            m = {f"recall@{k}": len(q.evidence & set(got[:k])) / len(q.evidence) for k in KS}
            m["hit@10"] = 1.0 if q.evidence & set(got[:10]) else 0.0
            rows.append((conv, q, m))

    def mean(keep: Callable[[Conversation, Question], bool]) -> dict[str, float]:
        ms = [m for c, q, m in rows if keep(c, q)]
        return {key: sum(m[key] for m in ms) / len(ms) for key in ms[0]} if ms else {}

    return {
        "all": mean(lambda c, q: True),
        "languages": {lang: mean(lambda c, q, lang=lang: c.lang == lang) for lang in LANGS},
        "groups": {g: mean(lambda c, q, langs=langs: c.lang in langs) for g, langs in GROUPS.items()},
        "types": {t: mean(lambda c, q, t=t: q.type == t) for t in TYPES},
        "question_languages": {lang: mean(lambda c, q, lang=lang: q.lang == lang) for lang in QUESTION_LANGS},
        "p50_ms": pct(times, 50),
        "questions": len(rows),
    }


# ------------------------------------------------------------------------------- baselines

_CJK = re.compile("[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff]+")


def _words(text: str) -> list[str]:
    from memsvc.kernel.text import normalize

    return re.findall(r"[^\W_]+", normalize(text))


def _trigram_words(text: str) -> list[str]:
    """A question for the trigram tokenizer: every trigram of each CJK run, every other word of
    three or more characters (the tokenizer matches nothing shorter)."""
    out: list[str] = []
    for token in _words(text):
        pieces = [token[i : i + 3] for i in range(len(token) - 2)] if _CJK.fullmatch(token) else [token]
        out.extend(p for p in pieces if len(p) >= 3 and p not in out)
    return out


def _static_source() -> Any:
    from memsvc.embedding.sources import StaticSource, default_static_cache_dir

    return StaticSource(
        os.environ.get("MEMORY_STATIC_MODEL") or None,
        os.environ.get("MEMORY_STATIC_CACHE_DIR") or default_static_cache_dir(),
    )


def baselines(convs: Sequence[Conversation]) -> dict[str, dict]:
    unicode61 = Bm25(convs, "unicode61 remove_diacritics 2", _words)
    trigram = Bm25(convs, "trigram", _trigram_words)
    dense = Dense(convs, _static_source())
    rankers = {
        "FTS5 BM25, unicode61 (every word)": unicode61,
        "FTS5 BM25, trigram": trigram,
        "dense, static": dense,
        "RRF (equal) BM25 unicode61 + trigram + dense static": equal_rrf(unicode61, trigram, dense),
    }
    return {label: score(convs, ranker) for label, ranker in rankers.items()}


# ---------------------------------------------------------------------------------- server


def server_rows(convs: Sequence[Conversation]) -> tuple[dict[str, dict], dict[str, Any]]:
    """realtalk_bench.server_rows for this set: one server over one fresh SQLite store, every
    configuration of SERVER_CONFIGS scored with this module's score."""
    return realtalk_server_rows(convs, SERVER_CONFIGS, scorer=score, name="multilingual")


# ---------------------------------------------------------------------------------- report


def run() -> dict:
    from bench.multilingual_set import counts
    from bench.multilingual_set import load as raw

    convs = load()
    base = baselines(convs)
    served, info = server_rows(convs)
    return {"baselines": base, "memsvc": served, "info": info, "set": counts(raw())}


def _triple(m: dict[str, float]) -> str:
    return f"{m['recall@5']:.3f} / {m['recall@10']:.3f} / {m['hit@10']:.3f}" if m else "–"


def _rows(out: dict) -> list[tuple[str, dict]]:
    return [(f"baseline: {label}", r) for label, r in out["baselines"].items()] + list(out["memsvc"].items())


KEYWORD_LABEL, STATIC_LABEL = SERVER_CONFIGS[0][0], SERVER_CONFIGS[1][0]


def targets(out: dict) -> list[Target]:
    keyword, static = out["memsvc"][KEYWORD_LABEL], out["memsvc"][STATIC_LABEL]
    found = [
        Target(
            "multilingual hybrid static R@10 − keyword-only R@10",
            static["all"]["recall@10"] - keyword["all"]["recall@10"],
            ">=",
            0.0,
        )
    ]
    for group in GROUPS:
        found.append(
            Target(
                f"multilingual {group} hybrid static R@10 − keyword-only R@10",
                static["groups"][group]["recall@10"] - keyword["groups"][group]["recall@10"],
                ">=",
                0.0,
            )
        )
    return found


def report(out: dict) -> tuple[str, list[Target]]:
    rows = _rows(out)
    overall = md_table(
        ["retrieval", "R@5", "R@10", "hit@10", "p50 ms"],
        [
            [label] + [f"{r['all'][k]:.3f}" for k in ("recall@5", "recall@10", "hit@10")] + [f"{r['p50_ms']:.2f}"]
            for label, r in rows
        ],
    )
    by_lang = md_table(
        ["retrieval (R@5 / R@10 / hit@10)"] + list(LANGS),
        [[label] + [_triple(r["languages"][lang]) for lang in LANGS] for label, r in rows],
    )
    by_type = md_table(
        ["retrieval (R@5 / R@10 / hit@10)"] + list(TYPES),
        [[label] + [_triple(r["types"][t]) for t in TYPES] for label, r in rows],
    )
    s = out["set"]
    found = targets(out)
    table = (
        overall
        + "\n\nPer conversation language:\n\n"
        + by_lang
        + "\n\nPer question type:\n\n"
        + by_type
        + f"\n\n{s['conversations']} conversations ({', '.join(f'{k} {v}' for k, v in s['turns_by_language'].items())}"
        f" turns), {s['turns']} turns (one memory each), {s['questions']} questions (by conversation language: "
        + ", ".join(f"{k} {v}" for k, v in s["by_language"].items())
        + "; by type: "
        + ", ".join(f"{k} {v}" for k, v in s["by_type"].items())
        + "). Written for memsvc: "
        "bench/multilingual/README.md. memsvc rows: one Retrieve per question over gRPC (maxTokens 16000), "
        "latency = the round trip; baseline rows run in process.\n\n" + targets_table(found)
    )
    return table, found


def main() -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    out = run()
    table, found = report(out)
    out["targets"] = [t.as_dict() for t in found]
    write_results("multilingual", out, table, "Multilingual conversational retrieval (ja, zh, ru, mixed)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
