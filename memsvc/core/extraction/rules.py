"""The extractor's rule tables, one per language, as data: cues for preferences, decisions
and habits, patterns for everyday facts, and the guards that tell a statement from a
question, a hypothetical or someone else's words.

Placeholders keep the patterns readable: `<SP>` horizontal whitespace, `<NT>` a character
that does not end a clause, `<T>` one that does, `<B>` the start of a word, `<APOS>` an
apostrophe (ASCII or typographic). Every pattern is compiled case-insensitive; a name or a
place must be capitalized, which `(?-i:...)` keeps case-sensitive.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# -- characters --------------------------------------------------------------------------------

# Every line break str.splitlines() knows: a fact never spans lines.
LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
# The reference stops a capture at ".", "," and newline. We also stop at "!", "?" and ";":
# they end a clause just like "." does ("I prefer vim! Everyone should" is about vim, not
# about everyone). The CJK full stop, commas and marks (and their half-width forms) and
# the ellipsis play the same role in every language's text, mixed texts included.
TERMINATORS = ".,;!?…" + "。，、！？；．｡､" + LINE_BREAKS
TC = re.escape(TERMINATORS)  # the terminators, for use inside a character class
T = "[" + TC + "]"
NT = "[^" + re.escape(TERMINATORS) + "]"
# Horizontal whitespace only: a cue never jumps over a line break.
SP = r"[^\S" + re.escape(LINE_BREAKS) + "]"
CJK = "\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f"
# The start of a word in an alphabetic script. Like \b, but a CJK character right before is
# not "inside the word": "我说I prefer vim" still has a cue, "Hi prefer" has none.
B = rf"(?<![^\W{CJK}])"
APOS = "['’]"  # the typographic apostrophe is as common as the ASCII one
# The end of a value: a clause end, the end of the text, or a word that starts a new phrase.
END = rf"(?=<SP>*(?:{T}|$))"


# A word start followed by a letter: the letter is checked first, as a lookahead, which lets
# the regex engine skip most positions before it evaluates the (costly) lookbehind.
_B_LETTER = re.compile(r"<B>(?=([^\W\d_]))")


def expand(template: str) -> str:
    """Fill the placeholders of a rule table entry."""
    template = _B_LETTER.sub(lambda m: f"(?={m.group(1)})<B>", template)
    template = template.replace("<B>(", r"(?=\w)<B>(")
    for name, value in (
        ("<END>", END),
        ("<SP>", SP),
        ("<NT>", NT),
        ("<TC>", TC),
        ("<T>", T),
        ("<B>", B),
        ("<APOS>", APOS),
    ):
        template = template.replace(name, value)
    return template


PREFIX, SUFFIX = "prefix", "suffix"  # the content comes after the cue, or before it


@dataclass(frozen=True)
class Slot:
    """An everyday fact: a pattern whose named groups fill a key and a statement.

    Groups: `x` the value (a name, a city, an allergen), and where the pattern has them
    `rel` (a relative), `s` (a species), `n` (a count), `neg` (a negation). In `key` and
    `statement`, `{x}` and friends are the groups; in `key` they become slugs, with words of
    every language mapped to one English key word (妻, жену, wife → wife).
    """

    category: str
    pattern: str
    key: str
    statement: str
    negative: str = ""  # the statement when `neg` matched, which turns the polarity around
    lead_reject: str | None = None  # the clause before the match shows it is not the user's
    lead_require: str | None = None  # the clause before the match must show this
    needs: tuple[str, ...] = ()  # lower-case words one of which the text must contain; () = always run
    request: bool = False  # an instruction to the assistant: "Can you reply in French?" still counts
    polarity: str = "positive"  # "negative" for a slot that states what the user does not do


@dataclass(frozen=True)
class Table:
    """One language's rules as written: (category, where the content is, cue pattern)."""

    language: str
    rules: tuple[tuple[str, str, str], ...]
    slots: tuple[Slot, ...]
    negative: str  # in a cue: the fact is negative ("don't like", "嫌い", "не люблю")
    hypothetical: str  # before a match in its sentence: not a statement ("if", "もし", "according to")
    reported: str  # before a match in its clause: someone else's words ("says", "说")
    after_guard: str | None = None  # the sentence from the match on ("…なら", "…吗")
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
    # A negation right after a cue turns the fact around ("好きではない").
    negation_after: str | None = None


# One English key word for the same relative, species or diet in any language, so that
# "my wife is a doctor" and "妻は医者です" fill the same slot.
KEY_WORDS: dict[str, str] = {
    **dict.fromkeys(
        (
            "kid",
            "kids",
            "child",
            "children",
            "子供",
            "子ども",
            "孩子",
            "дети",
            "детей",
            "ребёнок",
            "ребенок",
            "ребёнка",
            "ребенка",
        ),
        "children",
    ),
    **dict.fromkeys(("son", "sons", "息子", "儿子", "сын", "сына", "сыновья", "сыновей", "сына"), "son"),
    **dict.fromkeys(("daughter", "daughters", "娘", "女儿", "дочь", "дочери", "дочерей"), "daughter"),
    **dict.fromkeys(("brother", "brothers", "兄", "弟", "兄弟", "哥哥", "弟弟", "брат", "брата", "братьев"), "brother"),
    **dict.fromkeys(("sister", "sisters", "姉", "妹", "姉妹", "姐姐", "妹妹", "сестра", "сестры", "сестёр"), "sister"),
    **dict.fromkeys(("wife", "妻", "妻子", "老婆", "太太", "жена", "жену"), "wife"),
    **dict.fromkeys(("husband", "夫", "丈夫", "老公", "муж", "мужа"), "husband"),
    **dict.fromkeys(("partner", "spouse"), "partner"),
    **dict.fromkeys(("girlfriend", "女朋友", "девушка", "девушку"), "girlfriend"),
    **dict.fromkeys(("boyfriend", "男朋友", "парень", "парня"), "boyfriend"),
    **dict.fromkeys(("mother", "mom", "mum", "母", "妈妈", "母亲", "мама", "маму", "мать"), "mother"),
    **dict.fromkeys(("father", "dad", "父", "爸爸", "父亲", "папа", "папу", "отец", "отца"), "father"),
    **dict.fromkeys(
        (
            "dog",
            "dogs",
            "puppy",
            "puppies",
            "犬",
            "いぬ",
            "狗",
            "小狗",
            "собака",
            "собаку",
            "собаки",
            "собак",
            "пёс",
            "пес",
            "пса",
        ),
        "dog",
    ),
    **dict.fromkeys(
        (
            "cat",
            "cats",
            "kitten",
            "kittens",
            "kitty",
            "猫",
            "ねこ",
            "小猫",
            "猫咪",
            "кошка",
            "кошку",
            "кошки",
            "кот",
            "кота",
        ),
        "cat",
    ),
    **dict.fromkeys(
        ("vegetarian", "ベジタリアン", "菜食主義者", "素食者", "素食主义者", "吃素", "вегетарианец", "вегетарианка"),
        "vegetarian",
    ),
    **dict.fromkeys(("vegan", "ヴィーガン", "ビーガン", "纯素食者", "веган", "веганка"), "vegan"),
}


def key_word(value: str) -> str:
    """The key word of a relative, species or diet, or the value itself."""
    return KEY_WORDS.get(value.lower(), value)


# -- English -----------------------------------------------------------------------------------

