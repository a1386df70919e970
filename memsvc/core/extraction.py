"""Rule-based fact extraction: first-person preferences, decisions and habits.

Extraction is regular expressions, not an LLM, so it is cheap enough to run on every reply.
Pure Python: no I/O, no storage, no protocol types; the engine decides what to store.

The rules are data: one table per language (English as the reference defines it, and ours
for Japanese, Chinese and Russian), compiled once at import. English rules always run; the
other tables run when their script appears in the text (see `detect_languages`).

Every rule has two named groups: `cue` (the trigger words, "I prefer", "が好き") and
`content` (what is remembered). Where two cues overlap, the longer one wins, so "I really
prefer tabs" or "Vimを使うことに決めました" give one fact, from their most specific rule.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Iterable, Iterator

CATEGORY_TYPES = {"preference": "factual", "decision": "episodic", "pattern": "factual"}
MAX_SCAN_BYTES = 64 * 1024
MAX_CONTENT_CHARS = 500
# A fact shorter than this says nothing ("it", "me"). CJK scripts pack a word into one or
# two characters ("香菜" is coriander, "猫" a cat), so for them two characters suffice.
MIN_CONTENT_CHARS = 3
MIN_CJK_CONTENT_CHARS = 2
SLUG_MAX_CHARS = 40
SOURCE = "llm_response"


@dataclass(frozen=True)
class Fact:
    category: str  # preference | decision | pattern
    type: str  # the memory type: factual | episodic
    key: str  # category + ":" + slug(content)
    content: str
    language: str  # "en" | "ja" | "zh" | "ru": which rule table found it


# -- characters --------------------------------------------------------------------------------

# Every line break str.splitlines() knows: a fact never spans lines.
_LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
# The reference stops a capture at ".", "," and newline. We also stop at "!", "?" and ";":
# they end a clause just like "." does ("I prefer vim! Everyone should" is about vim, not
# about everyone). The CJK full stop, commas and marks (and their half-width forms) and
# the ellipsis play the same role in every language's text, mixed texts included.
_TERMINATORS = ".,;!?…" + "。，、！？；．｡､" + _LINE_BREAKS
_T = "[" + re.escape(_TERMINATORS) + "]"
_NT = "[^" + re.escape(_TERMINATORS) + "]"
# Horizontal whitespace only: a cue never jumps over a line break.
_SP = r"[^\S" + re.escape(_LINE_BREAKS) + "]"
_CJK = "\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f"
_CJK_CHAR = re.compile(f"[{_CJK}]")
# The start of a word in an alphabetic script. Like \b, but a CJK character right before is
# not "inside the word": "我说I prefer vim" still has a cue, "Hi prefer" has none.
_B = rf"(?<![^\W{_CJK}])"
_APOS = "['’]"  # the typographic apostrophe is as common as the ASCII one

# Kana (not the prolonged-sound mark or the middle dot, which Chinese text also uses).
_KANA = re.compile("[\u3041-\u3096\u309d-\u309f\u30a1-\u30fa\u30fd-\u30ff\u31f0-\u31ff\uff66-\uff9d]")
_HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]")
_CYRILLIC = re.compile("[\u0400-\u052f]")


def _expand(template: str) -> str:
    """Fill the placeholders of a rule table entry, which keeps the tables readable."""
    for name, value in (("<SP>", _SP), ("<NT>", _NT), ("<B>", _B), ("<APOS>", _APOS)):
        template = template.replace(name, value)
    return template


# -- rule tables -------------------------------------------------------------------------------

_PREFIX, _SUFFIX = "prefix", "suffix"  # the content comes after the cue, or before it


@dataclass(frozen=True)
class _Table:
    """One language's rules as written: (category, where the content is, cue pattern)."""

    language: str
    rules: tuple[tuple[str, str, str], ...]
    # Anchor every match at a clause start, and capture what precedes a prefix cue as
    # context. Needed where the subject may be dropped or comes first (Japanese).
    anchored: bool = False
    # What a suffix rule's content may consist of (the characters up to the cue).
    suffix_content: str = "<NT>"
    # Removed from the content's start (a topic such as "私は"); it becomes context.
    strip_leading: str | None = None
    # Removed from the content's end (sentence particles, nominalizers).
    strip_trailing: str | None = None
    # Context that shows the sentence is about someone else ("彼は…が好き"): no fact.
    reject_context: str | None = None


