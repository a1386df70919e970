"""Whose words a fact comes from: the user's own first-person statements are the user's
facts; in the assistant's reply, only what it restates about the user is.

An assistant (or a character) speaking in the first person ("I prefer concise answers",
"I love Italian food") talks about itself, so none of that becomes a memory, for any owner
(a `character:<name>` owner included: a character's persona belongs to its card, and its
lines stored as facts would share keys such as `preference:italian_food` with the user's).
What the assistant says the user told it is where a user fact can come from: "you
mentioned you live in Paris", "since you're vegetarian", "as you said, you're allergic to
peanuts", 「パリにお住まいとのことですが」, 「你说过你住在巴黎」, «вы упоминали, что живёте в
Париже». Such a clause is turned back into the user's own words ("I live in Paris") and
read by the user's rules, so it gets the same statement and key ("User lives in Paris",
`location:home`), and the same guards (a question or a hypothetical gives nothing).

Only a restatement cue opens a clause: "do you like tea?", "you might like…", "you should
try…" and "if you live in Paris…" have none and give nothing. A restated clause that also
holds the assistant's own first person ("you said you like my recipes") is dropped rather
than guessed at: its "my" is the assistant's.

Pure Python, no I/O; `restatements` yields the clauses, `extraction.extract_facts` reads
them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from memsvc.core.extraction.rules import TERMINATORS, expand

USER, ASSISTANT = "user", "assistant"
SPEAKERS = (USER, ASSISTANT)

_CLAUSE_ENDS = TERMINATORS
_SENTENCE_ENDS = ".!?;…。！？；．\n\r\u2028\u2029"
_QUESTION = "?？"
_LOOK_BACK = 300
_TAG_CHARS = 16  # ", is that right", ", didn't you", "ですか"


# -- English -----------------------------------------------------------------------------------

_EN_REPORT = (
    r"(?:mentioned|said|told<SP>+me|noted|shared|wrote|explained|pointed<SP>+out|brought<SP>+up|"
    r"let<SP>+me<SP>+know)"
)
_EN_WHEN = r"(?:<SP>+(?:to<SP>+me|earlier|before|previously|last<SP>+time|yesterday|the<SP>+other<SP>+day))*"
_EN_PREFIX = (
    # "you mentioned (that) you…", "as you said, you…", "you told me earlier that your…"
    rf"<B>(?:as<SP>+|like<SP>+)?you(?:<SP>+(?:already|once|just|also|earlier|previously))?<SP>+{_EN_REPORT}"
    rf"{_EN_WHEN}<SP>*,?<SP>*(?:that<SP>+)?",
    # "you've mentioned that you…", "you'd said you…"
    rf"<B>you(?:['’]ve|['’]d|<SP>+have|<SP>+had)<SP>+(?:already<SP>+|once<SP>+|also<SP>+)?{_EN_REPORT}"
    rf"{_EN_WHEN}<SP>*,?<SP>*(?:that<SP>+)?",
    # "from what you've told me, you…"
    rf"<B>from<SP>+what<SP>+you(?:['’]ve|<SP>+have)?<SP>+{_EN_REPORT}<SP>*,?<SP>*",
    # a premise: "since you're vegetarian", "because your wife is a doctor"
    r"<B>(?:since|because|given<SP>+that|now<SP>+that|seeing<SP>+(?:as|that)|considering<SP>+that)<SP>+"
    r"(?=(?:you|your)\b)",
    r"<B>as<SP>+(?=you(?:['’]re|<SP>+are)\b)",
    # "I remember you saying you…", "I recall that you…"
    r"<B>I<SP>+(?:remember|recall)(?:<SP>+you<SP>+(?:saying|mentioning|telling<SP>+me))?(?:<SP>+that)?<SP>+"
    r"(?=(?:you|your)\b)",
)
_EN_PREMISES = _EN_PREFIX[3:5]
# "You're vegetarian, as you mentioned": the restated clause comes first.
_EN_SUFFIX = (rf",<SP>*(?:as|like)<SP>+you(?:['’]ve|<SP>+have)?<SP>+(?:already<SP>+)?{_EN_REPORT}",)

_EN_ASSISTANT_SELF = re.compile(r"\b(?:I|me|my|mine|myself|we|us|our|ours)\b|\bI['’]", re.IGNORECASE)
_EN_SECOND = (
    (re.compile(r"\byou['’]re\b", re.IGNORECASE), "I'm"),
    (re.compile(r"\byou\s+are\b", re.IGNORECASE), "I am"),
    (re.compile(r"\byou aren['’]t\b", re.IGNORECASE), "I am not"),
    (re.compile(r"\byou weren['’]t\b", re.IGNORECASE), "I wasn't"),
    (re.compile(r"\byou were\b", re.IGNORECASE), "I was"),
    (re.compile(r"\byou['’](ve|d|ll)\b", re.IGNORECASE), r"I'\1"),
    (re.compile(r"\byours\b", re.IGNORECASE), "mine"),
    (re.compile(r"\byourself\b", re.IGNORECASE), "myself"),
    (re.compile(r"\byour\b", re.IGNORECASE), "my"),
    # "you" as a subject (at the start, or after a conjunction) is "I"; elsewhere "me".
    (re.compile(r"(?:(?<=^)|(?<=\band )|(?<=\bbut )|(?<=\bor )|(?<=\bthat )|(?<=\bso ))you\b", re.IGNORECASE), "I"),
    (re.compile(r"\byou\b", re.IGNORECASE), "me"),
)
# Reported speech shifts the tense back: "you told me you were a teacher" means "I am a
# teacher" today.
_EN_BACKSHIFT = ((re.compile(r"^I was\b"), "I am"), (re.compile(r"^I had\b"), "I have"))
_EN_SUBJECT = re.compile(r"^you(?:r\b|['’]|\b)", re.IGNORECASE)


def _en_first_person(clause: str, reported: bool) -> str | None:
    """ "you live in Paris" → "I live in Paris"; None unless the clause is about "you"."""
    clause = clause.strip()
    if not _EN_SUBJECT.match(clause) or _EN_ASSISTANT_SELF.search(clause):
        return None
    for pattern, replacement in _EN_SECOND:
        clause = pattern.sub(replacement, clause)
    if reported:
        for pattern, replacement in _EN_BACKSHIFT:
            clause = pattern.sub(replacement, clause)
    return clause


# -- Chinese -----------------------------------------------------------------------------------

_ZH_YOU = "(?:你|您)"
_ZH_PREFIX = (
    rf"{_ZH_YOU}(?:之前|以前|上次|刚才|曾经|曾|也|早就|已经)*(?:说过|说|提到过|提到|提过|讲过|告诉过我|告诉我|"
    r"跟我说过|跟我说|和我说过|和我说|说起过|提起过)(?:过)?[:：]?<SP>*(?:过)?",
    rf"(?:既然|因为|由于|考虑到)<SP>*(?={_ZH_YOU})",
    rf"我?记得<SP>*(?={_ZH_YOU})",
    rf"(?:正如|就像|如)<SP>*{_ZH_YOU}(?:所|之前|刚才)?(?:说的|说过的|提到的|提到过的)(?:那样)?[，,]?<SP>*",
)
_ZH_PREMISES = _ZH_PREFIX[1:2]
_ZH_ASSISTANT_SELF = re.compile("我|咱|你们|您们")


def _zh_first_person(clause: str, reported: bool) -> str | None:
    """ "你住在巴黎" (or "住在巴黎" after "你说过") → "我住在巴黎"."""
    clause = clause.strip()
    if not clause or _ZH_ASSISTANT_SELF.search(clause):
        return None
    clause = re.sub("(?:你|您)(?:自己)?", "我", clause)
    return clause if clause.startswith("我") else "我" + clause


# -- Russian -----------------------------------------------------------------------------------

_RU_REPORT = (
    "(?:упоминали|упомянули|упоминал|упоминала|упомянул|упомянула|говорили|говорил|говорила|сказали|"
    "сказал|сказала|рассказывали|рассказывал|рассказывала|писали|писал|писала|отмечали|делились|"
    "признавались|признались)"
)
_RU_YOU = (
    r"(?:вы|ты|у<SP>+(?:вас|тебя)|ваш|ваша|ваше|ваши|вашу|вашего|вашей|твой|твоя|твоё|твое|твои|твою|твоего|"
    r"твоей|вам|тебе|вас|тебя)(?![\w-])"
)
_RU_PREFIX = (
    rf"<B>(?:как<SP>+)?(?:вы|ты)<SP>+(?:(?:уже|как-то|раньше|ранее|недавно|сами|сам|сама|мне)<SP>+)*{_RU_REPORT}"
    r"(?:<SP>+(?:мне|раньше|ранее))*<SP>*,?<SP>*(?:что<SP>+)?",
    rf"<B>(?:раз|поскольку|так<SP>+как|ведь|учитывая,?<SP>+что)<SP>+(?={_RU_YOU})",
    r"<B>(?:я<SP>+)?помню,?<SP>+что<SP>+",
    r"<B>по<SP>+(?:вашим|твоим)<SP>+словам,?<SP>+",
)
_RU_PREMISES = _RU_PREFIX[1:2]
_RU_SUFFIX = (rf",<SP>*как<SP>+(?:вы|ты)<SP>+(?:(?:уже|раньше)<SP>+)?{_RU_REPORT}",)
_RU_ASSISTANT_SELF = re.compile(
    r"(?<![\w-])(?:я|мне|меня|мной|мною|мой|моя|моё|мое|мои|мою|моего|моей|моих|мы|нас|нам|"
    r"наш|наша|наше|наши)(?![\w-])",
    re.IGNORECASE,
)
_RU_WORDS = {
    "вы": "я",
    "ты": "я",
    "вас": "меня",
    "тебя": "меня",
    "вам": "мне",
    "тебе": "мне",
    "ваш": "мой",
    "ваша": "моя",
    "ваше": "моё",
    "ваши": "мои",
    "вашу": "мою",
    "вашего": "моего",
    "вашей": "моей",
    "твой": "мой",
    "твоя": "моя",
    "твоё": "моё",
    "твое": "моё",
    "твои": "мои",
    "твою": "мою",
    "твоего": "моего",
    "твоей": "моей",
    # verbs whose first person does not follow from the second by the ending
    "живёте": "живу",
    "живете": "живу",
    "живёшь": "живу",
    "живешь": "живу",
    "пьёте": "пью",
    "пьете": "пью",
    "пьёшь": "пью",
    "пьешь": "пью",
    "едите": "ем",
    "ешь": "ем",
    "любите": "люблю",
    "любишь": "люблю",
    "говорите": "говорю",
    "говоришь": "говорю",
    "учите": "учу",
    "учишь": "учу",
    "ненавидите": "ненавижу",
    "ненавидишь": "ненавижу",
    "готовите": "готовлю",
    "готовишь": "готовлю",
    "ходите": "хожу",
    "ходишь": "хожу",
    "переносите": "переношу",
    "переносишь": "переношу",
    "можете": "могу",
    "можешь": "могу",
    "будете": "буду",
    "будешь": "буду",
    "хотите": "хочу",
    "хочешь": "хочу",
    "пишете": "пишу",
    "пишешь": "пишу",
    "встаёте": "встаю",
    "встаете": "встаю",
    "ложитесь": "ложусь",
    "спите": "сплю",
    "спишь": "сплю",
    "терпите": "терплю",
    # the plural past and short forms of "вы" are the user's singular
    "решили": "решил",
    "выбрали": "выбрал",
    "переехали": "переехал",
    "остановились": "остановился",
    "привыкли": "привык",
    "родились": "родился",
    "были": "был",
    "женаты": "женат",
    "разведены": "разведён",
    "склонны": "склонен",
}
_RU_STARTS_WITH_SUBJECT = re.compile(r"^(?:я|у\s+меня|мне|меня|мой|моя|моё|мои|мою|моего|моей)(?![\w-])", re.IGNORECASE)


def _ru_verb(word: str) -> str:
    """A second-person present verb in the first person: "предпочитаете" → "предпочитаю"."""
    low = word.lower()
    if low in _RU_WORDS:
        return _RU_WORDS[low]
    for ending, first in (("етесь", "юсь"), ("ешься", "юсь"), ("ете", "ю"), ("ешь", "ю")):
        stem = low[: -len(ending)]
        if low.endswith(ending) and len(stem) > 1 and stem[-1] in "аяеуюо":
            return stem + first
    return word


def _ru_first_person(clause: str, reported: bool) -> str | None:
    """ "(вы) живёте в Париже" → "я живу в Париже", "у вас есть собака" → "у меня есть собака"."""
    clause = clause.strip()
    if not clause or _RU_ASSISTANT_SELF.search(clause):
        return None
    words = [_ru_verb(w) if i < 4 else _RU_WORDS.get(w.lower(), w) for i, w in enumerate(clause.split())]
    converted = " ".join(words)
    return converted if _RU_STARTS_WITH_SUBJECT.match(converted) else "я " + converted


# -- Japanese ----------------------------------------------------------------------------------

# The content comes before the cue: 「パリにお住まい」+「とのことですが」.
_JA_REPORT = (
    r"(?:だ|です)?(?:と|って)<SP>*(?:おっしゃ|仰|言って|いって|言われて|話して|教えて)",
    r"(?:だ|です)?とのこと",
    r"(?:だ|です)?と(?:伺|うかが)(?:い|っ)",
    r"(?:だ|な)?そうですね",
)
# A confirmation or a premise counts when the clause is about the listener in honorific
# speech: 「パリにお住まいなんですね」「ベジタリアンでいらっしゃるので」.
_JA_HONORIFIC_END = (r"(?:なん|な|ん)?(?:ですね|ですよね|でしたね|でしたよね)", r"(?:なので|ので|ですから|だから)")
_JA_ASSISTANT_SELF = re.compile("私|わたし|わたくし|あたし|僕|ぼく|俺|おれ|我々|私たち")
# Honorific and second-person forms, and the plain first-person words the user would use.
_JA_PLAIN = (
    ("あなたの", "私の"),
    ("あなたは", "私は"),
    ("あなたが", "私が"),
    ("あなたも", "私も"),
    ("あなた", "私"),
    ("住んでいらっしゃいます", "住んでいます"),
    ("住んでいらっしゃる", "住んでいる"),
    ("住んでらっしゃる", "住んでいる"),
    ("お住まいになっている", "住んでいる"),
    ("お住まい", "住んでいる"),
    ("飼っていらっしゃいます", "飼っています"),
    ("飼っていらっしゃる", "飼っている"),
    ("飼ってらっしゃる", "飼っている"),
    ("飼われている", "飼っている"),
    ("飼っておられる", "飼っている"),
    ("働いていらっしゃる", "働いている"),
    ("働かれている", "働いている"),
    ("勉強されている", "勉強している"),
    ("勉強なさっている", "勉強している"),
    ("勉強していらっしゃる", "勉強している"),
    ("引っ越された", "引っ越した"),
    ("引っ越しされた", "引っ越した"),
    ("結婚されています", "結婚しています"),
    ("結婚されている", "結婚している"),
    ("お好き", "好き"),
    ("お嫌い", "嫌い"),
    ("ご出身", "出身"),
    ("ご職業", "職業"),
    ("お仕事", "職業"),
    ("お名前", "名前"),
    ("でいらっしゃいます", "です"),
    ("でいらっしゃる", "です"),
    ("をお持ち", "がある"),
    ("がおあり", "がある"),
    ("召し上がらない", "食べません"),
    ("お飲みにならない", "飲みません"),
    ("奥様", "妻"),
    ("奥さま", "妻"),
    ("奥さん", "妻"),
    ("ご主人", "夫"),
    ("旦那様", "夫"),
    ("旦那さん", "夫"),
    ("お子さん", "子供"),
    ("お子様", "子供"),
    ("お子さま", "子供"),
    ("息子さん", "息子"),
    ("娘さん", "娘"),
    ("お母様", "母"),
    ("お母さん", "母"),
    ("お父様", "父"),
    ("お父さん", "父"),
    ("お兄さん", "兄"),
    ("お姉さん", "姉"),
    ("弟さん", "弟"),
    ("妹さん", "妹"),
)
_JA_HONORIFIC = re.compile("|".join(re.escape(h) for h, _ in _JA_PLAIN if h not in ("奥さん",)))
_JA_VERB_END = re.compile("[るたいすきだ]$")
# What the user has rather than is: 「名前はアンナ」 is 「私の名前はアンナ」.
_JA_POSSESSED = re.compile("(?:名前|職業|妻|夫|息子|娘|母|父|兄|姉|弟|妹|子供|犬|猫)(?:の名前)?は")


def _ja_first_person(clause: str, reported: bool) -> str | None:
    """「パリにお住まい」→「私はパリに住んでいる」; a clause without a reporting cue must be in
    honorific speech (about the listener)."""
    clause = re.sub(r"^\s+|\s+$", "", clause)
    if not clause or _JA_ASSISTANT_SELF.search(clause):
        return None
    if not reported and not _JA_HONORIFIC.search(clause):
        return None
    for honorific, plain in _JA_PLAIN:
        clause = clause.replace(honorific, plain)
    clause = re.sub("(?:だ|です|である)$", "", clause)
    if not _JA_VERB_END.search(clause):
        clause += "です"
    if clause.startswith("私"):
        return clause
    return ("私の" if _JA_POSSESSED.match(clause) else "私は") + clause


# -- the tables --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Cue:
    regex: re.Pattern[str]
    before: bool  # the restated clause comes before the cue (a suffix cue)
    reported: bool  # a reporting verb ("you said"), not a premise ("since you…")


@dataclass(frozen=True)
class _Restatements:
    cues: tuple[_Cue, ...]
    first_person: Callable[[str, bool], str | None]


def _cues(prefix: tuple[str, ...], suffix: tuple[str, ...], premises: tuple[str, ...]) -> tuple[_Cue, ...]:
    """Compile a language's cues; those in `premises` open a clause without reporting it."""
    return tuple(
        _Cue(re.compile(expand(p), re.IGNORECASE), before, p not in premises)
        for patterns, before in ((prefix, False), (suffix, True))
        for p in patterns
    )


