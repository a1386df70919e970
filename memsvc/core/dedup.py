"""Duplicates merged on write: does a new memory say what an existing one of the same owner and
type already says?

The write path asks this for a keyless draft against a few candidates (a vector search gives
the cosine of the two texts' embeddings; a keyword search gives none). A yes touches the
existing memory instead of adding a row. The two mistakes are not alike: a wrong merge LOSES
the new memory (what it said differently is gone), a missed one only leaves a duplicate row,
which retrieval and the reflections already tolerate. So the rule is fitted for precision
(>= 0.98 on bench/dedup/pairs.jsonl) and takes recall as it comes.

Embeddings alone cannot carry it: "User likes coffee" and "User does not like coffee", "at
3pm" and "at 4pm", "Alice reports to Bob" and "Bob reports to Alice" sit at cosine 0.9-1.0
under both local models, and a synonym swap ("likes"/"enjoys coffee") scores no higher than
another fact ("green"/"black tea", "minutes"/"seconds"). So the text decides (`compare`):
negation, tense and modality markers must agree, a new number or name vetoes, a swap of
roles vetoes, a new text that only adds vetoes, a shorter one must be one stretch of the
existing one without the word that qualified it; what is left merges only if the new text
has no content word the existing one lacks (`novelty` 0: a repeat, a reordering, an
inflection, a shorter restatement). The cosine, when known, is a floor under that
(`DedupRule`); the path that would merge paraphrases on a high cosine is off by default
(its precision did not hold on the held-out half: bench/results/dedup.md).

Pure computation over memsvc.kernel.text's normalization; no I/O.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from memsvc.kernel.text import CJK_CHAR, STOPWORDS, ngrams, normalize

# --------------------------------------------------------------------------------- lexicons

#: The token the owner's own words become ("User", "the user", "I", "my", ja 私, zh 我, ru я):
#: a memory is about its owner by default, so it never counts as new information, but it
#: keeps its place in the word order ("Sam owes the user" is not "the user owes Sam").
SELF = "<self>"
_SELF_WORDS = frozenset(["user", "users", "i", "me", "my", "mine", "myself", "я", "мне", "меня", "мой", "моя", "мои"])
_SELF_STEMS = ("пользовател",)
_CJK_SELF = re.compile("(我们|ユーザー|ユーザ|用户|用戶|私|僕|俺|我)")

# Marker classes: each must be present in both texts or in neither. A merge across them turns
# "does not", "used to", "plans to", "might" into their opposite. Modality has six kinds
# (certain future, maybe, wish, plan, considering, obligation: "would like" may stand for
# "wants", "may" for "might", not "will" for "might"); frequency words must be the same
# words ("always" is not "often"). The function words of a class are one content token, the
# class ("might" and "may" are both "<maybe>", "don't" and "not" both "not"); the others
# ("went", "hopes") keep their own word as well.
NEG, PAST = "neg", "past"
_MARKERS = {
    NEG: "not no never nothing none nobody nowhere neither nor without cannot "
    "не нет ни никогда ничего никто нигде никак без нельзя",
    PAST: "was were had did used former formerly previously ex anymore ago раньше бывший бывшая прежде",
    "future": "will shall going gonna будет буду",
    "maybe": "might may maybe perhaps probably possibly could может возможно наверное",
    "wish": "would want wants wanted хочет хочу хотел хотела хочется",
    "plan": "plan plans planning planned intend intends intending планирует планирую собирается собираюсь",
    "consider": "consider considers considering thinking",
    "oblige": "should must ought",
}
#: Marker words that are content words too: the class is noted, the word stays.
_MARKED_WORDS = {
    PAST: "went ran got saw bought sold taught thought made took came became left met wrote drove knew began spoke "
    "ate drank swam won lost paid sent spent built told found gave quit stopped",
    "wish": "wish wishes hope hopes hoping dream dreams мечтает надеется",
}
_CLASS_WORDS = {word: kind for kind, words in _MARKERS.items() for word in words.split()}
_WORD_MARKER = _CLASS_WORDS | {word: kind for kind, words in _MARKED_WORDS.items() for word in words.split()}
_FREQUENCY = (
    "always often usually sometimes rarely seldom occasionally frequently regularly constantly normally generally "
    "всегда часто обычно иногда редко"
)
_WORD_MARKER.update({word: f"often:{word}" for word in _FREQUENCY.split()})
_CJK_MARKERS = {
    NEG: re.compile("ない|ません|無い|なし|不|没|沒|无|無|别|未|非"),
    PAST: re.compile(r"(?:た|でした|ました)$|以前|昔|曾|过去|原来"),
    "wish": re.compile("たい|ほしい|欲しい|想|希望"),
    "plan": re.compile("予定|つもり|打算|计划"),
    "maybe": re.compile("かも|でしょう|可能"),
    "future": re.compile("将|要"),
}
# A Russian past form ("жил", "курила", "переехали"): its verb's present is another fact.
_RU_PAST = re.compile(r"[а-я]+[аяиеуы]л[аои]?")
# Liking against disliking, by stem: "likes working with Dave" / "hates working with Dave".
_FOR = frozenset(["lik", "lov", "enjoy", "prefer", "ador", "fond", "fan", "appreciat"])
_AGAINST = frozenset(["hat", "dislik", "detest", "loath", "despis", "avoid"])
# Every negation is the one content token "not", so "don't" and "do not" agree.
_NOT = "not"

# Who a fact is about: a relation held by someone ("User's sister", "my dog", "his wife"; in
# Russian and CJK any mention: the owner follows in the genitive, "сестра пользователя", or
# the particle, "ユーザーの姉") on one side only moved the claim to someone else: "User's
# sister lives in Paris" is no restatement of "User lives in Paris".
_RELATIONS_EN = (
    "wife husband partner spouse girlfriend boyfriend fiance fiancee mother mom mum father dad parent son "
    "daughter kid child children baby brother sister sibling cousin uncle aunt niece nephew grandmother "
    "grandfather grandma grandpa grandparent friend roommate flatmate neighbor boss manager colleague "
    "coworker teammate team client customer landlord doctor therapist teacher mentor assistant agent bot "
    "family dog cat pet puppy kitten horse parrot"
)
_RELATIONS_RU = (
    "жена муж мама мать отец папа сын дочь брат сестра друг подруга начальник коллега ребенок дети родители "
    "собака кот кошка"
)
_POSSESSIVES = frozenset(["my", "his", "her", "their", "our", "your"])
_CJK_RELATIONS = re.compile(
    "息子|友達|友人|上司|同僚|彼女|彼氏|家族|子供|両親|祖母|祖父|妻子|老婆|丈夫|老公|妈妈|母亲|爸爸|父亲|"
    "哥哥|姐姐|弟弟|妹妹|儿子|女儿|孩子|朋友|老板|同事|父母|妻|夫|母|父|兄|姉|弟|妹|娘|"
    "(?<=[の的])(?:犬|猫|狗|ペット|宠物)"
)

# A word between two others that gives them roles: "tea over coffee", "from Paris to Berlin".
_ROLE_WORDS = (
    "to from into onto over than instead rather above below under before after of vs versus against toward towards "
    "чем вместо из от"
)
_DIRECTIONAL = frozenset(_ROLE_WORDS.split())

# Number words are numbers: "two cats" and "2 cats" agree, "two" and "three" do not.
_NUMBER_WORDS = {
    word: str(value)
    for value, words in enumerate(
        [
            "zero",
            "one один одна одно first",
            "two два две двух twice second",
            "three три трех third",
            "four четыре fourth",
            "five пять fifth",
            "six шесть sixth",
            "seven семь seventh",
            "eight восемь eighth",
            "nine девять ninth",
            "ten десять tenth",
            "eleven",
            "twelve",
        ]
    )
    for word in words.split()
}
_NUMBER_WORDS.update({"twenty": "20", "thirty": "30", "fifty": "50", "hundred": "100", "thousand": "1000"})
_CJK_NUMERALS = {c: str(i) for i, c in enumerate("〇一二三四五六七八九十")} | {"两": "2", "百": "100", "千": "1000"}

# Function words that never carry the fact; the project's STOPWORDS less everything above
# (negations, tense and modal words, numbers, "only", "than") and a few quantifiers.
_KEEP = frozenset(_WORD_MARKER) | frozenset(_NUMBER_WORDS) | frozenset(["only", "all", "more", "than"])
_STOP = (STOPWORDS - _KEEP) | frozenset(
    ["s", "t", "d", "ll", "m", "re", "ve", "am", "be", "into", "because", "while", "although", "though", "whereas"]
)
_SPELLING = {"favourite": "favorite", "colour": "color", "flavour": "flavor", "neighbour": "neighbor"}
_CONTRACTIONS = {"ca": "can", "wo": "will", "sha": "shall"}

_CJK_RUN = re.compile(f"[{CJK_CHAR}\u3005-\u3007]+")
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*")
# Addresses and handles are names, whole: "billing@acme.com" is not "finance@acme.com".
_ADDRESS = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+|https?://\S+|@\w+")
_DIGITS = re.compile(r"\d+|\D+")
_SENTENCE_END = re.compile(r"[.!?。！？\n]\s*$")
# A particle after a noun (kanji, katakana, the long-vowel mark) ends a Japanese word.
_JA_PARTICLE = re.compile("(?:(?<=[\u30a0-\u30ff\u3400-\u9fff\uf900-\ufaff])|^)[はがをにでともへの]")
_JA_COPULA = re.compile("(?:です|だ|である)$")
# A katakana word (a loanword or a name: トヨタ, ポチ, コーヒー) is a name: a new one vetoes.
_KATAKANA = re.compile("[\u30a1-\u30fa\u30fc]{2,}")
_ENDINGS = (
    "иями ями ами ого его ому ему ыми ими ой ей ий ый ая яя ое ее ые ие ую юю ом ем ам ям ах ях ов ев ью "
    "ия ии ть ет ит ут ют ат ят ешь ишь ете ите а я о е ы и у ю ь"
)
_RU_ENDINGS = sorted(_ENDINGS.split(), key=len, reverse=True)


# --------------------------------------------------------------------------------- normalizing


@functools.lru_cache(maxsize=8192)
def canonical(text: str) -> str:
    """The text as compared for identity: memsvc.kernel.text.normalize (NFKC, case-folded,
    whitespace collapsed), ё as е, one apostrophe, thousands separators dropped, punctuation
    dropped except inside a word or a number ("3.5", "8:15", "don't" stay)."""
    text = normalize(text).replace("ё", "е").replace("\u2019", "'")
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)
    kept = []
    for i, ch in enumerate(text):
        inner = 0 < i < len(text) - 1 and text[i - 1].isalnum() and text[i + 1].isalnum()
        minus = ch == "-" and i + 1 < len(text) and text[i + 1].isdigit()
        kept.append(ch if not unicodedata.category(ch).startswith("P") or inner or minus else " ")
    return " ".join("".join(kept).split())


def _undouble(stem: str) -> str:
    """ "runn" -> "run", "plann" -> "plan"; "ll", "ss" and "zz" stay ("spell", "pass")."""
    if len(stem) >= 3 and stem[-1] == stem[-2] and stem[-1] not in "lsz" and stem[-1].isalpha():
        return stem[:-1]
    return stem


def _stem_en(word: str) -> str:
    """Light English inflection only: plural and third person (likes, cats, studies), -ing,
    a final e or y ("movie"/"movies" -> "movi"). Past tense is NOT folded in ("lived" stays
    apart from "lives"): it is a different fact, and `_past_base` finds it."""
    word = _SPELLING.get(word, word)
    if len(word) <= 3:
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "i"
    elif word.endswith(("sses", "xes", "ches", "shes", "zes")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if word.endswith("ing") and len(word) >= 6:
        word = _undouble(word[:-3])
    if word.endswith(("e", "y")) and len(word) >= 4:  # "movie"/"movies", "study"/"studies"
        word = word[:-1] + ("i" if word[-1] == "y" else "")
    return word


def _past_base(word: str) -> str | None:
    """The stem a regular past form comes from ("lived" -> "liv", "studied" -> "studi"), else None."""
    if len(word) < 5 or not word.endswith("ed"):
        return None
    if word.endswith("ied"):
        return word[:-3] + "i"
    return _stem_en(_undouble(word[:-2]))


def _stem_ru(word: str) -> str:
    """One Russian case or person ending off, the stem kept at three letters or more
    ("москве"/"москва" -> "москв", "люблю"/"любит" -> "люб")."""
    for ending in _RU_ENDINGS:
        if word.endswith(ending) and len(word) - len(ending) >= 3:
            word = word[: -len(ending)]
            break
    if word.endswith(("бл", "вл", "мл", "пл", "фл")) and len(word) > 3:
        word = word[:-1]
    return word


def _stem(word: str) -> str:
    if word.isascii():
        return _stem_en(word)
    if re.fullmatch("[а-я]+", word):
        return _stem_ru(word)
    return word


_RELATIONS = frozenset(_stem(w) for w in (_RELATIONS_EN + " " + _RELATIONS_RU).split())


# --------------------------------------------------------------------------------- one text


@dataclass(frozen=True)
class Token:
    """One unit of meaning: `key` is what is compared (stemmed word, number, CJK bigram,
    `SELF`, "not"); `entity` for names and numbers (a capital inside a sentence, a digit,
    inner capitals as in "iPhone", a katakana word, an address); `directional` for a role
    word ("over", "than"); `past`, the stem of a regular past form ("lived" -> "liv")."""

    key: str
    entity: bool = False
    directional: bool = False
    past: str | None = None


@dataclass(frozen=True)
class Profile:
    """What `compare` needs of one text: its tokens in order, its marker classes, the
    relations it names, which content words stand right before another (`adjacent`: a
    qualifier, "hot dogs", "green tea"), and of those, the pairs whose second word ends its
    phrase (`heads`: "ice hockey", "chocolate cake")."""

    tokens: tuple[Token, ...]
    markers: frozenset[str]
    relations: frozenset[str]
    adjacent: frozenset[tuple[str, str]]
    heads: frozenset[tuple[str, str]]

    @functools.cached_property
    def content(self) -> frozenset[str]:
        """The content keys, the owner's own token left out (it is implied). Cached like the
        sets below (a profile is memoized, and the write path asks each many times)."""
        return frozenset(t.key for t in self.tokens if not t.directional and t.key != SELF)

    @property
    def order(self) -> list[str]:
        return list(dict.fromkeys(t.key for t in self.tokens if not t.directional))

    @functools.cached_property
    def entities(self) -> frozenset[str]:
        return frozenset(t.key for t in self.tokens if t.entity)

    @functools.cached_property
    def pasts(self) -> frozenset[str]:
        return frozenset(t.past for t in self.tokens if t.past)


@functools.lru_cache(maxsize=8192)
def profile(text: str) -> Profile:
    """The tokens, marker classes, relations and qualifier pairs of one text."""
    text = unicodedata.normalize("NFKC", text).replace("ё", "е").replace("Ё", "Е").replace("\u2019", "'")
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)
    reader = _Reader()
    reader.tokens += [Token(a.casefold(), entity=True) for a in _ADDRESS.findall(text)]
    text = _ADDRESS.sub(" , ", text)
    previous, end = "", 0
    for match in _WORD.finditer(text):
        gap = text[end : match.start()]
        initial = not text[: match.start()].strip() or bool(_SENTENCE_END.search(text[: match.start()]))
        reader.read(match.group(), initial=initial, previous=previous, joined=bool(end) and gap.isspace())
        previous, end = match.group().casefold(), match.end()
    reader.read("", initial=False, previous=previous, joined=False)  # ends the last phrase
    return Profile(
        tuple(reader.tokens),
        frozenset(reader.markers),
        frozenset(reader.relations),
        frozenset(reader.adjacent),
        frozenset(reader.heads),
    )


class _Reader:
    """Collects a text's tokens word by word (see `profile`)."""

    def __init__(self) -> None:
        self.tokens: list[Token] = []
        self.markers: set[str] = set()
        self.relations: set[str] = set()
        self.adjacent: set[tuple[str, str]] = set()
        self.heads: set[tuple[str, str]] = set()
        self._last: str | None = None  # the previous word's single content key
        self._pair: tuple[str, str] | None = None  # the previous word and the one before it

    def read(self, word: str, *, initial: bool, previous: str, joined: bool) -> None:
        """One `_WORD` match: its CJK runs and its other parts."""
        possessed = previous.endswith("'s") or previous in _POSSESSIVES
        found: list[Token] = []
        for part in re.split(f"([{CJK_CHAR}\u3005-\u3007]+)", word):
            if _CJK_RUN.fullmatch(part):
                found += self._cjk(part)
            elif part:
                found += self._word(part, initial, possessed, previous)
            initial = False
        content = [t.key for t in found if not t.directional and t.key not in (SELF, _NOT)]
        pair = (self._last, content[0]) if joined and self._last and len(content) == 1 else None
        if self._pair and not pair:  # the previous pair's second word ended its phrase
            self.heads.add(self._pair)
        if pair:
            self.adjacent.add(pair)
        self._pair = pair
        self._last = content[0] if len(content) == 1 and len(found) == 1 else None
        self.tokens += found

    def _word(self, raw: str, initial: bool, possessed: bool, previous: str) -> list[Token]:
        """A space-delimited word (latin, Cyrillic, digits): contractions, the owner, markers,
        numbers, role words, then a stemmed content word (a name is not stemmed)."""
        low = raw.casefold()
        head, _, tail = low.partition("'")
        if tail == "t" and head.endswith("n"):  # don't, can't, won't, isn't
            base = _CONTRACTIONS.get(head[:-1], head[:-1])
            kind = _CLASS_WORDS.get(base)
            self.markers.update(k for k in (NEG, kind) if k)
            if kind:
                return [Token(_NOT), Token(f"<{kind}>")]
            return [Token(_NOT)] + ([] if base in _STOP else [Token(_stem(base))])
        low = head if tail in ("s", "m", "re", "ve", "ll", "d") else head + tail
        if low in _SELF_WORDS or low.startswith(_SELF_STEMS):
            return [Token(SELF)]
        title = not initial and raw[:1].isupper() and raw[1:].islower()  # "May", "Will": names
        if low in _WORD_MARKER and not title:
            self.markers.add(_WORD_MARKER[low])
            if low in _CLASS_WORDS:
                kind = _CLASS_WORDS[low]
                return [Token(_NOT if kind == NEG else f"<{kind}>")]
        if low in ("like", "love") and previous == "would":  # "would like": the wish is noted
            return []
        if low in _NUMBER_WORDS:
            return [Token(_NUMBER_WORDS[low], entity=True)]
        if any(c.isdigit() for c in low):
            return [_piece(p) for p in _DIGITS.findall(low) if p.isdigit() or len(p) > 1]
        if low in _DIRECTIONAL:
            return [Token(low, directional=True)]
        return self._content(raw, low, initial, possessed)

    def _content(self, raw: str, low: str, initial: bool, possessed: bool) -> list[Token]:
        named = (not initial and raw[0].isupper() and raw != "I") or any(c.isupper() for c in raw[1:])
        if (low in _STOP or len(low) < 2) and not named:
            return []
        if _RU_PAST.fullmatch(low) or low in ("был", "была", "было", "были"):
            self.markers.add(PAST)
        key = low if named else _stem(low)  # a name is not inflected: "Aliens" is not "Alien"
        if _stem(low) in _RELATIONS and (possessed or not low.isascii()):
            self.relations.add(_stem(low))
        return [Token(key, entity=named, past=_past_base(low) if low.isascii() else None)]

    def _cjk(self, run: str) -> list[Token]:
        """A CJK run: marker and relation substrings noted, the owner's words made `SELF`,
        numerals made numbers, katakana words made names, Japanese particles after a noun and
        a final copula dropped, the rest cut into the overlapping bigrams that
        memsvc.kernel.text uses for scoring."""
        for kind, pattern in _CJK_MARKERS.items():
            if pattern.search(run):
                self.markers.add(kind)
        self.relations.update(_CJK_RELATIONS.findall(run))
        tokens = [Token(_CJK_NUMERALS[c], entity=True) for c in run if c in _CJK_NUMERALS]
        for i, piece in enumerate(_CJK_SELF.split(run)):
            if i % 2:  # the owner's word ("我们", we, is not the owner alone)
                tokens.append(Token(piece if piece == "我们" else SELF))
                continue
            for word in _JA_PARTICLE.split(_JA_COPULA.sub("", piece)):
                tokens += [Token(k, entity=True) for k in _KATAKANA.findall(word)]
                tokens += [Token(gram) for gram in ngrams(word, 2) if word]
        return tokens