_EN_REALLY = "(?:really<SP>+)?"
_EN = _Table(
    language="en",
    rules=(
        ("preference", _PREFIX, rf"<B>I<SP>+{_EN_REALLY}prefer<SP>+"),
        ("preference", _PREFIX, rf"<B>I<SP>+{_EN_REALLY}like<SP>+"),
        ("preference", _PREFIX, r"<B>my<SP>+favou?rite<SP>+(?:is|are)<SP>+"),
        ("preference", _PREFIX, r"<B>I<SP>+(?:don<APOS>?t|do<SP>+not)<SP>+like<SP>+"),
        ("preference", _PREFIX, rf"<B>I<SP>+{_EN_REALLY}(?:hate|dislike|avoid)<SP>+"),
        ("preference", _PREFIX, rf"<B>I<SP>+{_EN_REALLY}(?:enjoy|love)<SP>+"),
        # The apostrophe is required: the reference's "I'?ll" also matched "ill use".
        ("decision", _PREFIX, r"<B>I(?:<APOS>ll|<SP>+will)<SP>+use<SP>+"),
        ("decision", _PREFIX, r"<B>I<SP>+(?:chose|selected|picked|went<SP>+with)<SP>+"),
        ("decision", _PREFIX, r"<B>I(?:<SP>+have|<APOS>ve)?<SP>+decided<SP>+(?:to<SP>+)?"),
        ("decision", _PREFIX, r"<B>I(?:<APOS>m|<SP>+am)<SP>+going<SP>+(?:to<SP>+(?:use|adopt)|with)<SP>+"),
        ("pattern", _PREFIX, r"<B>I<SP>+(?:usually|always|never|typically|often|frequently|regularly)<SP>+"),
        ("pattern", _PREFIX, r"<B>I<SP>+tend<SP>+to<SP>+"),
    ),
)

# Habit adverbs. A preference or decision clause never swallows one: "いつもVimを使います"
# is a habit, not the decision "いつもVim".
_JA_HABIT = "いつも(?!の)|普段(?:は)?|ふだん(?:は)?|たいてい|大抵|常に|基本的に|決して|毎回"
_JA_PAST = "(?:ました|た)"
_JA = _Table(
    language="ja",
    anchored=True,
    rules=(
        # "好きな/好みの" + noun is attributive ("Vimが好きな人" = people who like Vim).
        ("preference", _SUFFIX, r"<SP>*(?:が|は|も)<SP>*(?:大|一番|とても|すごく)?(?:好き|好み|嫌い|苦手)(?![なの](?!ん))"),
        ("preference", _SUFFIX, r"<SP>*を<SP>*(?:好みます|好む|愛用しています|愛用している)"),
        ("decision", _SUFFIX, rf"<SP>*を<SP>*(?:使う|使用する|採用する|導入する|選ぶ)ことに(?:し|決め|決定し){_JA_PAST}"),
        ("decision", _SUFFIX, r"<SP>*を<SP>*(?:使う|使用する|採用する)(?:つもり|予定)"),
        ("decision", _SUFFIX, r"<SP>*を<SP>*(?:使い|使用し|採用し|導入し)ます(?!か)"),
        ("decision", _SUFFIX, rf"<SP>*を<SP>*(?:選びました|選んだ|選択し{_JA_PAST}|採用し{_JA_PAST}|導入し{_JA_PAST})"),
        ("decision", _SUFFIX, rf"<SP>*に<SP>*(?:決め|決定し){_JA_PAST}"),
        ("pattern", _PREFIX, rf"(?:{_JA_HABIT})<SP>*"),
    ),
    suffix_content=rf"(?:(?!{_JA_HABIT})<NT>)",
    # The last topic: "私は", "わたしは", "エディタは", "家では", "Python は". A は right after
    # hiragana is usually inside a word ("ごはん"), so it must follow another script.
    strip_leading=(
        r"^.*(?:(?:私|わたし|あたし|僕|ぼく|俺|おれ|うち|自分|これ|それ|あれ|ここ|そこ)(?:では|には|は|も|が|って)"
        r"|(?<=[^ぁ-ゖ\s])<SP>*(?:では|には|とは|は))<SP>*"
    ),
    strip_trailing=r"(?:の(?:ほう|方)|(?<=[ぁ-ゖ])(?:の|こと))<SP>*$",
    reject_context=(
        r"(?:彼|彼女|彼ら|あの人|あいつ|みんな|皆|誰か|友達|友人|同僚|母|父|妻|夫|兄|姉|弟|妹|息子|娘)"
        r"(?:さん|くん|ちゃん|たち)?(?:は|も|が|って)"
    ),
)