@functools.cache
def tables() -> dict[str, _Restatements]:
    """Every language's restatement cues, compiled on first use like the user's rules (and
    warmed with them, see `extraction.warm`)."""
    return {
        "en": _Restatements(_cues(_EN_PREFIX, _EN_SUFFIX, _EN_PREMISES), _en_first_person),
        "zh": _Restatements(_cues(_ZH_PREFIX, (), _ZH_PREMISES), _zh_first_person),
        "ru": _Restatements(_cues(_RU_PREFIX, _RU_SUFFIX, _RU_PREMISES), _ru_first_person),
        "ja": _Restatements(_cues((), _JA_REPORT + _JA_HONORIFIC_END, _JA_HONORIFIC_END), _ja_first_person),
    }


def _clause_after(text: str, at: int) -> str:
    ends = [i for i in (text.find(ch, at, at + _LOOK_BACK) for ch in _CLAUSE_ENDS) if i >= 0]
    return text[at : min(ends)] if ends else text[at : at + _LOOK_BACK]


def _clause_before(text: str, at: int) -> str:
    low = max(0, at - _LOOK_BACK)
    return text[max(max(text.rfind(ch, low, at) for ch in _CLAUSE_ENDS) + 1, low) : at]


def _asks(text: str, at: int) -> bool:
    """Whether the restated clause ending at `at` is asked rather than stated: its sentence
    ends with a question mark within a tag's length ("…, right?", "…ですか？"). A question
    that follows in a clause of its own ("…とのことですが、おすすめはありますか？") asks
    something else."""
    ends = [i for i in (text.find(ch, at) for ch in _SENTENCE_ENDS) if i >= 0]
    end = min(ends) if ends else len(text)
    return end < len(text) and text[end] in _QUESTION and end - at <= _TAG_CHARS


def _sentence_start(text: str, at: int) -> int:
    low = max(0, at - _LOOK_BACK)
    return max(max(text.rfind(ch, low, at) for ch in _SENTENCE_ENDS) + 1, low)


def restatements(text: str, language: str, hypothetical: re.Pattern[str]) -> Iterator[str]:
    """The clauses of an assistant's text in which it restates the user, each in the user's
    own first-person words and closed by its sentence's mark ("I live in Paris."). A
    sentence that opens as a hypothetical before the cue ("If, as you said, you…") yields
    nothing."""
    table = tables().get(language)
    if table is None:
        return
    for cue in table.cues:
        for m in cue.regex.finditer(text):
            if hypothetical.search(text[_sentence_start(text, m.start()) : m.start()]):
                continue
            clause = _clause_before(text, m.start()) if cue.before else _clause_after(text, m.end())
            said = table.first_person(clause, cue.reported)
            if said:
                asked = _asks(text, m.end() if cue.before else m.end() + len(clause))
                yield said + ("?" if asked else "." if language in ("en", "ru") else "。")