def _piece(piece: str) -> Token:
    """A part of a word with digits ("3pm" -> "3", "pm"; "db-staging-2" -> ..., "2")."""
    return Token(piece, entity=True) if piece.isdigit() else Token(_stem(piece))


# --------------------------------------------------------------------------------- two texts


def novelty(new_text: str, existing_text: str) -> float:
    """The share of the new text's content tokens the existing text does not hold: 0.0 when
    the new one says nothing the existing one does not, 1.0 when it shares nothing.

    Content tokens are words less function words (memsvc.kernel.text.STOPWORDS, less every
    negation, tense and modal word, number and "only"/"than", which always count), lightly
    stemmed (likes/like, cats/cat, ru москве/москва), numbers (digits and number words),
    and CJK bigrams; the owner's own words ("User", "I") are implied and do not count."""
    return _novelty(profile(new_text).content, profile(existing_text).content)


def _novelty(new: frozenset[str], existing: frozenset[str]) -> float:
    return len(new - existing) / len(new) if new else 0.0


@dataclass(frozen=True)
class Comparison:
    """What the text says about a (new, existing) pair, before any cosine: `identical` after
    normalization; `veto`, why they can never be one memory (None when they can); `novelty`
    of the new text; `extra`, how many more new tokens it has than tokens it drops (a
    paraphrase swaps words, > 0 says more); `coverage`, the share of the existing text's
    tokens the new one holds."""

    identical: bool
    veto: str | None
    novelty: float
    extra: int
    coverage: float