_EN_REALLY = "(?:really<SP>+)?"
# The end of a one-word value: a clause end, or a word that joins the next clause.
_EN_END = r"(?=<SP>*(?:<T>|$)|<SP>+(?:and|but|so|now|too|since|because|as|though|myself|anyway)\b)"
_EN_I_AM = r"<B>I(?:<SP>+am|<APOS>m)<SP>+"
_EN_NAME = r"(?-i:(?P<x>(?!I\b)[A-Z][\w'’-]+(?:<SP>+[A-Z][\w'’-]+){0,2}))"
_EN_PLACE = r"(?P<x>(?:the<SP>+)?(?-i:[A-Z][\w'’-]*(?:<SP>+(?:[A-Z][\w'’-]*|de|da|do|del|upon|am|la)){0,3}))"
_EN_LANG = (
    r"(?P<x>English|French|German|Spanish|Italian|Portuguese|Japanese|Chinese|Mandarin|Cantonese|"
    r"Russian|Korean|Dutch|Polish|Ukrainian|Arabic|Hindi|Turkish|Swedish|Norwegian|Danish|Finnish|"
    r"Greek|Hebrew|Czech|Vietnamese|Thai|Indonesian)"
)
_EN_PROF = (
    r"(?:software<SP>+|data<SP>+|civil<SP>+|mechanical<SP>+|electrical<SP>+|product<SP>+|project<SP>+|"
    r"police<SP>+|social<SP>+|flight<SP>+|web<SP>+|UX<SP>+|graphic<SP>+|PhD<SP>+|graduate<SP>+|"
    r"high<SP>+school<SP>+|university<SP>+|college<SP>+|medical<SP>+|research<SP>+|senior<SP>+|junior<SP>+|"
    r"lead<SP>+|staff<SP>+|freelance<SP>+|full-stack<SP>+|backend<SP>+|frontend<SP>+|primary<SP>+school<SP>+|"
    r"school<SP>+|registered<SP>+|nurse<SP>+)*"
    r"(?:engineer|developer|programmer|designer|teacher|nurse|doctor|physician|surgeon|dentist|lawyer|"
    r"attorney|accountant|architect|scientist|researcher|professor|lecturer|student|writer|author|"
    r"journalist|editor|chef|cook|baker|farmer|pilot|driver|mechanic|electrician|plumber|carpenter|"
    r"pharmacist|therapist|psychologist|veterinarian|vet|consultant|analyst|manager|marketer|"
    r"photographer|artist|musician|actor|actress|translator|librarian|firefighter|officer|soldier|"
    r"paramedic|waiter|waitress|barista|cashier|entrepreneur|freelancer|economist|statistician|"
    r"mathematician|physicist|chemist|biologist|intern|secretary|receptionist|tutor|coach|trainer|"
    r"worker|servant|judge|banker|hairdresser|dancer|singer|illustrator|animator|sysadmin|"
    r"administrator|technician|nanny|caregiver|midwife|paralegal|retiree|housewife|homemaker|"
    r"tester|scientist)"
)
_EN_PROF_PHRASE = rf"(?P<x>(?P<art>an?)<SP>+{_EN_PROF})(?![\w'’-])"
_EN_REL = (
    r"(?P<rel>wife|husband|partner|spouse|girlfriend|boyfriend|son|daughter|mother|father|mom|mum|"
    r"dad|brother|sister)"
)
# Breeds people name instead of the species ("a golden retriever called Max").
_EN_BREEDS = (
    r"(?:golden<SP>+)?retriever|labrador|poodle|terrier|beagle|bulldog|spaniel|husky|collie|dachshund|"
    r"corgi|chihuahua|pug|sheepdog|greyhound|siamese|persian"
)
_EN_SPECIES_ONE = (
    rf"(?P<s>{_EN_BREEDS}|dog|puppy|cat|kitten|rabbit|bunny|hamster|parrot|budgie|guinea<SP>+pig|goldfish|"
    r"turtle|tortoise|snake|lizard|horse|ferret|gecko)"
)
_EN_SPECIES_ANY = (
    rf"(?P<s>(?:{_EN_BREEDS})s?|dogs?|puppy|puppies|cats?|kittens?|rabbits?|bunny|hamsters?|parrots?|budgies?|"
    r"guinea<SP>+pigs?|fish|goldfish|turtles?|tortoises?|snakes?|lizards?|horses?|ferrets?|"
    r"geckos?|chickens?)"
)
_EN_COUNT = r"(?P<n>a|an|one|two|three|four|five|six|\d+)"
_EN_HAVE = r"<B>I(?:<SP>+(?:have|own)|<APOS>ve)<SP>"  # "I have a cat and two hamsters": the list goes on
_EN_NAMED = r"(?:<APOS>s<SP>+name<SP>+is|<SP>+is<SP>+(?:called|named)|<SP>+name<SP>+is)<SP>+"
_EN_REPLY_LEAD = (
    r"(?:^|(?<=[.,;!?:\n]))<SP>*(?:(?:please|kindly|and|so|also|just|now|from<SP>+now<SP>+on|"
    r"going<SP>+forward)<SP>+)*(?:always<SP>+)?(?:you<SP>+(?:should|must)<SP>+|"
    r"I<SP>+(?:want|need|would<SP>+like)<SP>+you<SP>+to<SP>+|I<APOS>d<SP>+like<SP>+you<SP>+to<SP>+|"
    r"(?:can|could)<SP>+you<SP>+(?:always<SP>+)?)?"
)

# Words one of which a text must contain before a rule runs at all: a substring test is far
# cheaper than a regex scan of 64 KiB, and most replies have none of them.
_NEEDS_NAME = ("name", "call me", "go by", "called")
_NEEDS_RELATIVE = (
    "wife",
    "husband",
    "partner",
    "spouse",
    "friend",
    "son",
    "daughter",
    "mother",
    "father",
    "mom",
    "mum",
    "dad",
    "brother",
    "sister",
    "kid",
    "child",
    "grand",
)
_NEEDS_PET = (
    "dog",
    "pupp",
    "cat",
    "kitt",
    "rabbit",
    "bunny",
    "hamster",
    "parrot",
    "budgie",
    "guinea",
    "fish",
    "turtle",
    "tortoise",
    "snake",
    "lizard",
    "horse",
    "ferret",
    "gecko",
    "chicken",
    "retriever",
    "labrador",
    "poodle",
    "terrier",
    "beagle",
    "bulldog",
    "spaniel",
    "husky",
    "collie",
    "dachshund",
    "corgi",
    "chihuahua",
    "pug",
    "sheepdog",
    "greyhound",
    "siamese",
    "persian",
)
_NEEDS_LANGUAGE = tuple(_EN_LANG[len("(?P<x>") : -1].lower().split("|"))
_NEEDS_PROFESSION = ("i am a", "i'm a", "i’m a", "i am an", "i'm an", "i’m an")

