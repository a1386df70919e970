"""Rule-based fact extraction: what a user says about themselves, kept as statements that
mean the same thing to a model that reads them cold.

Extraction is regular expressions, not an LLM, so it is cheap enough to run on every reply.
Pure Python: no I/O, no storage, no protocol types; the engine decides what to store.

What a fact keeps:
- the subject: the stored content names the user in the third person ("User prefers
  concise answers", "ユーザーはVimが好き", "用户喜欢深色模式", "Пользователь любит чай"),
  so an injected memory is never mistaken for the assistant's or the operator's own words;
- the verb and the polarity: "I don't like long answers" becomes "User does not like long
  answers", never "long answers";
- a stable key: `category:slug(the user's words)` for open-ended facts
  ("preference:long_answers"), a fixed slot for one-value facts ("name:user",
  "location:home", "language:reply", "profession:job"). "I like tea" and "I don't like
  tea anymore" share `preference:tea`, so the later statement replaces the earlier one when
  it is stored (memories upsert on their key), and within one text the later one wins.

Whose words: the user's own first-person statements are the user's facts. The assistant's
first-person statements ("I love Italian food") are its own, or a character's, and never
become a memory; only what the assistant restates about the user in the second person
("you mentioned you live in Paris", "since you're vegetarian") does, turned into the same
statement and key the user's own words give (`extraction_speakers`).

What never becomes a fact: questions ("do I like tea?"), hypotheticals ("if I liked tea",
"もし…なら", "如果我…", "если бы я…"), and what others say about the user or about
themselves ("my wife says I like tea", "彼はVimが好き"). A relative's own facts are family
facts only when they are one ("my wife is a doctor" is `family:wife_profession`, not the
user's profession).

The rules are data: per language (English as the reference defines it, and ours for
Japanese, Chinese and Russian) a table of preference/decision/habit cues and a table of
everyday facts (name, location, diet, family, pets, reply language, profession), compiled
once at import. English always runs; the other tables run when their script appears in the
text (see `detect_languages`). Where two matches overlap, the longer cue wins.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from memsvc.core.extraction import rules as rules_data
from memsvc.core.extraction.rules import CJK, LINE_BREAKS, NT, Slot, T, Table, expand, key_word
from memsvc.core.extraction.speakers import ASSISTANT, SPEAKERS, USER, restatements
from memsvc.core.extraction.speakers import tables as restatement_tables
from memsvc.core.extraction.statements import key_phrase, statement, value_in_statement

_EVERYDAY = ("name", "location", "diet", "family", "pet", "language", "profession")
CATEGORY_TYPES = {
    "preference": "factual",
    "decision": "episodic",
    "pattern": "factual",
    **{category: "factual" for category in _EVERYDAY},
}
POSITIVE, NEGATIVE = "positive", "negative"
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
    category: str  # preference | decision | pattern | name | location | diet | family | pet | ...
    type: str  # the memory type: factual | episodic
    key: str  # category + ":" + slot or slug of the phrase
    content: str  # the self-contained statement that is stored ("User prefers vim")
    language: str  # "en" | "ja" | "zh" | "ru": which rule table found it
    polarity: str = POSITIVE  # NEGATIVE for "I don't like", "I hate", "I never", "不喜欢", ...
    phrase: str = ""  # the user's own words the fact is about ("vim"), as written


_CJK_CHAR = re.compile(f"[{CJK}]")
# Kana (not the prolonged-sound mark or the middle dot, which Chinese text also uses).
_KANA = re.compile("[\u3041-\u3096\u309d-\u309f\u30a1-\u30fa\u30fd-\u30ff\u31f0-\u31ff\uff66-\uff9d]")
_HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]")
_CYRILLIC = re.compile("[\u0400-\u052f]")


# -- compiled rules ----------------------------------------------------------------------------

_PREFIX, _SUFFIX = rules_data.PREFIX, rules_data.SUFFIX


@dataclass(frozen=True)
class _Rule:
    category: str
    direction: str
    regex: re.Pattern[str]  # named groups: cue, content (and lead, when anchored)


@dataclass(frozen=True)
class _SlotRule:
    slot: Slot
    regex: re.Pattern[str]  # named groups: x (the value) and optionally rel, s, n, neg
    lead_reject: re.Pattern[str] | None
    lead_require: re.Pattern[str] | None


@dataclass(frozen=True)
class _RuleSet:
    language: str
    rules: tuple[_Rule, ...]
    slots: tuple[_SlotRule, ...]
    strip_leading: re.Pattern[str] | None
    strip_trailing: re.Pattern[str] | None
    reject_context: re.Pattern[str] | None
    negative: re.Pattern[str]
    negation_after: re.Pattern[str] | None
    guards: _Guards


@dataclass(frozen=True)
class _Guards:
    """What makes a match not a statement of the user's: a question, a hypothetical, or
    someone else's words."""

    before: re.Pattern[str]  # in the sentence before the match: "if", "如果", "если", ...
    reported: re.Pattern[str]  # in the clause before the match: "says", "说", "думает", ...
    after: re.Pattern[str] | None  # in the sentence after the match: "なら", "吗", ...