def compare(new_text: str, existing_text: str) -> Comparison:
    """The text-side verdict on merging `new_text` into `existing_text` (see `Comparison`)."""
    if canonical(new_text) == canonical(existing_text):
        return Comparison(True, None, 0.0, 0, 1.0)
    new, old = profile(new_text), profile(existing_text)
    added, dropped = new.content - old.content, old.content - new.content
    shared = len(new.content & old.content)
    coverage = shared / len(old.content) if old.content else 0.0
    return Comparison(False, _veto(new, old), _novelty(new.content, old.content), len(added) - len(dropped), coverage)


def _veto(new: Profile, old: Profile) -> str | None:
    """Why the two can never be one memory, or None. A new name or number; a marker class
    (negation, past, modality, frequency) or a relation on one side only; a regular past
    against its present; an antonym; a new text that only adds; a shorter one that drops the
    word right before a word it keeps ("hot dogs" / "dogs": the qualifier made it another
    thing) or takes its words from separate parts of the existing one; roles swapped."""
    added, dropped = new.content - old.content, old.content - new.content
    if not new.content:
        return "no content"
    if added & new.entities:
        return "new name or number"
    if new.markers != old.markers:
        return "negation, tense or modality differs"
    if new.relations != old.relations:
        return "about someone else"
    if (new.pasts & dropped) or (old.pasts & added):
        return "tense differs"
    if any(_antonym(a, d) for a in added for d in dropped):
        return "antonym"
    if added and not dropped:
        return "adds information"
    if not added and _qualifier_dropped(new, old, dropped):
        return "qualifier dropped"
    if not added and dropped and not _contiguous(new, old):
        return "drawn from separate parts"
    return _reordered(new, old)