_EN_SLOTS = (
    Slot(
        "name",
        rf"<B>(?:my<SP>+name<SP>+is|my<SP>+name<APOS>s|call<SP>+me|I<APOS>m<SP>+called|"
        rf"I<SP>+am<SP>+called|I<SP>+go<SP>+by|people<SP>+call<SP>+me)<SP>+{_EN_NAME}",
        "name:user",
        "User's name is {x}",
        needs=_NEEDS_NAME,
    ),
    Slot(
        "location",
        rf"<B>I(?:<SP>+(?:currently<SP>+|now<SP>+)?live|<APOS>m<SP>+(?:living|based)|<SP>+am<SP>+"
        rf"(?:living|based)|<SP>+reside)<SP>+in<SP>+{_EN_PLACE}",
        "location:home",
        "User lives in {x}",
        needs=("live", "living", "based", "reside"),
    ),
    Slot(
        "location",
        rf"<B>I(?:<SP>+(?:have<SP>+|just<SP>+|recently<SP>+)?|<APOS>ve<SP>+(?:just<SP>+)?)"
        rf"(?:moved|relocated)<SP>+to<SP>+{_EN_PLACE}",
        "location:home",
        "User moved to {x}",
        needs=("moved", "relocated"),
    ),
    Slot(
        "location",
        rf"(?:{_EN_I_AM}(?:originally<SP>+)?from|<B>I<SP>+(?:originally<SP>+)?come<SP>+from|"
        rf"<B>I<SP>+grew<SP>+up<SP>+in)<SP>+{_EN_PLACE}",
        "location:origin",
        "User is from {x}",
        needs=("from", "grew up"),
    ),
    Slot(
        "diet",
        rf"{_EN_I_AM}(?P<neg>not<SP>+|no<SP>+longer<SP>+)?(?:an?<SP>+)?(?:strict<SP>+)?"
        r"(?P<x>vegetarian|vegan|pescatarian|pescetarian|lactose<SP>+intolerant|gluten<SP>+intolerant|"
        r"celiac|coeliac|teetotal|diabetic)(?!<SP>+(?:food|dish|dishes|recipes?|options?|meals?|"
        r"restaurants?|cook|cooking))" + _EN_END,
        "diet:{x}",
        "User is {x}",
        "User is not {x}",
        needs=("vegetarian", "vegan", "pesc", "intolerant", "celiac", "coeliac", "teetotal", "diabetic"),
    ),
    Slot(
        "diet",
        rf"{_EN_I_AM}(?:severely<SP>+|very<SP>+)?allergic<SP>+to<SP>+(?P<x><NT>+)",
        "diet:allergy_{x}",
        "User is allergic to {x}",
        needs=("allergic",),
    ),
    Slot(
        "diet",
        r"<B>I<SP>+have<SP>+(?:an?<SP>+|severe<SP>+)?(?P<x>[\w-]+(?:<SP>+[\w-]+)?)<SP>+allergy<END>",
        "diet:allergy_{x}",
        "User has a {x} allergy",
        needs=("allergy",),
    ),
    Slot(
        "diet",
        r"<B>I<SP>+(?:don<APOS>?t|do<SP>+not)<SP>+(?P<v>eat|drink)<SP>+(?P<x><NT>+)",
        "diet:{x}",
        "User does not {v} {x}",
        polarity="negative",
        needs=("eat", "drink"),
    ),
    Slot(
        "family",
        rf"<B>I(?:<SP>+have|<APOS>ve)<SP>+(?:got<SP>+)?{_EN_COUNT}<SP>+(?:(?:little|young|grown|grown-up|adult|"
        r"teenage|lovely|wonderful|beautiful|older|younger)<SP>+)?(?P<rel>kids?|children|child|sons?|"
        r"daughters?|brothers?|sisters?|grandchildren|grandkids)(?![\w-])(?P<x>)",
        "family:{rel}",
        "User has {n} {rel}",
        needs=_NEEDS_RELATIVE,
    ),
    Slot(
        "family",
        rf"<B>and<SP>+{_EN_COUNT}<SP>+(?P<rel>kids?|children|child|sons?|daughters?|brothers?|sisters?)"
        r"(?![\w-])(?P<x>)",
        "family:{rel}",
        "User has {n} {rel}",
        lead_require=_EN_HAVE,
        needs=_NEEDS_RELATIVE,
    ),
    Slot(
        "family",
        rf"{_EN_I_AM}(?P<neg>not<SP>+)?(?:happily<SP>+)?(?P<x>married|single|divorced|engaged|"
        r"widowed|separated)" + _EN_END,
        "family:marital",
        "User is {x}",
        "User is not {x}",
        needs=("married", "single", "divorced", "engaged", "widowed", "separated"),
    ),
    Slot(
        "family",
        rf"<B>my<SP>+{_EN_REL}{_EN_NAMED}{_EN_NAME}",
        "family:{rel}_name",
        "User's {rel} is named {x}",
        needs=_NEEDS_RELATIVE,
    ),
    Slot(
        "family",
        rf"<B>my<SP>+{_EN_REL},?<SP>+{_EN_NAME}(?=,|<SP>|{T}|$)",
        "family:{rel}_name",
        "User's {rel} is named {x}",
        needs=_NEEDS_RELATIVE,
    ),
    Slot(
        "family",
        rf"<B>my<SP>+{_EN_REL}<SP>+(?:is|works<SP>+as)<SP>+{_EN_PROF_PHRASE}",
        "family:{rel}_profession",
        "User's {rel} is {x}",
        needs=_NEEDS_RELATIVE,
    ),
    Slot(
        "pet",
        rf"<B>I(?:<SP>+(?:have|own)|<APOS>ve)<SP>+(?:got<SP>+)?{_EN_COUNT}<SP>+(?:[\w-]+<SP>+)?{_EN_SPECIES_ANY}"
        rf"<SP>+(?:named|called)<SP>+{_EN_NAME}",
        "pet:{x}",
        "User has {n} {s} named {x}",
        needs=_NEEDS_PET,
    ),
    Slot(
        "pet",
        rf"<B>I(?:<SP>+(?:have|own)|<APOS>ve)<SP>+(?:got<SP>+)?{_EN_COUNT}<SP>+(?:(?:little|old|young|big|small|rescue|"
        rf"black|white|tabby|ginger|grey|gray|pet|lovely)<SP>+)?{_EN_SPECIES_ANY}(?![\w-])(?P<x>)",
        "pet:{s}",
        "User has {n} {s}",
        needs=_NEEDS_PET,
    ),
    Slot(
        "pet",
        rf"<B>and<SP>+{_EN_COUNT}<SP>+(?:[\w-]+<SP>+)?{_EN_SPECIES_ANY}<SP>+(?:named|called)<SP>+{_EN_NAME}",
        "pet:{x}",
        "User has {n} {s} named {x}",
        lead_require=_EN_HAVE,
        needs=_NEEDS_PET,
    ),
    Slot(
        "pet",
        rf"<B>and<SP>+{_EN_COUNT}<SP>+(?:[\w-]+<SP>+)?{_EN_SPECIES_ANY}(?![\w-])(?P<x>)",
        "pet:{s}",
        "User has {n} {s}",
        lead_require=_EN_HAVE,
        needs=_NEEDS_PET,
    ),
    Slot(
        "pet",
        rf"<B>my<SP>+{_EN_SPECIES_ONE}{_EN_NAMED}{_EN_NAME}",
        "pet:{x}",
        "User's {s} is named {x}",
        needs=_NEEDS_PET,
    ),
    Slot(
        "pet",
        rf"<B>my<SP>+{_EN_SPECIES_ONE},?<SP>+{_EN_NAME}(?=,|<SP>|{T}|$)",
        "pet:{x}",
        "User's {s} is named {x}",
        needs=_NEEDS_PET,
    ),
    Slot(
        "language",
        rf"{_EN_REPLY_LEAD}(?:reply|respond|answer|write|talk|speak)(?:<SP>+to<SP>+me)?"
        rf"(?:<SP>+always)?<SP>+(?:only<SP>+)?in<SP>+{_EN_LANG}",
        "language:reply",
        "User wants replies in {x}",
        needs=_NEEDS_LANGUAGE,
        request=True,
    ),
    Slot(
        "language",
        rf"<B>I<SP>+(?:prefer|want|need|would<SP>+like)<SP>+(?:you<SP>+to<SP>+(?:reply|respond|answer)|"
        rf"(?:answers|replies|responses))<SP>+(?:only<SP>+)?in<SP>+{_EN_LANG}",
        "language:reply",
        "User wants replies in {x}",
        needs=_NEEDS_LANGUAGE,
    ),
    Slot(
        "language",
        rf"<B>my<SP>+(?:native<SP>+language|mother<SP>+tongue|first<SP>+language)<SP>+is<SP>+{_EN_LANG}",
        "language:native",
        "User's native language is {x}",
        needs=_NEEDS_LANGUAGE,
    ),
    Slot(
        "language",
        rf"<B>I<SP>+(?:can<SP>+)?speak<SP>+(?:fluent<SP>+)?{_EN_LANG}",
        "language:speaks_{x}",
        "User speaks {x}",
        needs=_NEEDS_LANGUAGE,
    ),
    Slot(
        "language",
        rf"(?:{_EN_I_AM}(?:currently<SP>+)?learning|<B>I<SP>+study)<SP>+{_EN_LANG}",
        "language:learning_{x}",
        "User is learning {x}",
        needs=_NEEDS_LANGUAGE,
    ),
    Slot("profession", rf"{_EN_I_AM}{_EN_PROF_PHRASE}", "profession:job", "User is {x}", needs=_NEEDS_PROFESSION),
    Slot(
        "profession",
        r"<B>I<SP>+work<SP>+as<SP>+(?P<x>(?:an?<SP>+)?<NT>+)",
        "profession:job",
        "User works as {x}",
        needs=("work as",),
    ),
    Slot(
        "profession",
        rf"{_EN_I_AM}(?P<x>retired|unemployed|self-employed)" + _EN_END,
        "profession:job",
        "User is {x}",
        needs=("retired", "unemployed", "self-employed"),
    ),
    Slot(
        "profession",
        r"<B>I<SP>+work<SP>+(?:at|for)<SP>+(?-i:(?P<x>[A-Z][\w&'’.-]*(?:<SP>+[A-Z][\w&'’.-]*){0,3}))",
        "profession:employer",
        "User works at {x}",
        needs=("work at", "work for"),
    ),
)