_ZH_ADV = "(?:也|还|其实|真的|确实|很|非常|特别|最|比较|更|挺|一直|向来)*"
_ZH_SETTLED = "(?:已经|最终|最后|还是|终于)*"
_ZH = _Table(
    language="zh",
    rules=(
        ("preference", _PREFIX, rf"我{_ZH_ADV}(?:喜欢|爱|偏爱)的<NT>{{0,12}}?是<SP>*"),  # 我最喜欢的编辑器是…
        ("preference", _PREFIX, rf"我{_ZH_ADV}(?:不(?:太|怎么|是很|是太)?(?:喜欢|爱)|讨厌|厌恶|受不了|反感)<SP>*"),
        ("preference", _PREFIX, rf"我{_ZH_ADV}(?:喜欢|喜爱|偏好|偏爱|钟爱|爱好|爱)<SP>*"),
        ("decision", _PREFIX, rf"我{_ZH_SETTLED}(?:决定|打算|准备|计划)了?(?:要|先)?(?:使用|采用|选用|改用|换成|用)?<SP>*"),
        ("decision", _PREFIX, rf"我{_ZH_SETTLED}(?:选择|选定|选用|挑选|选|挑)了?<SP>*"),
        ("decision", _PREFIX, r"我(?:将会|将|要)(?:使用|采用|改用|用)<SP>*"),
        ("pattern", _PREFIX, rf"我{_ZH_ADV}(?:通常|一般|总是|经常|常常|往往|平时|平常|习惯于?|从来不|从来没有|从不|很少)(?:都|会|要|是)*<SP>*"),
    ),
    strip_trailing=r"[了啊呀吧呢哦嘛]+<SP>*$",
)

_RU_DEGREE = "(?:(?:очень|действительно|больше|тоже|всё<SP>+же|все<SP>+же)<SP>+)?"
_RU_USE = "(?:использовать|выбрать|взять|перейти<SP>+на|остановиться<SP>+на)"
_RU = _Table(
    language="ru",
    rules=(
        ("preference", _PREFIX, rf"<B>я<SP>+{_RU_DEGREE}(?:предпочитаю|люблю|обожаю)<SP>+"),
        ("preference", _PREFIX, rf"<B>мне<SP>+{_RU_DEGREE}(?:нравится|нравятся)<SP>+"),
        ("preference", _PREFIX, r"<B>я<SP>+(?:(?:совсем|очень|тоже)<SP>+)?не<SP>+(?:люблю|переношу)<SP>+"),
        ("preference", _PREFIX, r"<B>мне<SP>+(?:(?:совсем|очень|тоже)<SP>+)?не<SP>+(?:нравится|нравятся)<SP>+"),
        ("preference", _PREFIX, r"<B>я<SP>+(?:ненавижу|избегаю|терпеть<SP>+не<SP>+могу)<SP>+"),
        ("preference", _PREFIX, r"<B>мо(?:й|я|ё|е|и)<SP>+любим(?:ый|ая|ое|ые)<SP>+(?:[^\W\d_]+<SP>*)?(?:[—–-]|это\b)<SP>*"),
        ("decision", _PREFIX, rf"<B>я<SP>+(?:(?:уже|твёрдо|твердо|всё-таки|все-таки|в<SP>+итоге)<SP>+)?(?:решил|решила|решили)<SP>+(?:{_RU_USE}<SP>+)?"),
        ("decision", _PREFIX, r"<B>я<SP>+(?:выбрал|выбрала|выбрали)<SP>+"),
        ("decision", _PREFIX, r"<B>я<SP>+(?:остановился|остановилась)<SP>+на<SP>+"),
        ("decision", _PREFIX, r"<B>я<SP>+(?:буду|собираюсь|планирую)<SP>+(?:использовать|перейти<SP>+на)<SP>+"),
        ("pattern", _PREFIX, r"<B>я<SP>+(?:обычно|всегда|часто|постоянно|регулярно|как<SP>+правило|никогда<SP>+не|никогда)<SP>+"),
        ("pattern", _PREFIX, r"<B>(?:обычно|всегда|часто|как<SP>+правило)<SP>+я<SP>+"),
        ("pattern", _PREFIX, r"<B>я<SP>+(?:привык|привыкла|привыкли|склонен|склонна)<SP>+"),
    ),
)