def _qualifier_dropped(new: Profile, old: Profile, dropped: frozenset[str]) -> bool:
    """A shorter new text that keeps a word but drops the one that made it another thing: the
    qualifier before it ("hot dogs" / "dogs"), the head after it ("ice hockey" / "ice"), or
    what it was "of" ("tired of the commute" / "tired")."""
    kept = new.content
    return (
        any(first in dropped and then in kept for first, then in old.adjacent)
        or any(first in kept and then in dropped for first, then in old.heads)
        or any(word == "of" and left in kept and right in dropped for left, word, right in _role_triples(old.tokens))
    )


def _contiguous(new: Profile, old: Profile) -> bool:
    """Whether a shorter new text's words are one stretch of the existing text's words: "User
    lives in Paris" is a restatement of "User lives in Paris and works as a nurse", but "User
    lives in Tokyo" is not one of "User lives in Beijing and went to Tokyo", nor "User loves
    dogs" one of "User is afraid of dogs but loves cats" (the stretch must keep its order).
    Words only: a CJK text cut short loses the bigram across the cut, so its bigrams are not
    checked."""
    where = {key: i for i, key in enumerate(k for k in old.order if k != SELF and not _CJK_RUN.search(k))}
    spots = [where[k] for k in new.order if k in where]
    return not spots or spots == list(range(spots[0], spots[0] + len(spots)))