_EN = Table(
    language="en",
    rules=(
        ("preference", PREFIX, rf"<B>I<SP>+{_EN_REALLY}prefer<SP>+"),
        ("preference", PREFIX, rf"<B>I<SP>+{_EN_REALLY}like<SP>+"),
        ("preference", PREFIX, r"<B>my<SP>+favou?rite<SP>+(?:is|are)<SP>+"),
        ("preference", PREFIX, r"<B>my<SP>+favou?rite<SP>+[\w-]+(?:<SP>+[\w-]+)?<SP>+(?:is|are)<SP>+"),
        (
            "preference",
            PREFIX,
            rf"<B>I<SP>+{_EN_REALLY}(?:don<APOS>?t|do<SP>+not|no<SP>+longer)<SP>+{_EN_REALLY}"
            r"(?:like|enjoy|love)<SP>+",
        ),
        ("preference", PREFIX, rf"<B>I<SP>+{_EN_REALLY}(?:hate|dislike|avoid)<SP>+"),
        ("preference", PREFIX, rf"<B>I<SP>+{_EN_REALLY}(?:enjoy|love)<SP>+"),
        ("preference", PREFIX, r"<B>I<SP>+(?:can<APOS>?t|cannot|can<SP>+not)<SP>+stand<SP>+"),
        ("preference", PREFIX, rf"{_EN_I_AM}(?:not<SP>+)?(?:a<SP>+)?(?:big<SP>+|huge<SP>+)?fan<SP>+of<SP>+"),
        # The apostrophe is required: the reference's "I'?ll" also matched "ill use".
        ("decision", PREFIX, r"<B>I(?:<APOS>ll|<SP>+will)<SP>+use<SP>+"),
        ("decision", PREFIX, r"<B>I<SP>+(?:chose|selected|picked|went<SP>+with)<SP>+"),
        ("decision", PREFIX, r"<B>I(?:<SP>+have|<APOS>ve)?<SP>+decided<SP>+(?:to<SP>+|on<SP>+)?"),
        ("decision", PREFIX, r"<B>I(?:<APOS>m|<SP>+am)<SP>+going<SP>+(?:to<SP>+(?:use|adopt)|with)<SP>+"),
        ("pattern", PREFIX, r"<B>I<SP>+(?:usually|always|never|typically|often|frequently|regularly)<SP>+"),
        ("pattern", PREFIX, r"<B>I<SP>+tend<SP>+to<SP>+"),
    ),
    slots=_EN_SLOTS,
    negative=r"\bnot\b|n<APOS>?t\b|\b(?:hate|dislike|avoid|never|no<SP>+longer|cannot)\b",
    hypothetical=(
        r"\b(?:if|unless|suppose|supposing|imagine|pretend|whether|wish|would|were|in<SP>+case|"
        r"what<SP>+if|as<SP>+if|even<SP>+if|maybe|perhaps|might|according<SP>+to)\b"
    ),
    reported=(
        r"\b(?<!\bI<SP>)(?:says|said|thinks|thought|believes|claims|claimed|told|tells|insists|assumes|"
        r"mentioned|according<SP>+to|wonders|asked|asks|heard|guesses|reckons)\b"
        r"|\b(?:he|she|they|we|you|people|everyone|everybody|others|friends|colleagues|parents|my<SP>+\w+)"
        r"<SP>+(?:all<SP>+|always<SP>+|often<SP>+)?(?:say|think|believe|claim|assume)\b"
    ),
)

# -- Japanese ----------------------------------------------------------------------------------

# Habit adverbs. A preference or decision clause never swallows one: "いつもVimを使います"
# is a habit, not the decision "いつもVim".
_JA_HABIT = "いつも(?!の)|普段(?:は)?|ふだん(?:は)?|たいてい|大抵|常に|基本的に|決して|毎回"
_JA_PAST = "(?:ました|た)"
_JA_SELF = "(?:私|わたし|あたし|僕|ぼく|俺|おれ|自分)"
_JA_WORD = "[^<TC>\\sはがをのにでと「」]"
_JA_NAME = f"(?P<x>{_JA_WORD}{{1,15}}?)"
_JA_PLACE = f"(?P<x>{_JA_WORD}{{1,15}}?)"
_JA_LANG = "(?P<x>英語|日本語|中国語|フランス語|ドイツ語|スペイン語|ロシア語|韓国語|イタリア語|ポルトガル語)"
_JA_PROF = (
    "(?:エンジニア|プログラマー|プログラマ|デザイナー|医者|医師|歯科医|看護師|教師|教員|弁護士|会計士|"
    "税理士|薬剤師|学生|大学生|大学院生|高校生|研究者|会社員|公務員|主婦|主夫|作家|記者|編集者|料理人|"
    "シェフ|警察官|消防士|獣医|美容師|保育士|介護士|翻訳者|通訳|銀行員|パイロット|建築家|科学者|経営者|"
    "フリーランス|開発者|研究員|公認会計士)"
)
_JA_PROF_PHRASE = f"(?P<x>{_JA_WORD}{{0,8}}?{_JA_PROF})"
_JA_REL = "(?P<rel>妻|夫|息子|娘|母|父|兄|姉|弟|妹)"
_JA_SPECIES = "(?P<s>犬|猫|ねこ|いぬ|ウサギ|うさぎ|ハムスター|インコ|金魚|オウム|カメ|亀|小鳥)"
_JA_CLAUSE = f"(?:^|(?<={T}))<SP>*(?:{_JA_SELF}(?:は|も)<SP>*)?"
_JA_OTHERS = (
    r"(?:彼|彼女|彼ら|あの人|あいつ|みんな|皆|誰か|友達|友人|同僚|母|父|妻|夫|兄|姉|弟|妹|息子|娘|"
    r"[^\s<TC>]{1,6}さん)(?:さん|くん|ちゃん|たち)?(?:は|も|が|って)"
)

