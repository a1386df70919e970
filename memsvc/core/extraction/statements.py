"""How an extracted fact is said: the user's words turned into a third-person statement in
the user's language ("I usually answer in bullet points" → "User usually answers in bullet
points"), and the part of those words a key is made from.

The statement keeps the cue's verb and its negation, so a model reading the memory cold
understands it the way the user meant it. Where a verb cannot be put in the third person
reliably (a Russian verb outside the known patterns), the user's own words are quoted
instead of guessed at.
"""

from __future__ import annotations

import re

# -- keys --------------------------------------------------------------------------------------

# Words that say when or how much, not what: "I don't like tea anymore" is about tea, so it
# must share the key of "I like tea" to replace it.
_KEY_TRAILERS = {
    "en": re.compile(
        r"(?:\s+(?:any\s*more|any\s+longer|at\s+all|either|too|as\s+well|(?:very|so)\s+much|a\s+lot|"
        r"now|these\s+days|lately|nowadays|anyway|though|again|actually))+$",
        re.IGNORECASE,
    ),
    "ru": re.compile(r"(?:\s+(?:больше|уже|теперь|вообще|совсем|тоже|сейчас))+$", re.IGNORECASE),
}


def key_phrase(language: str, phrase: str) -> str:
    """The words of `phrase` a key is made from: without trailing "anymore", "at all",
    "больше" and the like (the whole phrase when nothing else is left)."""
    trailers = _KEY_TRAILERS.get(language)
    stripped = trailers.sub("", phrase).strip() if trailers else phrase
    return stripped or phrase


# -- English -----------------------------------------------------------------------------------

_EN_EXPANSIONS = (
    (re.compile(r"\bI['’]m\b", re.IGNORECASE), "I am"),
    (re.compile(r"\bI['’]ll\b", re.IGNORECASE), "I will"),
    (re.compile(r"\bI['’]ve\b", re.IGNORECASE), "I have"),
    (re.compile(r"\bI['’]d\b", re.IGNORECASE), "I would"),
    (re.compile(r"\bcan['’]t\b", re.IGNORECASE), "cannot"),
    (re.compile(r"\bwon['’]t\b", re.IGNORECASE), "will not"),
    (re.compile(r"\b(do|does|did|is|are|was|were|have|has|had|could|would|should)n['’]?t\b", re.IGNORECASE), r"\1 not"),
)
# First person to third, in the words after the cue ("dark mode in my editor").
_EN_PRONOUNS = (
    (re.compile(r"\bI am\b"), "they are"),
    (re.compile(r"\bI was\b"), "they were"),
    (re.compile(r"\bI\b"), "they"),
    (re.compile(r"\bmyself\b", re.IGNORECASE), "themselves"),
    (re.compile(r"\bmine\b", re.IGNORECASE), "theirs"),
    (re.compile(r"\bmy\b", re.IGNORECASE), "their"),
    (re.compile(r"\bme\b", re.IGNORECASE), "them"),
)
# Words before the verb that stay as they are ("User usually answers").
_EN_ADVERBS = frozenset(
    [
        "really",
        "usually",
        "always",
        "never",
        "typically",
        "often",
        "frequently",
        "regularly",
        "also",
        "still",
        "just",
        "generally",
        "normally",
        "sometimes",
        "rarely",
        "seldom",
        "only",
        "even",
        "actually",
        "no",
        "longer",
        "truly",
        "absolutely",
        "totally",
        "definitely",
        "honestly",
        "mostly",
        "hardly",
        "ever",
    ]
)
_EN_IRREGULAR = {"am": "is", "are": "is", "have": "has", "do": "does", "go": "goes", "be": "is"}
_EN_UNCHANGED = frozenset(
    [
        "will",
        "would",
        "can",
        "could",
        "should",
        "must",
        "may",
        "might",
        "shall",
        "cannot",
        "did",
        "was",
        "chose",
        "went",
        "picked",
        "selected",
        "got",
        "made",
        "took",
        "had",
        "ran",
        "began",
        "thought",
        "knew",
    ]
)


def _en_expand(text: str) -> str:
    for pattern, replacement in _EN_EXPANSIONS:
        text = pattern.sub(replacement, text)
    return text


def en_pronouns(text: str) -> str:
    """The user's words with "I", "my", "me" turned into "they", "their", "them"."""
    text = _en_expand(text)
    for pattern, replacement in _EN_PRONOUNS:
        text = pattern.sub(replacement, text)
    return text


def _en_third_person(word: str) -> str:
    low = word.lower()
    if low in _EN_IRREGULAR:
        return _EN_IRREGULAR[low]
    if low in _EN_UNCHANGED or low.endswith("ed") or not low.isalpha():
        return word
    if re.search(r"(?:s|sh|ch|x|z|o)$", low):
        return word + "es"
    if re.search(r"[^aeiou]y$", low):
        return word[:-1] + "ies"
    return word + "s"


def _en_conjugate_first(words: list[str]) -> list[str]:
    """The first word that is not an adverb is the verb: put it in the third person."""
    out = list(words)
    for i, word in enumerate(out):
        if word.lower() not in _EN_ADVERBS:
            out[i] = _en_third_person(word)
            break
    return out