def _antonym(a: str, b: str) -> bool:
    """ "dislike"/"like", "unhappy"/"happy", "disagree"/"agree", "hate"/"love"."""
    if (a in _FOR and b in _AGAINST) or (a in _AGAINST and b in _FOR):
        return True
    return any(a == prefix + b or b == prefix + a for prefix in ("dis", "un", "in", "im", "non"))


def _reordered(new: Profile, old: Profile) -> str | None:
    """Roles swapped: names or numbers in another order; the shared words in an order no
    single moved phrase explains ("Alice reports to Bob" / "Bob reports to Alice"); two
    words on the other sides of the same role word ("tea over coffee" / "coffee over tea")."""
    shared = new.content & old.content | ({SELF} & set(new.order) & set(old.order))
    named = (new.entities | old.entities) & shared
    if [k for k in new.order if k in named] != [k for k in old.order if k in named]:
        return "names or numbers reordered"
    if not _one_move([k for k in new.order if k in shared], [k for k in old.order if k in shared]):
        return "reordered"
    for left, word, right in _role_triples(new.tokens):
        if _between(old.tokens, right, word, left):
            return "roles swapped"
    return None


def _one_move(a: Sequence[str], b: Sequence[str]) -> bool:
    """Whether b is a with one contiguous block moved: after the common prefix and suffix,
    the rest of b is a rotation of the rest of a."""
    i = 0
    while i < len(a) and i < len(b) and a[i] == b[i]:
        i += 1
    j = 0
    while j < len(a) - i and j < len(b) - i and a[-1 - j] == b[-1 - j]:
        j += 1
    mid_a, mid_b = list(a[i : len(a) - j]), list(b[i : len(b) - j])
    if len(mid_a) != len(mid_b):
        return False
    return not mid_a or any(mid_a[s:] + mid_a[:s] == mid_b for s in range(1, len(mid_a)))