def _rule_regex(table: Table, direction: str, cue: str) -> str:
    """The full pattern of one rule: cue and content groups in the table's word order."""
    start = rf"(?:^|(?<={T}))" if table.anchored else ""
    if direction == _PREFIX:
        lead = f"(?P<lead>{NT}*?)" if table.anchored else ""
        return f"{start}{lead}(?P<cue>{expand(cue)})(?P<content>{NT}+)"
    return f"{start}(?P<content>{expand(table.suffix_content)}+?)(?P<cue>{expand(cue)})"


def _optional(pattern: str | None, flags: int = 0) -> re.Pattern[str] | None:
    return re.compile(expand(pattern), flags) if pattern else None


def _compile(table: Table) -> _RuleSet:
    """Compile a table once (see `rule_sets`): extraction runs on every chat reply."""
    for category, direction, _ in table.rules:
        if category not in CATEGORY_TYPES or direction not in (_PREFIX, _SUFFIX):
            raise ValueError(f"bad {table.language} rule: {category!r}, {direction!r}")
    for slot in table.slots:
        if slot.category not in CATEGORY_TYPES or not slot.key.startswith(slot.category + ":"):
            raise ValueError(f"bad {table.language} slot: {slot.key!r}")
    rules = tuple(
        _Rule(category, direction, re.compile(_rule_regex(table, direction, cue), re.IGNORECASE))
        for category, direction, cue in table.rules
    )
    slots = tuple(
        _SlotRule(
            s,
            re.compile(expand(s.pattern), re.IGNORECASE),
            _optional(s.lead_reject, re.IGNORECASE),
            _optional(s.lead_require, re.IGNORECASE),
        )
        for s in table.slots
    )
    guards = _Guards(
        re.compile(expand(table.hypothetical), re.IGNORECASE),
        re.compile(expand(table.reported), re.IGNORECASE),
        _optional(table.after_guard, re.IGNORECASE),
    )
    return _RuleSet(
        table.language,
        rules,
        slots,
        _optional(table.strip_leading),
        _optional(table.strip_trailing),
        _optional(table.reject_context),
        re.compile(expand(table.negative), re.IGNORECASE),
        _optional(table.negation_after),
        guards,
    )


@functools.cache
def rule_sets() -> dict[str, _RuleSet]:
    """Every language's compiled rules, compiled on first use: compiling them all takes about
    a second, which every server process would otherwise pay at import, before it serves.
    The server compiles them in the background once it serves (`warm`), so the first
    extraction does not wait either."""
    return {t.language: _compile(t) for t in rules_data.TABLES}


def warm() -> None:
    """Compile the rules now (a server calls it off the request path once it serves)."""
    rule_sets()
    restatement_tables()


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


def extract_facts(text: str, speaker: str = USER) -> list[Fact]:
    """The user's facts in a text, one per key, in the order their keys first appear. When
    a key comes back ("I like tea. Actually, I don't like tea."), the later statement wins,
    as it does across calls when the fact is stored again.

    `speaker` says whose words the text is. The user's first-person statements are the
    user's facts. The assistant's first-person statements are its own and give nothing;
    only what it restates about the user ("you mentioned you live in Paris") does, read as
    the user's own words would be (see `extraction_speakers`)."""
    if speaker not in SPEAKERS:
        raise ValueError(f"speaker must be one of {', '.join(SPEAKERS)}, not {speaker!r}")
    window = scan_window(text)
    if speaker == ASSISTANT:
        facts = {f.key: f for said in _restated(window) for f in _facts_of(said)}
        return list(facts.values())
    return _facts_of(window)


def _restated(window: str) -> Iterator[str]:
    for lang in detect_languages(window):
        yield from restatements(window, lang, rule_sets()[lang].guards.before)


def _facts_of(window: str) -> list[Fact]:
    """The facts of the user's own words."""
    lowered = window.casefold()
    candidates = [c for lang in detect_languages(window) for c in _candidates(window, lowered, rule_sets()[lang])]
    facts: dict[str, Fact] = {}
    for candidate in _without_overlaps(candidates):
        if _guarded(window, candidate):
            continue
        fact = candidate.fact or _to_fact(candidate)
        if fact is not None:
            facts[fact.key] = fact
    return list(facts.values())