_JA_SLOTS = (
    Slot(
        "name",
        f"{_JA_SELF}の名前は<SP>*{_JA_NAME}<SP>*(?:です|だ|と申します|といいます)",
        "name:user",
        "ユーザーの名前は{x}",
    ),
    Slot("name", f"{_JA_CLAUSE}{_JA_NAME}<SP>*と(?:申します|いいます|言います)", "name:user", "ユーザーの名前は{x}"),
    Slot("name", f"{_JA_NAME}<SP>*と呼んで(?:ください|下さい|ね)", "name:user", "ユーザーの呼び名は{x}"),
    Slot(
        "location",
        f"{_JA_PLACE}に住んで(?:います|いる|おります)",
        "location:home",
        "ユーザーは{x}に住んでいる",
        lead_reject=_JA_OTHERS,
    ),
    Slot("location", f"{_JA_PLACE}在住(?:です|だ)?", "location:home", "ユーザーは{x}在住", lead_reject=_JA_OTHERS),
    Slot(
        "location",
        f"{_JA_PLACE}に引っ越し(?:ました|た)",
        "location:home",
        "ユーザーは{x}に引っ越した",
        lead_reject=_JA_OTHERS,
    ),
    Slot(
        "location", f"{_JA_PLACE}(?:の)?出身(?:です|だ)", "location:origin", "ユーザーは{x}出身", lead_reject=_JA_OTHERS
    ),
    Slot(
        "diet",
        f"{_JA_CLAUSE}(?P<x>ベジタリアン|菜食主義者|ヴィーガン|ビーガン)(?P<neg>ではありません|ではない|じゃない)?"
        "(?:です|だ)?(?!の|な)",
        "diet:{x}",
        "ユーザーは{x}",
        "ユーザーは{x}ではない",
    ),
    Slot(
        "diet",
        f"{_JA_PLACE}(?:の|に)?アレルギー(?:があります|がある|です|持ち)",
        "diet:allergy_{x}",
        "ユーザーは{x}アレルギーがある",
        lead_reject=_JA_OTHERS,
    ),
    Slot(
        "diet",
        f"{_JA_CLAUSE}{_JA_PLACE}(?:は|を)食べません(?!か)",
        "diet:{x}",
        "ユーザーは{x}を食べない",
        polarity="negative",
    ),
    Slot(
        "diet",
        f"{_JA_CLAUSE}{_JA_PLACE}(?:は|を)飲みません(?!か)",
        "diet:{x}",
        "ユーザーは{x}を飲まない",
        polarity="negative",
    ),
    Slot(
        "family",
        "(?P<rel>子供|子ども|息子|娘|兄弟|姉妹|孫)が<SP>*(?P<n>[一二三四五六1-9１-９]人|ひとり|ふたり)?"
        "(?:います|いる)(?P<x>)",
        "family:{rel}",
        "ユーザーには{rel}が{n}いる",
        lead_reject=_JA_OTHERS,
    ),
    Slot(
        "family",
        f"(?:{_JA_SELF}の|うちの)?{_JA_REL}の名前は<SP>*{_JA_NAME}<SP>*(?:です|だ)",
        "family:{rel}_name",
        "ユーザーの{rel}の名前は{x}",
    ),
    Slot(
        "family",
        f"(?:{_JA_SELF}の|うちの)?{_JA_REL}は<SP>*{_JA_PROF_PHRASE}(?:です|だ|をしています)",
        "family:{rel}_profession",
        "ユーザーの{rel}は{x}",
    ),
    Slot(
        "family",
        f"{_JA_CLAUSE}(?P<x>結婚しています|結婚している|独身です|独身だ|離婚しました)",
        "family:marital",
        "ユーザーは{x}",
    ),
    Slot(
        "pet",
        f"{_JA_SPECIES}を<SP>*(?P<n>[一二三四1-9１-９](?:匹|羽|頭))?飼って(?:います|いる)(?P<x>)",
        "pet:{s}",
        "ユーザーは{s}を飼っている",
        lead_reject=_JA_OTHERS,
    ),
    Slot(
        "pet",
        f"(?:{_JA_SELF}の|うちの)?{_JA_SPECIES}の名前は<SP>*{_JA_NAME}<SP>*(?:です|だ)",
        "pet:{x}",
        "ユーザーの{s}の名前は{x}",
    ),
    Slot(
        "language",
        f"{_JA_LANG}で(?:返事|返信|回答|返答)(?:を)?(?:して)?(?:ください|下さい|ほしい|お願いします|お願い)",
        "language:reply",
        "ユーザーは{x}での返答を希望している",
    ),
    Slot(
        "language",
        f"{_JA_LANG}で(?:答え|話し|書い)て(?:ください|下さい|ほしい|ね)",
        "language:reply",
        "ユーザーは{x}での返答を希望している",
    ),
    Slot("language", f"(?:母国語|母語)は<SP>*{_JA_LANG}(?:です|だ)", "language:native", "ユーザーの母語は{x}"),
    Slot(
        "language",
        f"{_JA_CLAUSE}{_JA_LANG}を勉強して(?:います|いる)",
        "language:learning_{x}",
        "ユーザーは{x}を勉強している",
    ),
    Slot(
        "profession",
        f"{_JA_CLAUSE}{_JA_PROF_PHRASE}(?:です|だ|をしています|をしている)(?!か)",
        "profession:job",
        "ユーザーは{x}",
    ),
    Slot(
        "profession",
        f"{_JA_CLAUSE}{_JA_PROF_PHRASE}として働いて(?:います|いる)",
        "profession:job",
        "ユーザーは{x}として働いている",
    ),
    Slot(
        "profession",
        f"{_JA_SELF}?の?職業は<SP>*(?P<x>{_JA_WORD}{{1,12}}?)(?:です|だ)",
        "profession:job",
        "ユーザーの職業は{x}",
    ),
)