# -- compiled rules ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Rule:
    category: str
    regex: re.Pattern[str]  # named groups: cue, content (and lead, when anchored)


@dataclass(frozen=True)
class _RuleSet:
    language: str
    rules: tuple[_Rule, ...]
    strip_leading: re.Pattern[str] | None
    strip_trailing: re.Pattern[str] | None
    reject_context: re.Pattern[str] | None


def _rule_regex(table: _Table, direction: str, cue: str) -> str:
    """The full pattern of one rule: cue and content groups in the table's word order."""
    start = rf"(?:^|(?<={_T}))" if table.anchored else ""
    if direction == _PREFIX:
        lead = f"(?P<lead>{_NT}*?)" if table.anchored else ""
        return f"{start}{lead}(?P<cue>{_expand(cue)})(?P<content>{_NT}+)"
    return f"{start}(?P<content>{_expand(table.suffix_content)}+?)(?P<cue>{_expand(cue)})"


def _optional(pattern: str | None) -> re.Pattern[str] | None:
    return re.compile(_expand(pattern)) if pattern else None


def _compile(table: _Table) -> _RuleSet:
    """Compile a table once, at import: extraction runs on every chat reply."""
    for category, direction, _ in table.rules:
        if category not in CATEGORY_TYPES or direction not in (_PREFIX, _SUFFIX):
            raise ValueError(f"bad {table.language} rule: {category!r}, {direction!r}")
    rules = tuple(
        _Rule(category, re.compile(_rule_regex(table, direction, cue), re.IGNORECASE))
        for category, direction, cue in table.rules
    )
    return _RuleSet(
        table.language,
        rules,
        _optional(table.strip_leading),
        _optional(table.strip_trailing),
        _optional(table.reject_context),
    )


_RULE_SETS: dict[str, _RuleSet] = {t.language: _compile(t) for t in (_EN, _JA, _ZH, _RU)}


# -- public helpers ----------------------------------------------------------------------------


def slugify(text: str) -> str:
    """The stable part of a fact key: lower-case, every run of characters that are not
    letters or digits (in any script) becomes "_", first 40 characters, no "_" at the ends.

    Unicode-aware so that "ダークモード" or "тёмная тема" get a key of their own instead of
    an empty one. Combining marks count as part of the letter they modify, and the text is
    NFC-normalized first, so a decomposed "ё" and a precomposed one give the same key.
    """
    out: list[str] = []
    for ch in unicodedata.normalize("NFC", text).lower():
        if unicodedata.category(ch)[0] in "LNM":
            out.append(ch)
        elif not out or out[-1] != "_":
            out.append("_")
    return "".join(out)[:SLUG_MAX_CHARS].strip("_")


def detect_languages(text: str) -> tuple[str, ...]:
    """Which rule tables to run: always English (the reference), plus each language whose
    script appears. Kana means Japanese; Han without any kana means Chinese (Japanese text
    always has kana, Chinese text none); Cyrillic means Russian."""
    languages = ["en"]
    if _KANA.search(text):
        languages.append("ja")
    elif _HAN.search(text):
        languages.append("zh")
    if _CYRILLIC.search(text):
        languages.append("ru")
    return tuple(languages)


def scan_window(text: str) -> str:
    """The text extraction looks at: all of it, or over 64 KiB of UTF-8 only the last
    64 KiB, since the newest part of a long reply matters most. The cut never splits a
    character: continuation bytes at the cut are skipped."""
    if len(text) * 4 <= MAX_SCAN_BYTES:  # cannot exceed the limit, skip encoding
        return text
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= MAX_SCAN_BYTES:
        return text
    tail = data[-MAX_SCAN_BYTES:]
    start = 0
    while start < len(tail) and tail[start] & 0xC0 == 0x80:
        start += 1
    return tail[start:].decode("utf-8", "surrogatepass")