def fact_metadata(fact: Fact, extracted_at: datetime) -> dict[str, str]:
    """The metadata stored with an extracted memory. `extractedAt` is UTC with a "Z", in
    the reference's format (JavaScript toISOString); a naive datetime is taken as UTC."""
    if extracted_at.tzinfo is None:
        extracted_at = extracted_at.replace(tzinfo=UTC)
    stamp = extracted_at.astimezone(UTC).isoformat(timespec="milliseconds")
    return {
        "category": fact.category,
        "extractedAt": stamp.replace("+00:00", "Z"),
        "source": SOURCE,
        "language": fact.language,
        "polarity": fact.polarity,
    }


# -- matching ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Candidate:
    """One match before cleaning: where its cue is, and the raw content."""

    rule_set: _RuleSet
    category: str
    direction: str
    cue: tuple[int, int]
    position: int  # where the fact starts in the text, for ordering
    end: int  # where the match ends
    order: int  # rule order, breaks ties at the same position
    content: str
    context: str  # text before the content in its clause (anchored tables only)
    cue_text: str = ""
    after: str = ""  # the text right after the cue (a Japanese negation follows its cue)
    fact: Fact | None = None  # everyday facts are built at match time
    request: bool = False  # a request to the assistant: a question mark does not void it


def _candidates(text: str, lowered: str, rule_set: _RuleSet) -> Iterator[_Candidate]:
    """Every match of a language's cue rules and everyday-fact slots, unfiltered."""
    for order, rule in enumerate(rule_set.rules):
        for m in rule.regex.finditer(text):
            cue = m.span("cue")
            yield _Candidate(
                rule_set=rule_set,
                category=rule.category,
                direction=rule.direction,
                cue=cue,
                position=min(cue[0], m.start("content")),
                end=m.end(),
                order=order,
                content=m.group("content"),
                context=(m.groupdict().get("lead") or ""),
                cue_text=m.group("cue"),
                after=text[cue[1] : cue[1] + 16],
            )
    present: dict[tuple[str, ...], bool] = {}  # slots share word lists: test each list once
    for order, slot_rule in enumerate(rule_set.slots, start=len(rule_set.rules)):
        needs = slot_rule.slot.needs
        if needs and not present.setdefault(needs, any(word in lowered for word in needs)):
            continue
        for m in slot_rule.regex.finditer(text):
            lead = _clause_before(text, m.start())
            fact = _slot_fact(rule_set, slot_rule.slot, m) if _lead_allows(slot_rule, lead) else None
            if fact is not None:
                yield _Candidate(
                    rule_set,
                    fact.category,
                    _PREFIX,
                    m.span(),
                    m.start(),
                    m.end(),
                    order,
                    m.group("x") or "",
                    lead,
                    fact=fact,
                    request=slot_rule.slot.request,
                )


def _lead_allows(slot_rule: _SlotRule, lead: str) -> bool:
    """The clause before a slot match: some show it is someone else's ("妻は"), some
    continuation slots need it ("I have a cat" before "and two hamsters")."""
    if slot_rule.lead_reject is not None and slot_rule.lead_reject.search(lead):
        return False
    return slot_rule.lead_require is None or bool(slot_rule.lead_require.search(lead))


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


# -- what is not the user's statement ----------------------------------------------------------

_SENTENCE_ENDS = ".!?;…。！？；．\n\r\u2028\u2029"
_SENTENCE_END = re.compile("[" + re.escape(_SENTENCE_ENDS) + "]")
_QUESTION_END = "?？"
_CLAUSE_ENDS = ".,;!?…。，、！？；．､｡" + LINE_BREAKS
_COMPLEMENTIZER = re.compile(r"^\s*(?:that|что|чтобы|будто|мол)\b", re.IGNORECASE)
_LOOK_BACK = 400  # characters: a clause or sentence that starts further back is cut there


def _start_after(text: str, at: int, ends: str) -> int:
    """Where the clause or sentence that holds position `at` starts: after the last of
    `ends` before it (str.rfind per character: much cheaper than a regex scan)."""
    low = max(0, at - _LOOK_BACK)
    return max(max(text.rfind(ch, low, at) for ch in ends) + 1, low)


def _clause_before(text: str, at: int) -> str:
    return text[_start_after(text, at, _CLAUSE_ENDS) : at]