_JA = Table(
    language="ja",
    anchored=True,
    rules=(
        # "好きな/好みの" + noun is attributive ("Vimが好きな人" = people who like Vim).
        (
            "preference",
            SUFFIX,
            r"<SP>*(?:が|は|も)<SP>*(?:もう)?(?:大|一番|とても|すごく)?(?:好き|好み|嫌い|苦手)"
            r"(?![なの](?!ん))",
        ),
        ("preference", SUFFIX, r"<SP>*を<SP>*(?:好みます|好む|愛用しています|愛用している)"),
        (
            "decision",
            SUFFIX,
            rf"<SP>*を<SP>*(?:使う|使用する|採用する|導入する|選ぶ)ことに(?:し|決め|決定し){_JA_PAST}",
        ),
        ("decision", SUFFIX, r"<SP>*を<SP>*(?:使う|使用する|採用する)(?:つもり|予定)"),
        ("decision", SUFFIX, r"<SP>*を<SP>*(?:使い|使用し|採用し|導入し)ます(?!か)"),
        ("decision", SUFFIX, rf"<SP>*を<SP>*(?:選びました|選んだ|選択し{_JA_PAST}|採用し{_JA_PAST}|導入し{_JA_PAST})"),
        ("decision", SUFFIX, rf"<SP>*に<SP>*(?:決め|決定し){_JA_PAST}"),
        ("pattern", PREFIX, rf"(?:{_JA_HABIT})<SP>*"),
    ),
    slots=_JA_SLOTS,
    negative="嫌い|苦手|決して",
    hypothetical="もし|仮に|万一|万が一",
    reported="(?!)",  # the speaker's topic is checked by reject_context and lead_reject instead
    after_guard=(
        r"^[^<TC>]*?(?:たら|なら|れば|としたら|とすれば|と(?:言|い)っ|と思って|らしい|そうです|みたい)"
        r"|(?:か|かな|かしら|の)<SP>*$"
    ),
    suffix_content=rf"(?:(?!{_JA_HABIT})<NT>)",
    # The last topic: "私は", "わたしは", "エディタは", "家では", "Python は". A は right after
    # hiragana is usually inside a word ("ごはん"), so it must follow another script.
    strip_leading=(
        r"^.*(?:(?:私|わたし|あたし|僕|ぼく|俺|おれ|うち|自分|これ|それ|あれ|ここ|そこ)(?:では|には|は|も|が|って)"
        r"|(?<=[^ぁ-ゖ\s])<SP>*(?:では|には|とは|は))<SP>*"
    ),
    strip_trailing=r"(?:の(?:ほう|方)|(?<=[ぁ-ゖ])(?:の|こと))<SP>*$",
    reject_context=_JA_OTHERS,
    negation_after=r"^<SP>*(?:では|じゃ)(?:ない|なく|ありません|なかった)",
)

# -- Chinese -----------------------------------------------------------------------------------

_ZH_ADV = "(?:也|还|其实|真的|确实|很|非常|特别|最|比较|更|挺|一直|向来)*"
_ZH_SETTLED = "(?:已经|最终|最后|还是|终于)*"
_ZH_WORD = "[^<TC>\\s的了吗呢吧]"
_ZH_NAME = r"(?P<x>(?![了过着他她你它人])[\u4e00-\u9fffA-Za-z·]{1,8}?)(?=<SP>*(?:<T>|$|就|吧|。))"
_ZH_PLACE = f"(?P<x>{_ZH_WORD}{{1,15}}?)了?<END>"
_ZH_LANG = "(?P<x>中文|汉语|普通话|英文|英语|日语|日文|法语|法文|德语|俄语|俄文|西班牙语|韩语|意大利语)"
_ZH_PROF = (
    "(?:医生|大夫|老师|教师|教授|工程师|程序员|开发者|设计师|护士|律师|会计师|会计|学生|大学生|研究生|博士生|"
    "研究员|记者|编辑|厨师|警察|司机|作家|翻译|销售|经理|分析师|科学家|建筑师|药剂师|公务员|农民|画家|演员|"
    "歌手|摄影师|兽医|牙医|家庭主妇|自由职业者|创业者|秘书)"
)
_ZH_PROF_PHRASE = f"(?:一名|一个|一位|个|名)?(?P<x>[\\u4e00-\\u9fffA-Za-z]{{0,5}}?{_ZH_PROF})<END>"
_ZH_REL = "(?P<rel>妻子|老婆|太太|丈夫|老公|儿子|女儿|男朋友|女朋友|妈妈|爸爸|母亲|父亲|哥哥|姐姐|弟弟|妹妹)"
_ZH_SPECIES = "(?P<s>狗|小狗|猫|小猫|猫咪|兔子|仓鼠|鹦鹉|金鱼|乌龟)"
_ZH_COUNT = "(?P<n>一|两|二|三|四|五|\\d+)"

_ZH_SLOTS = (
    Slot("name", f"我(?:叫|的名字(?:是|叫))<SP>*{_ZH_NAME}", "name:user", "用户的名字是{x}"),
    Slot("name", f"(?:你|您)?(?:可以)?叫我<SP>*{_ZH_NAME}", "name:user", "用户希望被称为{x}"),
    Slot("location", f"我(?:现在|目前)?(?:住在|生活在)<SP>*{_ZH_PLACE}", "location:home", "用户住在{x}"),
    Slot("location", f"我(?:已经|最近)?搬(?:到|去)了?<SP>*{_ZH_PLACE}", "location:home", "用户搬到了{x}"),
    Slot("location", f"我(?:来自|老家(?:在|是))<SP>*{_ZH_PLACE}", "location:origin", "用户来自{x}"),
    Slot(
        "diet",
        "我(?P<neg>不)?(?:是)?(?:一个|一名|个)?(?P<x>素食者|素食主义者|纯素食者|吃素)(?:的)?<END>",
        "diet:{x}",
        "用户是{x}",
        "用户不是{x}",
    ),
    Slot("diet", f"我对<SP>*(?P<x>{_ZH_WORD}{{1,12}}?)过敏", "diet:allergy_{x}", "用户对{x}过敏"),
    Slot(
        "diet",
        f"我(?:从来)?不(?P<v>吃|喝)<SP>*(?P<x>{_ZH_WORD}{{1,12}}?)<END>",
        "diet:{x}",
        "用户不{v}{x}",
        polarity="negative",
    ),
    Slot(
        "family",
        f"我有{_ZH_COUNT}个(?P<rel>孩子|儿子|女儿|兄弟|姐妹|哥哥|姐姐|弟弟|妹妹|孙子|孙女)(?P<x>)",
        "family:{rel}",
        "用户有{n}个{rel}",
    ),
    Slot("family", f"我(?:的)?{_ZH_REL}叫<SP>*{_ZH_NAME}", "family:{rel}_name", "用户的{rel}叫{x}"),
    Slot("family", f"我(?:的)?{_ZH_REL}是<SP>*{_ZH_PROF_PHRASE}", "family:{rel}_profession", "用户的{rel}是{x}"),
    Slot("family", "我(?:已经)?(?P<x>结婚了|已婚|离婚了|是单身|单身)<END>", "family:marital", "用户{x}"),
    Slot(
        "pet",
        f"我(?:家)?(?:养了|养着|养|有)<SP>*{_ZH_COUNT}?(?:只|条|个|匹)<SP>*{_ZH_SPECIES}<SP>*(?:叫|名叫)<SP>*{_ZH_NAME}",
        "pet:{x}",
        "用户养了{n}只{s}，名叫{x}",
    ),
    Slot(
        "pet",
        f"我(?:家)?(?:养了|养着|养|有)<SP>*{_ZH_COUNT}?(?:只|条|个|匹)<SP>*{_ZH_SPECIES}(?P<x>)",
        "pet:{s}",
        "用户养了{n}只{s}",
    ),
    Slot("pet", f"我(?:的|家的?)?{_ZH_SPECIES}叫<SP>*{_ZH_NAME}", "pet:{x}", "用户的{s}叫{x}"),
    Slot(
        "language",
        f"(?:请)?(?:以后|今后|从现在开始)?(?:一直|总是|始终|都|只)?用<SP>*{_ZH_LANG}<SP>*"
        "(?:回答|回复|回我|跟我说|和我说|跟我交流|和我交流|交流|写)",
        "language:reply",
        "用户希望用{x}回复",
        lead_reject="[我他她]",
        request=True,
    ),
    Slot("language", f"我的母语是<SP>*{_ZH_LANG}", "language:native", "用户的母语是{x}"),
    Slot("language", f"我(?:会说|说)<SP>*{_ZH_LANG}", "language:speaks_{x}", "用户会说{x}"),
    Slot("language", f"我(?:在|正在)学(?:习)?<SP>*{_ZH_LANG}", "language:learning_{x}", "用户在学{x}"),
    Slot("profession", f"我是<SP>*{_ZH_PROF_PHRASE}", "profession:job", "用户是{x}"),
    Slot(
        "profession",
        f"我(?:的工作是|的职业是|做)<SP>*(?P<x>{_ZH_WORD}{{1,12}}?)<END>",
        "profession:job",
        "用户的工作是{x}",
    ),
    Slot("profession", "我(?:已经)?(?P<x>退休了)<END>", "profession:job", "用户{x}"),
)