def extract_facts(text: str) -> list[Fact]:
    """The facts of a text, in text order, at most one per key (the first occurrence)."""
    window = scan_window(text)
    candidates = [
        c for lang in detect_languages(window) for c in _candidates(window, _RULE_SETS[lang])
    ]
    facts: list[Fact] = []
    seen: set[str] = set()
    for candidate in _without_overlaps(candidates):
        fact = _to_fact(candidate)
        if fact is not None and fact.key not in seen:
            seen.add(fact.key)
            facts.append(fact)
    return facts


def fact_metadata(fact: Fact, extracted_at: datetime) -> dict[str, str]:
    """The metadata stored with an extracted memory. `extractedAt` is UTC with a "Z", in
    the reference's format (JavaScript toISOString); a naive datetime is taken as UTC."""
    if extracted_at.tzinfo is None:
        extracted_at = extracted_at.replace(tzinfo=timezone.utc)
    stamp = extracted_at.astimezone(timezone.utc).isoformat(timespec="milliseconds")
    return {
        "category": fact.category,
        "extractedAt": stamp.replace("+00:00", "Z"),
        "source": SOURCE,
        "language": fact.language,
    }


# -- matching ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Candidate:
    """One rule match before cleaning: where its cue is, and the raw content."""

    rule_set: _RuleSet
    category: str
    cue: tuple[int, int]
    position: int  # where the fact starts in the text, for ordering
    order: int  # rule order, breaks ties at the same position
    content: str
    context: str  # text before the content in its clause (anchored tables only)


def _candidates(text: str, rule_set: _RuleSet) -> Iterator[_Candidate]:
    for order, rule in enumerate(rule_set.rules):
        for m in rule.regex.finditer(text):
            cue = m.span("cue")
            yield _Candidate(
                rule_set=rule_set,
                category=rule.category,
                cue=cue,
                position=min(cue[0], m.start("content")),
                order=order,
                content=m.group("content"),
                context=(m.groupdict().get("lead") or ""),
            )


def _without_overlaps(candidates: Iterable[_Candidate]) -> list[_Candidate]:
    """Drop candidates whose cue overlaps a longer one's, and return the rest in text order.

    This is what keeps rules from swallowing each other: "I really prefer" is one cue, not
    also a shorter one inside it, and "Vimを使うことに決めました" is one decision about
    "Vim", not also "Vimを使うこと" through the shorter cue "に決めました".
    """
    taken: set[int] = set()
    kept: list[_Candidate] = []
    for c in sorted(candidates, key=lambda c: (c.cue[0] - c.cue[1], c.cue[0], c.order)):
        span = range(c.cue[0], c.cue[1])
        if not any(i in taken for i in span):
            taken.update(span)
            kept.append(c)
    return sorted(kept, key=lambda c: (c.position, c.order))


def _to_fact(candidate: _Candidate) -> Fact | None:
    """Clean a candidate into a fact, or None when nothing worth keeping is left."""
    rules = candidate.rule_set
    raw, context = candidate.content, candidate.context
    if rules.strip_leading is not None and (topic := rules.strip_leading.match(raw)):
        context, raw = context + topic.group(0), raw[topic.end():]
    if rules.reject_context is not None and rules.reject_context.search(context):
        return None
    if rules.strip_trailing is not None:
        raw = rules.strip_trailing.sub("", raw.strip())
    content = _sanitize(raw)
    slug = slugify(content) if content else ""
    if not slug:  # only punctuation: no key that could tell two such facts apart
        return None
    category = candidate.category
    return Fact(category, CATEGORY_TYPES[category], f"{category}:{slug}", content, rules.language)


def _sanitize(raw: str) -> str | None:
    """Trim, collapse whitespace, cut at 500 characters; None if too short to mean anything
    (under 3 characters, or under 2 when the content has CJK characters)."""
    content = " ".join(raw.split())[:MAX_CONTENT_CHARS].rstrip()
    minimum = MIN_CJK_CONTENT_CHARS if _CJK_CHAR.search(content) else MIN_CONTENT_CHARS
    return content if len(content) >= minimum else None
