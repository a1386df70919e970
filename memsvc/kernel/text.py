"""Turning user text into search terms, and counting tokens.

One tokenizer serves both the keyword index query (storage) and the relevance score (core),
so what the index finds and what the score rewards are the same words.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

# Kana, CJK ideographs (with extension A and compatibility ideographs), Hangul syllables:
# scripts written without spaces between words. Must match the GLOB of migration 0002.
CJK_CHAR = "\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff"
# A run also holds the ideographic iteration and closing marks and the ideographic zero
# (々 〆 〇, U+3005..U+3007), which sit inside words: 佐々木, 時々, 〆切. They are not in
# CJK_CHAR (a row is CJK by its other characters: no word is written with these alone).
_CJK_RUN = re.compile(f"[{CJK_CHAR}\u3005-\u3007]+")
_WORD = re.compile(r"[^\W_]+")
_SPACE = re.compile(r"\s+")

# Function words carry no topic: "What editor theme do I like?" should search for
# editor, theme, like. English and Russian (the alphabetic languages extraction knows).
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "for",
        "from",
        "had",
        "has",
        "have",
        "how",
        "i",
        "i'd",
        "i'll",
        "i'm",
        "i've",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "myself",
        "no",
        "not",
        "of",
        "on",
        "or",
        "our",
        "should",
        "so",
        "some",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "to",
        "too",
        "us",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "am",
        "any",
        "all",
        "about",
        "also",
        "just",
        "only",
        "own",
        "same",
        "such",
        "very",
        "s",
        "t",
        "don",
        "shall",
        "may",
        "might",
        "must",
        "и",
        "в",
        "во",
        "не",
        "что",
        "он",
        "на",
        "я",
        "с",
        "со",
        "как",
        "а",
        "то",
        "все",
        "она",
        "так",
        "его",
        "но",
        "да",
        "ты",
        "к",
        "у",
        "же",
        "вы",
        "за",
        "бы",
        "по",
        "только",
        "ее",
        "мне",
        "было",
        "вот",
        "от",
        "меня",
        "еще",
        "нет",
        "о",
        "из",
        "ему",
        "теперь",
        "когда",
        "даже",
        "ну",
        "вдруг",
        "ли",
        "если",
        "уже",
        "или",
        "ни",
        "быть",
        "был",
        "него",
        "до",
        "вас",
        "нибудь",
        "опять",
        "уж",
        "вам",
        "ведь",
        "там",
        "потом",
        "себя",
        "ничего",
        "ей",
        "может",
        "они",
        "тут",
        "где",
        "есть",
        "надо",
        "ней",
        "для",
        "мы",
        "тебя",
        "их",
        "чем",
        "была",
        "сам",
        "чтоб",
        "без",
        "будто",
        "чего",
        "раз",
        "тоже",
        "себе",
        "под",
        "будет",
        "ж",
        "тогда",
        "кто",
        "этот",
        "того",
        "потому",
        "этого",
        "какой",
        "совсем",
        "ним",
        "здесь",
        "этом",
        "один",
        "почти",
        "мой",
        "тем",
        "чтобы",
        "нее",
        "сейчас",
        "были",
        "куда",
        "зачем",
        "всех",
        "никогда",
        "можно",
        "при",
        "наконец",
        "два",
        "об",
        "другой",
        "хоть",
        "после",
        "над",
        "больше",
        "тот",
        "через",
        "эти",
        "нас",
        "про",
        "всего",
        "них",
        "какая",
        "много",
        "разве",
        "три",
        "эту",
        "моя",
        "впрочем",
        "хорошо",
        "свою",
        "этой",
        "перед",
        "иногда",
        "лучше",
        "чуть",
        "том",
        "нельзя",
        "такой",
        "им",
        "более",
        "всегда",
        "конечно",
        "всю",
        "между",
    ]
)


@dataclass(frozen=True)
class Terms:
    """`words`: lower-cased alphabetic/numeric words without stopwords; `cjk_runs`: runs of
    CJK characters, which the caller cuts into n-grams as its index needs."""

    words: tuple[str, ...]
    cjk_runs: tuple[str, ...]

    def is_empty(self) -> bool:
        return not self.words and not self.cjk_runs


def normalize(text: str) -> str:
    """NFKC (full-width letters become ASCII), case-folded, whitespace collapsed."""
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def terms(text: str) -> Terms:
    words: list[str] = []
    runs: list[str] = []
    for token in _WORD.findall(normalize(text)):
        for run in _CJK_RUN.findall(token):
            if run not in runs:
                runs.append(run)
        for rest in _CJK_RUN.split(token):
            if (len(rest) >= 2 or rest.isdigit()) and rest not in STOPWORDS and rest not in words:
                words.append(rest)
    return Terms(tuple(words), tuple(runs))


def is_sentence(text: str) -> bool:
    """Whether the text reads as a sentence rather than keywords: it has function words
    ("What did Kevin cook last week?"), which a list of keywords ("dark mode") does not.
    Ranking treats the two differently (see memsvc.core.retrieval.ranking.keyword_score)."""
    return any(word in STOPWORDS for word in _WORD.findall(normalize(text)))


def cjk_runs(text: str) -> list[str]:
    """The CJK runs of the normalized text, in order (repeats kept), as `terms` finds them."""
    return [run for token in _WORD.findall(normalize(text)) for run in _CJK_RUN.findall(token)]


def ngrams(run: str, n: int) -> list[str]:
    """Overlapping n-grams of a CJK run; a run shorter than n is its own single gram."""
    if len(run) <= n:
        return [run]
    return [run[i : i + n] for i in range(len(run) - n + 1)]


def scoring_tokens(text: str) -> list[str]:
    """What the relevance score counts: the words, plus CJK bigrams (the usual unit for
    Chinese and Japanese keyword matching)."""
    t = terms(text)
    tokens = list(t.words)
    for run in t.cjk_runs:
        for gram in ngrams(run, 2):
            if gram not in tokens:
                tokens.append(gram)
    return tokens


_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|(?<=[。！？])")


def first_sentences(text: str, count: int = 3) -> str:
    """The first `count` sentences ("Alpha. Beta. Gamma. Delta." → "Alpha. Beta. Gamma.")."""
    parts = [p.strip() for p in _SENTENCE_END.split(text.strip()) if p and p.strip()]
    return " ".join(parts[:count]) if parts else text.strip()