_ZH = Table(
    language="zh",
    rules=(
        ("preference", PREFIX, rf"我{_ZH_ADV}(?:喜欢|爱|偏爱)的<NT>{{0,12}}?是<SP>*"),  # 我最喜欢的编辑器是…
        ("preference", PREFIX, rf"我{_ZH_ADV}(?:不再|不(?:太|怎么|是很|是太)?(?:喜欢|爱)|讨厌|厌恶|受不了|反感)<SP>*"),
        ("preference", PREFIX, rf"我{_ZH_ADV}(?:喜欢|喜爱|偏好|偏爱|钟爱|爱好|爱)<SP>*"),
        (
            "decision",
            PREFIX,
            rf"我{_ZH_SETTLED}(?:决定|打算|准备|计划)了?(?:要|先)?(?:使用|采用|选用|改用|换成|用)?<SP>*",
        ),
        ("decision", PREFIX, rf"我{_ZH_SETTLED}(?:选择|选定|选用|挑选|选|挑)了?<SP>*"),
        ("decision", PREFIX, r"我(?:将会|将|要)(?:使用|采用|改用|用)<SP>*"),
        (
            "pattern",
            PREFIX,
            rf"我{_ZH_ADV}(?:通常|一般|总是|经常|常常|往往|平时|平常|习惯于?|从来不|从来没有|从不|很少)"
            r"(?:都|会|要|是)*<SP>*",
        ),
    ),
    slots=_ZH_SLOTS,
    negative="不|讨厌|厌恶|受不了|反感|从来没有|很少",
    hypothetical="如果|假如|要是|假设|万一|倘若|假使|想象|也许|或许|可能",
    reported="(?<!我)(?:说|认为|觉得|以为|听说|告诉)",
    after_guard=r"(?:吗|么|呢)<SP>*$|^[^<TC>]*?的话",
    strip_trailing=r"[了啊呀吧呢哦嘛]+<SP>*$",
)

# -- Russian -----------------------------------------------------------------------------------

_RU_DEGREE = "(?:(?:очень|действительно|больше|тоже|всё<SP>+же|все<SP>+же)<SP>+)?"
_RU_USE = "(?:использовать|выбрать|взять|перейти<SP>+на|остановиться<SP>+на)"
_RU_NAME = r"(?-i:(?P<x>[А-ЯЁA-Z][а-яёa-z'-]+(?:<SP>+[А-ЯЁA-Z][а-яёa-z'-]+){0,2}))"
_RU_PLACE = r"(?-i:(?P<x>[А-ЯЁA-Z][\w-]*(?:<SP>+[А-ЯЁA-Z][\w-]*){0,2}))"
_RU_LANG = (
    r"(?P<x>на<SP>+(?:русском|английском|французском|немецком|испанском|японском|китайском|итальянском|"
    r"украинском|корейском|португальском)(?:<SP>+языке)?|по-(?:русски|английски|французски|немецки|"
    r"испански|японски|китайски|итальянски|украински|корейски))"
)
_RU_PROF_NOM = (
    "(?:врач|учитель|учительница|программист|программистка|разработчик|разработчица|инженер|медсестра|"
    "медбрат|юрист|адвокат|студент|студентка|дизайнер|бухгалтер|журналист|журналистка|повар|менеджер|"
    "преподаватель|преподавательница|учёный|ученый|аналитик|архитектор|переводчик|переводчица|фотограф|"
    "водитель|строитель|пилот|психолог|экономист|стоматолог|ветеринар|фармацевт|тестировщик|музыкант|"
    "художник|художница|писатель|писательница|пенсионер|пенсионерка|школьник|школьница|аспирант|"
    "аспирантка|механик|электрик|продавец|продавщица|официант|официантка|парикмахер|библиотекарь|"
    "тренер|предприниматель|фрилансер|администратор|исследователь|физик|химик|биолог|математик)"
)
_RU_PROF_INS = (
    "(?:врачом|учителем|учительницей|программистом|разработчиком|инженером|медсестрой|юристом|адвокатом|"
    "дизайнером|бухгалтером|журналистом|поваром|менеджером|преподавателем|аналитиком|архитектором|"
    "переводчиком|переводчицей|фотографом|водителем|строителем|пилотом|психологом|экономистом|"
    "стоматологом|ветеринаром|фармацевтом|тестировщиком|музыкантом|художником|писателем|механиком|"
    "электриком|продавцом|официантом|официанткой|парикмахером|библиотекарем|тренером|администратором|"
    "исследователем|физиком|химиком|биологом|математиком)"
)
_RU_ADJ = r"(?:[а-яё-]+(?:ый|ий|ой|ая|ым|им|ой)<SP>+)?"
_RU_SPECIES = "(?P<s>собака|собаки|собак|кошка|кошки|кот|кота|пёс|пес|попугай|хомяк|кролик|черепаха|рыбки)"