def _role_triples(tokens: Sequence[Token]) -> Iterable[tuple[str, str, str]]:
    """(word before, role word, word after) for each role word with content on both sides."""
    for i, token in enumerate(tokens):
        if not token.directional:
            continue
        left = next((t.key for t in reversed(tokens[:i]) if not t.directional), None)
        right = next((t.key for t in tokens[i + 1 :] if not t.directional), None)
        if left and right:
            yield left, token.key, right


def _between(tokens: Sequence[Token], first: str, word: str, then: str) -> bool:
    """Whether `first` comes before `word`, which comes before `then`, in the tokens."""
    keys = [t.key for t in tokens]
    if first not in keys or then not in keys:
        return False
    a, b = keys.index(first), keys.index(then)
    return a < b and word in keys[a + 1 : b]


# --------------------------------------------------------------------------------- the rule


@dataclass(frozen=True)
class DedupRule:
    """When a pair the text does not veto (`compare`) is one memory.

    A new text all of whose content tokens the existing one holds (novelty 0: the same
    words reordered or inflected, or a shorter restatement) merges when it covers at least
    `min_coverage` of the existing text's tokens and, when a cosine is known, that cosine is
    at least `subset_min_cosine`. A new text with words the existing one lacks (a
    paraphrase) merges only with a cosine of at least `min_cosine`, a novelty of at most
    `max_novelty` and at most `max_extra` more new words than dropped ones; `max_novelty`
    0 turns that path off. Without a cosine (a keyword-search candidate) only the first
    path is open: the words alone cannot tell a synonym from another fact."""

    min_cosine: float
    max_novelty: float
    max_extra: int
    subset_min_cosine: float
    min_coverage: float

    def decide(self, c: Comparison, cosine: float | None) -> bool:
        """The verdict on one compared pair (`compare(new, existing)`) given its cosine."""
        if c.identical:
            return True
        if c.veto is not None:
            return False
        if c.novelty == 0.0:
            return c.coverage >= self.min_coverage and (cosine is None or cosine >= self.subset_min_cosine)
        if cosine is None:
            return False
        return c.novelty <= self.max_novelty and c.extra <= self.max_extra and cosine >= self.min_cosine