def _en_statement(cue: str, phrase: str) -> str:
    cue = " ".join(_en_expand(cue).split()).lower()
    words = en_pronouns(phrase).split()
    if cue.startswith("my "):  # "my favorite is", "my favourite color is"
        return " ".join(["User's", *cue.split()[1:], *words])
    return " ".join(["User", *_en_conjugate_first(cue.split()[1:] + words)])


# -- Russian -----------------------------------------------------------------------------------

_RU_CUE_VERBS = {
    "предпочитаю": "предпочитает",
    "люблю": "любит",
    "обожаю": "обожает",
    "переношу": "переносит",
    "ненавижу": "ненавидит",
    "избегаю": "избегает",
    "могу": "может",
    "буду": "будет",
    "собираюсь": "собирается",
    "планирую": "планирует",
}
_RU_IRREGULAR = {
    "ем": "ест",
    "пью": "пьёт",
    "иду": "идёт",
    "хожу": "ходит",
    "езжу": "ездит",
    "сплю": "спит",
    "встаю": "встаёт",
    "пишу": "пишет",
    "могу": "может",
    "хочу": "хочет",
    "беру": "берёт",
    "живу": "живёт",
    "сижу": "сидит",
    "вижу": "видит",
    "ложусь": "ложится",
    "ношу": "носит",
    "вожу": "водит",
    "даю": "даёт",
    "пою": "поёт",
    "бегу": "бежит",
    "еду": "едет",
    "учу": "учит",
    "плачу": "платит",
    "люблю": "любит",
    "готовлю": "готовит",
    "кладу": "кладёт",
    "жду": "ждёт",
    "несу": "несёт",
    "сажусь": "садится",
    "прихожу": "приходит",
    "ухожу": "уходит",
    "выхожу": "выходит",
    "захожу": "заходит",
    "пеку": "печёт",
}
_RU_VOWELS = "аяеёуюоиы"


def _ru_third_person(word: str) -> str | None:
    """The third-person form of a first-person present verb, or None when unsure."""
    low = word.lower()
    if low in _RU_IRREGULAR:
        return _RU_IRREGULAR[low]
    if low.endswith("юсь") and len(low) > 4 and low[-4] in _RU_VOWELS:
        return low[:-3] + "ется"  # занимаюсь → занимается
    if low.endswith("ю") and len(low) > 2 and low[-2] in _RU_VOWELS:
        return low[:-1] + "ет"  # делаю → делает, использую → использует
    if low.endswith("лю") and len(low) > 3 and low[-3] in "бпвфм":
        return low[:-2] + "ит"  # ставлю → ставит, готовлю → готовит
    if low.endswith("ю") and len(low) > 3:
        return low[:-1] + "ит"  # говорю → говорит
    return None


def _ru_conjugate_first(words: list[str]) -> list[str] | None:
    for i, word in enumerate(words[:4]):
        third = _ru_third_person(word)
        if third is not None:
            return words[:i] + [third] + words[i + 1 :]
    return None


def _ru_statement(category: str, cue: str, phrase: str) -> str:
    words = [w.lower() for w in cue.split()]
    if len(words) >= 2 and words[0].startswith("мо") and words[1].startswith("любим"):
        noun = " ".join(w for w in words[2:] if w not in ("—", "–", "-", "это"))
        return " ".join(filter(None, [words[1].capitalize(), noun, "пользователя —", phrase]))
    if words[0] == "мне":
        return " ".join(["Пользователю", *words[1:], phrase])
    rest = [_RU_CUE_VERBS.get(w, w) for w in words if w != "я"]
    body = rest + phrase.split()
    if category == "pattern" and not any(w.startswith(("привык", "склон")) for w in words):
        conjugated = _ru_conjugate_first(body)
        if conjugated is None:
            return f"Пользователь о себе: «{' '.join(cue.split())} {phrase}»"
        body = conjugated
    return " ".join(["Пользователь", *body])


# -- Japanese and Chinese ----------------------------------------------------------------------


def _ja_statement(category: str, suffix: bool, cue: str, phrase: str, negated: bool) -> str:
    cue = "".join(cue.split())
    if suffix and category == "preference":
        cue = re.sub("^(?:は|も)", "が", cue)  # "Python は好き" → "ユーザーはPythonが好き"
    body = phrase + cue if suffix else cue + phrase
    return "ユーザーは" + body + ("ではない" if negated else "")


def zh_pronouns(text: str) -> str:
    return text.replace("我的", "自己的")


def _zh_statement(cue: str, phrase: str) -> str:
    cue = "".join(cue.split())
    return "用户" + (cue.removeprefix("我")) + zh_pronouns(phrase)


def statement(language: str, category: str, suffix: bool, cue: str, phrase: str, negated_after: bool) -> str:
    """The stored content of a preference, decision or habit found by a cue."""
    if language == "en":
        return _en_statement(cue, phrase)
    if language == "ru":
        return _ru_statement(category, cue, phrase)
    if language == "ja":
        return _ja_statement(category, suffix, cue, phrase, negated_after)
    return _zh_statement(cue, phrase)


def value_in_statement(language: str, value: str) -> str:
    """An everyday fact's value as it goes into its statement ("at my school" → "at
    their school")."""
    if language == "en":
        return en_pronouns(value)
    if language == "zh":
        return zh_pronouns(value)
    return value