_RU_SLOTS = (
    Slot(
        "name",
        rf"<B>(?:меня<SP>+зовут|мо[её]<SP>+имя(?:<SP>*[—–-])?|зовите<SP>+меня)<SP>+{_RU_NAME}",
        "name:user",
        "Пользователя зовут {x}",
    ),
    Slot(
        "location", rf"<B>я<SP>+(?:сейчас<SP>+)?живу<SP>+в<SP>+{_RU_PLACE}", "location:home", "Пользователь живёт в {x}"
    ),
    Slot(
        "location",
        rf"<B>я<SP>+(?:недавно<SP>+)?(?:переехал|переехала)<SP>+в<SP>+{_RU_PLACE}",
        "location:home",
        "Пользователь переехал в {x}",
    ),
    Slot("location", rf"<B>я<SP>+(?:родом<SP>+)?из<SP>+{_RU_PLACE}", "location:origin", "Пользователь родом из {x}"),
    Slot(
        "diet",
        r"<B>я<SP>+(?P<neg>не<SP>+)?(?P<x>вегетарианец|вегетарианка|веган|веганка)(?![\w-])",
        "diet:{x}",
        "Пользователь — {x}",
        "Пользователь не {x}",
    ),
    Slot(
        "diet",
        r"<B>у<SP>+меня<SP>+(?:сильная<SP>+)?аллергия<SP>+на<SP>+(?P<x><NT>+)",
        "diet:allergy_{x}",
        "У пользователя аллергия на {x}",
    ),
    Slot("diet", r"<B>я<SP>+не<SP>+ем<SP>+(?P<x><NT>+)", "diet:{x}", "Пользователь не ест {x}", polarity="negative"),
    Slot("diet", r"<B>я<SP>+не<SP>+пью<SP>+(?P<x><NT>+)", "diet:{x}", "Пользователь не пьёт {x}", polarity="negative"),
    Slot(
        "family",
        r"<B>у<SP>+меня<SP>+(?:есть<SP>+)?(?P<n>один|одна|двое|трое|четверо|два|две|три|\d+)?<SP>*"
        r"(?P<rel>дети|детей|ребёнок|ребенок|сын|сына|сыновья|дочь|дочери|брат|брата|сестра|сестры)"
        r"(?![\w-])(?P<x>)",
        "family:{rel}",
        "У пользователя есть {n} {rel}",
    ),
    Slot(
        "family",
        r"<B>я<SP>+(?P<x>женат|замужем|разведён|разведен|разведена|холост|не<SP>+женат|не<SP>+замужем)"
        r"(?![\w-])",
        "family:marital",
        "Пользователь {x}",
    ),
    Slot(
        "family",
        rf"<B>(?:мою|моего)<SP>+(?P<rel>жену|мужа|сына|дочь|маму|папу|брата|сестру|девушку|парня)"
        rf"<SP>+зовут<SP>+{_RU_NAME}",
        "family:{rel}_name",
        "{Rel} пользователя зовут {x}",
    ),
    Slot(
        "family",
        rf"<B>(?:моя|мой)<SP>+(?P<rel>жена|муж|сын|дочь|мама|папа|брат|сестра)<SP>*(?:[—–-]<SP>*)?"
        rf"(?:работает<SP>+)?(?P<x>{_RU_ADJ}(?:{_RU_PROF_NOM}|{_RU_PROF_INS}))(?![\w-])",
        "family:{rel}_profession",
        "{Rel} пользователя — {x}",
    ),
    Slot(
        "pet",
        rf"<B>у<SP>+меня<SP>+(?:есть<SP>+)?(?:(?P<n>две|два|три|\d+)<SP>+)?{_RU_SPECIES}"
        rf"<SP>+по<SP>+кличке<SP>+{_RU_NAME}",
        "pet:{x}",
        "У пользователя есть {n} {s} по кличке {x}",
    ),
    Slot(
        "pet",
        rf"<B>у<SP>+меня<SP>+(?:есть<SP>+)?(?:(?P<n>две|два|три|\d+)<SP>+)?{_RU_SPECIES}(?![\w-])(?P<x>)",
        "pet:{s}",
        "У пользователя есть {n} {s}",
    ),
    Slot(
        "pet",
        rf"<B>(?:мою|моего)<SP>+(?P<s>собаку|кошку|кота|пса|попугая|хомяка|кролика)<SP>+зовут<SP>+{_RU_NAME}",
        "pet:{x}",
        "{S} пользователя зовут {x}",
    ),
    Slot(
        "language",
        rf"<B>(?:(?:пожалуйста|всегда|теперь|впредь|только),?<SP>+)*(?:отвечай|отвечайте|пиши|пишите|"
        rf"говори|говорите|общайся|общайтесь)(?:<SP>+(?:мне|со<SP>+мной))?(?:<SP>+(?:всегда|только))?"
        rf"<SP>+{_RU_LANG}",
        "language:reply",
        "Пользователь просит отвечать {x}",
    ),
    Slot(
        "language",
        r"<B>мой<SP>+родной<SP>+язык(?:<SP>*[—–-])?<SP>+(?P<x>[а-яё]+ий)(?![\w-])",
        "language:native",
        "Родной язык пользователя — {x}",
    ),
    Slot(
        "language",
        rf"<B>я<SP>+(?:свободно<SP>+)?говорю<SP>+{_RU_LANG}",
        "language:speaks_{x}",
        "Пользователь говорит {x}",
    ),
    Slot(
        "language",
        r"<B>я<SP>+(?:учу|изучаю)<SP>+(?P<x>[а-яё]+ий(?:<SP>+язык)?)(?![\w-])",
        "language:learning_{x}",
        "Пользователь изучает {x}",
    ),
    Slot(
        "profession",
        rf"<B>я<SP>+(?:по<SP>+профессии<SP>+)?(?P<x>{_RU_ADJ}{_RU_PROF_NOM})(?![\w-])",
        "profession:job",
        "Пользователь — {x}",
    ),
    Slot(
        "profession",
        rf"<B>я<SP>+работаю<SP>+(?P<x>{_RU_ADJ}{_RU_PROF_INS})(?![\w-])",
        "profession:job",
        "Пользователь работает {x}",
    ),
    Slot("profession", r"<B>я<SP>+(?P<x>на<SP>+пенсии)(?![\w-])", "profession:job", "Пользователь {x}"),
)

_RU = Table(
    language="ru",
    rules=(
        ("preference", PREFIX, rf"<B>я<SP>+{_RU_DEGREE}(?:предпочитаю|люблю|обожаю)<SP>+"),
        ("preference", PREFIX, rf"<B>мне<SP>+{_RU_DEGREE}(?:нравится|нравятся)<SP>+"),
        ("preference", PREFIX, r"<B>я<SP>+(?:(?:совсем|очень|тоже|больше)<SP>+)?не<SP>+(?:люблю|переношу)<SP>+"),
        ("preference", PREFIX, r"<B>мне<SP>+(?:(?:совсем|очень|тоже|больше)<SP>+)?не<SP>+(?:нравится|нравятся)<SP>+"),
        ("preference", PREFIX, r"<B>я<SP>+(?:ненавижу|избегаю|терпеть<SP>+не<SP>+могу)<SP>+"),
        (
            "preference",
            PREFIX,
            r"<B>мо(?:й|я|ё|е|и)<SP>+любим(?:ый|ая|ое|ые)<SP>+(?:[^\W\d_]+<SP>*)?(?:[—–-]|это\b)<SP>*",
        ),
        (
            "decision",
            PREFIX,
            rf"<B>я<SP>+(?:(?:уже|твёрдо|твердо|всё-таки|все-таки|в<SP>+итоге)<SP>+)?"
            rf"(?:решил|решила|решили)<SP>+(?:{_RU_USE}<SP>+)?",
        ),
        ("decision", PREFIX, r"<B>я<SP>+(?:выбрал|выбрала|выбрали)<SP>+"),
        ("decision", PREFIX, r"<B>я<SP>+(?:остановился|остановилась)<SP>+на<SP>+"),
        ("decision", PREFIX, r"<B>я<SP>+(?:буду|собираюсь|планирую)<SP>+(?:использовать|перейти<SP>+на)<SP>+"),
        (
            "pattern",
            PREFIX,
            r"<B>я<SP>+(?:обычно|всегда|часто|постоянно|регулярно|как<SP>+правило|никогда<SP>+не|"
            r"никогда)<SP>+",
        ),
        ("pattern", PREFIX, r"<B>(?:обычно|всегда|часто|как<SP>+правило)<SP>+я<SP>+"),
        ("pattern", PREFIX, r"<B>я<SP>+(?:привык|привыкла|привыкли|склонен|склонна)<SP>+"),
    ),
    slots=_RU_SLOTS,
    negative=r"(?<![\w])не(?![\w])|ненавижу|избегаю|никогда",
    hypothetical=r"(?<![\w])(?:если|бы|допустим|предположим|представь|представьте|вдруг|может<SP>+быть|возможно|ли)(?![\w])",
    reported=(
        r"(?<![\w])(?<!я<SP>)(?:говорит|говорят|сказал|сказала|сказали|думает|думают|считает|считают|уверен|"
        r"уверена|утверждает|по<SP>+словам|кажется)(?![\w])"
    ),
)

TABLES: tuple[Table, ...] = (_EN, _JA, _ZH, _RU)