def _guarded(text: str, c: _Candidate) -> bool:
    """True when the match is a question, a hypothetical or reported speech: the user did
    not state it as a fact about themselves."""
    start, end = c.position, c.end
    sentence_start = _start_after(text, start, _SENTENCE_ENDS)
    closing = _SENTENCE_END.search(text, end)
    guards = c.rule_set.guards
    if guards.before.search(text[sentence_start:start]):
        return True
    if c.request:  # "Can you reply in French?" asks for something: the question is the point
        return False
    if closing is not None and closing.group(0) in _QUESTION_END:
        return True
    if guards.after is not None and guards.after.search(text[start : closing.start() if closing else len(text)]):
        return True
    return _reported(text, start, guards.reported)


def _reported(text: str, start: int, reported: re.Pattern[str]) -> bool:
    """Someone else's words: a reporting verb earlier in the clause, or in the clause
    before when this one opens with "that"/"что" ("она думает, что я люблю чай")."""
    clause = _clause_before(text, start)
    if reported.search(clause):
        return True
    if _COMPLEMENTIZER.search(clause):
        clause_start = start - len(clause)
        return bool(reported.search(_clause_before(text, max(0, clause_start - 1))))
    return False


# -- building facts ----------------------------------------------------------------------------


def _to_fact(candidate: _Candidate) -> Fact | None:
    """Clean a cue match into a fact, or None when nothing worth keeping is left."""
    rules = candidate.rule_set
    raw, context = candidate.content, candidate.context
    if rules.strip_leading is not None and (topic := rules.strip_leading.match(raw)):
        context, raw = context + topic.group(0), raw[topic.end() :]
    if rules.reject_context is not None and rules.reject_context.search(context):
        return None
    if rules.strip_trailing is not None:
        raw = rules.strip_trailing.sub("", raw.strip())
    phrase = _sanitize(raw)
    slug = slugify(key_phrase(rules.language, phrase)) if phrase else ""
    if phrase is None or not slug:  # too short, or only punctuation: no key that could tell two such facts apart
        return None
    category = candidate.category
    negated = bool(rules.negation_after is not None and rules.negation_after.match(candidate.after))
    negative = bool(rules.negative.search(candidate.cue_text)) != negated
    content = statement(rules.language, category, candidate.direction == _SUFFIX, candidate.cue_text, phrase, negated)
    return Fact(
        category,
        CATEGORY_TYPES[category],
        f"{category}:{slug}",
        content[:MAX_CONTENT_CHARS].rstrip(),
        rules.language,
        NEGATIVE if negative else POSITIVE,
        phrase,
    )


_FORMAT_FIELD = re.compile(r"\{(\w+)\}")
# What a place or name may not end with: the connectors a capitalized run lets in.
_TRAILING_CONNECTORS = re.compile(r"(?:\s+(?:de|da|do|del|upon|am|la|the))+$")


def _slot_fact(rule_set: _RuleSet, slot: Slot, m: re.Match[str]) -> Fact | None:
    """An everyday fact from a slot match: its key from the slugs of the groups the key
    names, its statement from the groups themselves. None when a key part is empty."""
    language = rule_set.language
    values = {
        name: _TRAILING_CONNECTORS.sub("", " ".join((value or "").split())) for name, value in m.groupdict().items()
    }
    parts: dict[str, str] = {}
    for name in _FORMAT_FIELD.findall(slot.key):
        parts[name] = slugify(key_word(key_phrase(language, values.get(name, ""))))
        if not parts[name]:
            return None
    negative = bool(values.get("neg")) != (slot.polarity == NEGATIVE)
    template = slot.negative if negative and slot.negative else slot.statement
    said = {name: value_in_statement(language, value) for name, value in values.items()}
    for name in ("rel", "s"):
        word = said.get(name, "")
        said[name] = word.lower() if language in ("en", "ru") else word
        said[name.capitalize()] = said[name][:1].upper() + said[name][1:]
    content = " ".join(template.format(**said).split())[:MAX_CONTENT_CHARS].rstrip()
    category = slot.category
    return Fact(
        category,
        CATEGORY_TYPES[category],
        slot.key.format(**parts),
        content,
        language,
        NEGATIVE if negative else POSITIVE,
        values.get("x") or values.get("rel") or values.get("s") or "",
    )


def _sanitize(raw: str) -> str | None:
    """Trim, collapse whitespace, cut at 500 characters; None if too short to mean anything
    (under 3 characters, or under 2 when the content has CJK characters)."""
    content = " ".join(raw.split())[:MAX_CONTENT_CHARS].rstrip()
    minimum = MIN_CJK_CONTENT_CHARS if _CJK_CHAR.search(content) else MIN_CONTENT_CHARS
    return content if len(content) >= minimum else None