# bench/dedup_bench.py, "joint, no paraphrase path": fitted on the even ids of
# bench/dedup/pairs.jsonl (813 pairs) under the default static model, MiniLM and no cosine at
# once. Precision even / odd ids: 1.000 / 1.000 for all three; recall 0.723 / 0.745 (static),
# 0.734 / 0.739 (MiniLM), 0.734 / 0.745 (text only). One rule serves both models: the cosine
# is only a floor under what the text already allows. The paraphrase path (fitted on even
# ids: min_cosine 0.8, max_novelty 0.25) reached 0.969 (static) and 0.976 (MiniLM) on the odd
# ids, CJK and modifier swaps ("青"/"赤", "朝"/"夜"), and is off. An unknown or remote model
# gets the same rule: a floor of 0.62 only ever refuses.
DEFAULT_RULE = DedupRule(min_cosine=1.0, max_novelty=0.0, max_extra=0, subset_min_cosine=0.62, min_coverage=0.25)


def is_duplicate(new_text: str, existing_text: str, cosine: float | None, rule: DedupRule = DEFAULT_RULE) -> bool:
    """Whether the new memory says what the existing one (same owner, same type) already says,
    so the write may touch the existing row instead of adding one. Identical after
    normalization is always a duplicate; otherwise the text must not veto (`compare`) and
    the rule must accept the cosine (None: decided by the words alone, conservatively).
    A wrong yes loses the new memory; a wrong no leaves a duplicate: when in doubt, no.

    The write path asks this for every candidate of every keyless write, so what `decide`
    would refuse anyway is refused before the vetoes are worked out: a cosine below every
    floor of the rule, or new words where the rule needs none (or has no cosine to weigh
    them). `canonical` and `profile` are memoized: a draft meets several candidates, and a
    candidate many drafts."""
    if canonical(new_text) == canonical(existing_text):
        return True
    paraphrases = rule.max_novelty > 0.0
    if cosine is not None and cosine < min(rule.subset_min_cosine, rule.min_cosine if paraphrases else 1.0):
        return False
    novelty = _novelty(profile(new_text).content, profile(existing_text).content)
    if novelty > 0.0 and (cosine is None or not paraphrases or novelty > rule.max_novelty):
        return False
    return rule.decide(compare(new_text, existing_text), cosine)
