"""Rule-based fact extraction: the reference's English examples exactly, our
Japanese, Chinese and Russian rules, the 64 KiB window, keys and metadata."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memsvc.core.extraction.facts import (
    CATEGORY_TYPES,
    MAX_SCAN_BYTES,
    detect_languages,
    extract_facts,
    fact_metadata,
    scan_window,
    slugify,
)


def summary(text: str) -> list[tuple[str, str, str, str]]:
    """(key, the user's words the fact is about, type, category) of each fact."""
    return [(f.key, f.phrase, f.type, f.category) for f in extract_facts(text)]


# -- the reference's examples, exactly ---------------------------------------------------------------

SPEC_EXAMPLES = [
    (
        "I prefer dark mode in my editor.",
        [("preference:dark_mode_in_my_editor", "dark mode in my editor", "factual", "preference")],
    ),
    (
        "I'll use PostgreSQL for this project.",
        [("decision:postgresql_for_this_project", "PostgreSQL for this project", "episodic", "decision")],
    ),
    (
        "I decided to migrate to Docker.",
        [("decision:migrate_to_docker", "migrate to Docker", "episodic", "decision")],
    ),
    ("I really prefer tabs, not spaces", [("preference:tabs", "tabs", "factual", "preference")]),
    ("I'm going to use Bun", [("decision:bun", "Bun", "episodic", "decision")]),
    ("I prefer vim. I prefer vim.", [("preference:vim", "vim", "factual", "preference")]),
    ("I do not like it", []),
    ("The sky is blue. Water is wet.", []),
]


@pytest.mark.parametrize(("text", "expected"), SPEC_EXAMPLES, ids=[t for t, _ in SPEC_EXAMPLES])
def test_spec_examples(text: str, expected: list[tuple[str, str, str, str]]) -> None:
    assert summary(text) == expected


def test_only_the_newest_64_kib_is_scanned() -> None:
    filler = "lorem ipsum dolor sit amet " * (70 * 1024 // 27 + 1)
    text = "I prefer prefix-only-editor. " + filler + " I prefer tail-only-editor."
    assert len(text.encode()) > 70 * 1024
    assert summary(text) == [("preference:tail_only_editor", "tail-only-editor", "factual", "preference")]


def test_the_window_cuts_at_a_character_boundary() -> None:
    # 3-byte characters, offset by one ASCII byte, so the byte cut lands inside a character.
    text = "x" + "語" * (MAX_SCAN_BYTES // 3 + 10)
    window = scan_window(text)
    assert len(window.encode()) <= MAX_SCAN_BYTES
    assert text.endswith(window) and set(window) == {"語"}


def test_short_text_is_scanned_whole() -> None:
    text = "I prefer vim. " * 100
    assert scan_window(text) is text


# -- each English rule -------------------------------------------------------------------------

ENGLISH = [
    ("I like Rust", "preference", "Rust"),
    ("I really like Rust", "preference", "Rust"),
    ("My favorite is green tea", "preference", "green tea"),
    ("my favourite are cats", "preference", "cats"),
    ("I don't like Java", "preference", "Java"),
    ("I don’t like Java", "preference", "Java"),
    ("I do not like Java", "preference", "Java"),
    ("I hate meetings", "preference", "meetings"),
    ("I dislike meetings", "preference", "meetings"),
    ("I avoid meetings", "preference", "meetings"),
    ("I enjoy hiking", "preference", "hiking"),
    ("I love hiking", "preference", "hiking"),
    ("I will use Redis", "decision", "Redis"),
    ("I’ll use Redis", "decision", "Redis"),
    ("I chose Redis", "decision", "Redis"),
    ("I decided Redis", "decision", "Redis"),
    ("I have decided to use Redis", "decision", "use Redis"),
    ("I'm going with Redis", "decision", "Redis"),
    ("I’m going to adopt Redis", "decision", "Redis"),
    ("I selected Redis", "decision", "Redis"),
    ("I picked Redis", "decision", "Redis"),
    ("I went with Redis", "decision", "Redis"),
    ("I usually run tests first", "pattern", "run tests first"),
    ("I always run tests first", "pattern", "run tests first"),
    ("I never run tests first", "pattern", "run tests first"),
    ("I typically run tests first", "pattern", "run tests first"),
    ("I tend to run tests first", "pattern", "run tests first"),
    ("I often run tests first", "pattern", "run tests first"),
    ("I frequently run tests first", "pattern", "run tests first"),
    ("I regularly run tests first", "pattern", "run tests first"),
    ("i PREFER Vim", "preference", "Vim"),
]


@pytest.mark.parametrize(("text", "category", "content"), ENGLISH, ids=[t for t, _, _ in ENGLISH])
def test_english_rules(text: str, category: str, content: str) -> None:
    [fact] = extract_facts(text)
    assert (fact.category, fact.phrase, fact.type, fact.language) == (
        category,
        content,
        CATEGORY_TYPES[category],
        "en",
    )


@pytest.mark.parametrize(
    "text",
    ["Hi prefer cats", "the ill use of power", "I preferred vim", "I\nprefer vim", "I prefer\nvim"],
)
def test_cues_only_at_word_boundaries_and_within_a_line(text: str) -> None:
    assert extract_facts(text) == []


def test_a_capture_stops_at_a_clause_end() -> None:
    for end in ".,;!\n。，":
        assert [f.phrase for f in extract_facts(f"I prefer vim{end}and more")] == ["vim"]


def test_cues_do_not_swallow_each_other() -> None:
    assert summary("I really prefer tabs") == [("preference:tabs", "tabs", "factual", "preference")]
    assert summary("I don't like cilantro") == [("preference:cilantro", "cilantro", "factual", "preference")]
    assert [f.phrase for f in extract_facts("I'm going to use Bun")] == ["Bun"]


def test_a_cue_inside_another_facts_content_still_counts() -> None:
    assert [(f.category, f.phrase) for f in extract_facts("I always say I prefer tabs")] == [
        ("pattern", "say I prefer tabs"),
        ("preference", "tabs"),
    ]


def test_one_fact_per_key_in_first_appearance_order_and_the_later_statement_wins() -> None:
    facts = extract_facts("I prefer Vim. I always test. I prefer vim! I chose Rust. I prefer VIM")
    assert [(f.key, f.phrase) for f in facts] == [
        ("preference:vim", "VIM"),
        ("pattern:test", "test"),
        ("decision:rust", "Rust"),
    ]


def test_same_content_in_two_categories_gives_two_facts() -> None:
    keys = [f.key for f in extract_facts("I prefer Rust. I chose Rust.")]
    assert keys == ["preference:rust", "decision:rust"]


def test_content_is_cut_at_500_characters() -> None:
    [fact] = extract_facts("I prefer " + "a" * 600 + ". done")
    assert fact.phrase == "a" * 500
    assert fact.key == "preference:" + "a" * 40


def test_a_cut_never_leaves_trailing_space() -> None:
    [fact] = extract_facts("I prefer " + "word " * 200)
    assert len(fact.phrase) == 499 and fact.phrase == fact.phrase.strip()


def test_whitespace_is_collapsed() -> None:
    [fact] = extract_facts("I prefer   dark \t mode   ")
    assert fact.phrase == "dark mode"


def test_minimum_length_is_3_for_alphabetic_and_2_for_cjk() -> None:
    assert extract_facts("I like Go") == []
    assert [f.phrase for f in extract_facts("I like Vue")] == ["Vue"]
    assert [f.phrase for f in extract_facts("I like 香菜")] == ["香菜"]
    assert extract_facts("I like 猫") == []


def test_content_without_letters_or_digits_is_dropped() -> None:
    assert extract_facts("I prefer ---") == []


# -- Japanese, Chinese, Russian ----------------------------------------------------------------

OTHER_LANGUAGES = [
    ("ja", "私はダークモードが好きです。", "preference", "ダークモード"),
    ("ja", "辛い食べ物が嫌いです", "preference", "辛い食べ物"),
    ("ja", "TypeScript が好みです。", "preference", "TypeScript"),
    ("ja", "Python は好きではありません。", "preference", "Python"),
    ("ja", "ダークモードが好きなんです", "preference", "ダークモード"),
    ("ja", "家ではコーヒーが好きです", "preference", "コーヒー"),
    ("ja", "エディタはVimを使うことにしました。", "decision", "Vim"),
    ("ja", "Vimを使うことに決めました", "decision", "Vim"),
    ("ja", "私はVimを選びました", "decision", "Vim"),
    ("ja", "このプロジェクトでは Postgres を使います。", "decision", "Postgres"),
    ("ja", "毎朝走ることに決めました", "decision", "毎朝走る"),
    ("ja", "私はいつもコーヒーを飲みます。", "pattern", "コーヒーを飲みます"),
    ("ja", "私は常にプッシュ前にコミットします。", "pattern", "プッシュ前にコミットします"),
    ("zh", "我喜欢深色模式。", "preference", "深色模式"),
    ("zh", "我不喜欢香菜", "preference", "香菜"),
    ("zh", "我最喜欢的编辑器是Vim", "preference", "Vim"),
    ("zh", "我决定使用PostgreSQL。", "decision", "PostgreSQL"),
    ("zh", "我选择了Rust了", "decision", "Rust"),
    ("zh", "我通常早上喝咖啡。", "pattern", "早上喝咖啡"),
    ("zh", "我很少喝酒", "pattern", "喝酒"),
    ("ru", "Я предпочитаю тёмную тему.", "preference", "тёмную тему"),
    ("ru", "Я не люблю кинзу", "preference", "кинзу"),
    ("ru", "Мне нравится Python", "preference", "Python"),
    ("ru", "Мне не нравится Python.", "preference", "Python"),
    ("ru", "Мой любимый редактор — Vim", "preference", "Vim"),
    ("ru", "Я решил использовать PostgreSQL.", "decision", "PostgreSQL"),
    ("ru", "Я решила использовать PostgreSQL.", "decision", "PostgreSQL"),
    ("ru", "Я буду использовать Postgres для этого проекта.", "decision", "Postgres для этого проекта"),
    ("ru", "Я обычно пью кофе по утрам.", "pattern", "пью кофе по утрам"),
    ("ru", "Обычно я пью чай", "pattern", "пью чай"),
    ("ru", "Я никогда не ем мясо", "pattern", "ем мясо"),
]


@pytest.mark.parametrize(
    ("language", "text", "category", "content"), OTHER_LANGUAGES, ids=[t for _, t, _, _ in OTHER_LANGUAGES]
)
def test_other_language_rules(language: str, text: str, category: str, content: str) -> None:
    [fact] = extract_facts(text)
    assert (fact.category, fact.type, fact.key, fact.phrase, fact.language) == (
        category,
        CATEGORY_TYPES[category],
        f"{category}:{slugify(content)}",
        content,
        language,
    )


@pytest.mark.parametrize(
    "text",
    [
        "空は青い。",
        "彼はダークモードが好きです。",  # someone else's preference
        "父はいつも早起きします。",
        "Vimが好きな人は多い。",  # attributive: people who like Vim
        "天空是蓝色的。",
        "我们喜欢猫咪。",  # "we", not "I"
        "Небо голубое.",
        "Вода мокрая, а трава зелёная.",
    ],
)
def test_plain_statements_give_no_facts(text: str) -> None:
    assert extract_facts(text) == []


def test_the_seed_paragraph_in_japanese() -> None:
    text = (
        "TypeScript が好みです。このプロジェクトでは Postgres を使います。"
        "私は常にプッシュ前にコミットします。Python は好きではありません。"
    )
    assert [(f.category, f.phrase) for f in extract_facts(text)] == [
        ("preference", "TypeScript"),
        ("decision", "Postgres"),
        ("pattern", "プッシュ前にコミットします"),
        ("preference", "Python"),
    ]


def test_the_seed_paragraph_in_russian() -> None:
    text = (
        "Я предпочитаю TypeScript. Я буду использовать Postgres для этого проекта. "
        "Я всегда делаю коммит перед отправкой изменений. Мне не нравится Python."
    )
    assert [f.key for f in extract_facts(text)] == [
        "preference:typescript",
        "decision:postgres_для_этого_проекта",
        "pattern:делаю_коммит_перед_отправкой_изменений",
        "preference:python",
    ]


def test_mixed_text_runs_english_and_the_detected_language() -> None:
    facts = extract_facts("I prefer dark mode. 私はコーヒーが好きです。")
    assert [(f.language, f.phrase) for f in facts] == [("en", "dark mode"), ("ja", "コーヒー")]


@pytest.mark.parametrize(
    ("text", "languages"),
    [
        ("plain English", ("en",)),
        ("私はダークモードが好き", ("en", "ja")),
        ("漢字だけ", ("en", "ja")),
        ("我喜欢深色模式", ("en", "zh")),
        ("Мне нравится Python", ("en", "ru")),
        ("Мне нравится ダークモード", ("en", "ja", "ru")),
        ("迈克尔・乔丹", ("en", "zh")),  # the middle dot is not kana
    ],
)
def test_detect_languages(text: str, languages: tuple[str, ...]) -> None:
    assert detect_languages(text) == languages


# -- slugs and metadata ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "slug"),
    [
        ("dark mode in my editor", "dark_mode_in_my_editor"),
        ("ダークモード", "ダークモード"),
        ("тёмная тема", "тёмная_тема"),
        ("те\u0308мная", "тёмная"),  # decomposed ё: same key as the precomposed one
        ("  --Hello, World!!  ", "hello_world"),
        ("PostgreSQL 16", "postgresql_16"),
        ("a" * 39 + " b", "a" * 39),  # cut at 40, then the trailing "_" goes
        ("Vimを使う", "vimを使う"),
        ("!!!", ""),
    ],
)
def test_slugify(text: str, slug: str) -> None:
    assert slugify(text) == slug


def test_fact_metadata_shape() -> None:
    [fact] = extract_facts("I prefer dark mode.")
    when = datetime(2024, 5, 1, 14, 30, 15, 123456, tzinfo=timezone(timedelta(hours=2)))
    meta = fact_metadata(fact, when)
    assert meta == {
        "category": "preference",
        "extractedAt": "2024-05-01T12:30:15.123Z",
        "source": "llm_response",
        "language": "en",
        "polarity": "positive",
    }
    assert datetime.fromisoformat(meta["extractedAt"].replace("Z", "+00:00")) == when.replace(microsecond=123000)


def test_fact_metadata_takes_a_naive_time_as_utc() -> None:
    [fact] = extract_facts("Я предпочитаю тёмную тему.")
    meta = fact_metadata(fact, datetime(2024, 1, 2, 3, 4, 5))
    assert meta["extractedAt"] == "2024-01-02T03:04:05.000Z"
    assert meta["language"] == "ru"


# -- properties --------------------------------------------------------------------------------

FRAGMENTS = [
    "I prefer ",
    "I really like ",
    "I don't like ",
    "my favorite is ",
    "I'll use ",
    "I’m going to use ",
    "I decided to ",
    "I usually ",
    "I always ",
    "vim",
    "dark mode",
    "Go",
    "it",
    " ",
    ".",
    ",",
    "!",
    "\n",
    "私は",
    "が好きです",
    "を使うことにしました",
    "いつも",
    "コーヒー",
    "は",
    "。",
    "、",
    "我",
    "喜欢",
    "不喜欢",
    "决定使用",
    "通常",
    "香菜",
    "，",
    "Я ",
    "предпочитаю ",
    "не люблю ",
    "Мне нравится ",
    "решил использовать ",
    "обычно ",
    "кофе",
    "My name is ",
    "Anna",
    "I live in ",
    "Paris",
    "I'm ",
    "vegetarian",
    "allergic to ",
    "I have ",
    "two ",
    "kids",
    "a dog named ",
    "Rex",
    "Always reply in ",
    "French",
    "a nurse",
    "my wife ",
    "If ",
    "?",
    "anymore",
    "我叫",
    "我住在",
    "北京",
    "我有两个孩子",
    "请用中文回答",
    "妻は",
    "医者です",
    "東京に住んでいます",
    "猫の名前は",
    "Меня зовут ",
    "Анна",
    "Я живу в ",
    "Москве",
    "У меня ",
    "собака",
    "Отвечай на русском",
    "я работаю врачом",
]
texts = st.one_of(
    st.text(),
    st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=5)), max_size=30).map("".join),
)


SUBJECT = {"en": "user", "ja": "ユーザー", "zh": "用户", "ru": "пользовател"}


@settings(max_examples=300, deadline=None)
@given(texts)
def test_extraction_invariants(text: str) -> None:
    facts = extract_facts(text)
    keys = [f.key for f in facts]
    assert len(keys) == len(set(keys))
    for fact in facts:
        assert fact.category in CATEGORY_TYPES
        assert fact.type == CATEGORY_TYPES[fact.category]
        assert fact.key.startswith(fact.category + ":") and fact.key == fact.key.strip("_")
        assert 1 <= len(fact.phrase) <= 500 and fact.phrase == fact.phrase.strip()
        assert 0 < len(fact.content) <= 500 and fact.content == fact.content.strip()
        assert SUBJECT[fact.language] in fact.content.lower()  # a fact always names the user
        assert fact.polarity in ("positive", "negative")
        assert fact.language in ("en", "ja", "zh", "ru")


@settings(max_examples=50, deadline=None)
@given(st.text(min_size=1, max_size=200))
def test_slug_invariants(text: str) -> None:
    slug = slugify(text)
    assert len(slug) <= 40
    assert not slug.startswith("_") and not slug.endswith("_")
    assert "__" not in slug
    assert slugify(slug) == slug  # a key's slug is stable when recomputed


# -- statements that keep their meaning --------------------------------------------------------


def statements(text: str) -> list[tuple[str, str, str]]:
    return [(f.key, f.content, f.polarity) for f in extract_facts(text)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I don't like long answers.", ("preference:long_answers", "User does not like long answers", "negative")),
        ("I do not enjoy small talk", ("preference:small_talk", "User does not enjoy small talk", "negative")),
        ("I hate meetings", ("preference:meetings", "User hates meetings", "negative")),
        ("I can't stand cilantro", ("preference:cilantro", "User cannot stand cilantro", "negative")),
        ("I'm not a fan of jazz", ("preference:jazz", "User is not a fan of jazz", "negative")),
        ("I never eat meat", ("pattern:eat_meat", "User never eats meat", "negative")),
        ("I prefer concise answers.", ("preference:concise_answers", "User prefers concise answers", "positive")),
        ("I really like Rust", ("preference:rust", "User really likes Rust", "positive")),
        (
            "I usually answer in bullet points.",
            ("pattern:answer_in_bullet_points", "User usually answers in bullet points", "positive"),
        ),
        ("I tend to watch films", ("pattern:watch_films", "User tends to watch films", "positive")),
        ("I'm going to use Bun", ("decision:bun", "User is going to use Bun", "positive")),
        ("I have decided to use Redis", ("decision:use_redis", "User has decided to use Redis", "positive")),
        ("I'll use PostgreSQL", ("decision:postgresql", "User will use PostgreSQL", "positive")),
        ("My favorite is green tea", ("preference:green_tea", "User's favorite is green tea", "positive")),
        (
            "I prefer dark mode in my editor.",
            ("preference:dark_mode_in_my_editor", "User prefers dark mode in their editor", "positive"),
        ),
        ("Python は好きではありません。", ("preference:python", "ユーザーはPythonが好きではない", "negative")),
        ("辛い食べ物が嫌いです", ("preference:辛い食べ物", "ユーザーは辛い食べ物が嫌い", "negative")),
        ("Vimを使うことに決めました", ("decision:vim", "ユーザーはVimを使うことに決めました", "positive")),
        ("我不喜欢香菜", ("preference:香菜", "用户不喜欢香菜", "negative")),
        ("我最喜欢的编辑器是Vim", ("preference:vim", "用户最喜欢的编辑器是Vim", "positive")),
        ("Я не люблю кинзу", ("preference:кинзу", "Пользователь не любит кинзу", "negative")),
        ("Мне нравится Python", ("preference:python", "Пользователю нравится Python", "positive")),
        ("Мой любимый редактор — Vim", ("preference:vim", "Любимый редактор пользователя — Vim", "positive")),
        (
            "Я обычно пью кофе по утрам.",
            ("pattern:пью_кофе_по_утрам", "Пользователь обычно пьёт кофе по утрам", "positive"),
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_a_fact_is_a_statement_with_subject_verb_and_polarity(text, expected) -> None:
    assert statements(text) == [expected]


def test_a_russian_verb_that_cannot_be_conjugated_safely_is_quoted() -> None:
    [fact] = extract_facts("Я обычно тащу с собой зонт")
    assert fact.content == "Пользователь о себе: «Я обычно тащу с собой зонт»"
    assert [f.content for f in extract_facts("Я всегда ставлю будильник")] == ["Пользователь всегда ставит будильник"]


@pytest.mark.parametrize(
    ("first", "second", "key"),
    [
        ("I like tea.", "I don't like tea anymore.", "preference:tea"),
        ("I love the beach.", "I hate the beach.", "preference:the_beach"),
        ("I always drink tea.", "I never drink tea.", "pattern:drink_tea"),
        ("紅茶が好きです。", "紅茶が嫌いです。", "preference:紅茶"),
        ("我喜欢咖啡。", "我不喜欢咖啡了。", "preference:咖啡"),
        ("Я люблю чай.", "Я больше не люблю чай.", "preference:чай"),
        ("I live in Paris.", "I moved to Berlin.", "location:home"),
        ("My name is Anna.", "Call me Ann.", "name:user"),
        ("I'm a nurse.", "I work as a teacher.", "profession:job"),
        ("Always reply in French.", "Please answer in German.", "language:reply"),
        ("I'm vegetarian.", "I'm no longer vegetarian.", "diet:vegetarian"),
    ],
)
def test_a_contradiction_or_update_has_the_key_of_the_fact_it_replaces(first, second, key) -> None:
    [old] = extract_facts(first)
    [new] = extract_facts(second)
    assert old.key == new.key == key
    assert old.content != new.content
    # In one text, the later statement wins.
    [fact] = extract_facts(f"{first} {second}")
    assert fact.content == new.content


# -- everyday facts ----------------------------------------------------------------------------

EVERYDAY = [
    # English
    ("My name is Anna Schmidt.", "name:user", "User's name is Anna Schmidt"),
    ("Call me Sam.", "name:user", "User's name is Sam"),
    ("I live in New York with my wife.", "location:home", "User lives in New York"),
    ("I moved to Berlin last year.", "location:home", "User moved to Berlin"),
    ("I'm originally from Brazil.", "location:origin", "User is from Brazil"),
    ("I'm vegetarian.", "diet:vegetarian", "User is vegetarian"),
    ("I'm allergic to peanuts.", "diet:allergy_peanuts", "User is allergic to peanuts"),
    ("I have two kids.", "family:children", "User has two kids"),
    ("My daughter is called Emma.", "family:daughter_name", "User's daughter is named Emma"),
    ("I'm married.", "family:marital", "User is married"),
    ("I have a dog named Biscuit.", "pet:biscuit", "User has a dog named Biscuit"),
    ("My cat's name is Luna.", "pet:luna", "User's cat is named Luna"),
    ("Always reply in French.", "language:reply", "User wants replies in French"),
    ("From now on, answer in German.", "language:reply", "User wants replies in German"),
    ("I'm a software engineer.", "profession:job", "User is a software engineer"),
    ("I work as a nurse at my local hospital", "profession:job", "User works as a nurse at their local hospital"),
    # Japanese
    ("私の名前は佐藤です。", "name:user", "ユーザーの名前は佐藤"),
    ("大阪に住んでいます。", "location:home", "ユーザーは大阪に住んでいる"),
    ("私はベジタリアンです。", "diet:vegetarian", "ユーザーはベジタリアン"),
    ("そばアレルギーがあります。", "diet:allergy_そば", "ユーザーはそばアレルギーがある"),
    ("子供が二人います。", "family:children", "ユーザーには子供が二人いる"),
    ("うちの猫の名前はミケです。", "pet:ミケ", "ユーザーの猫の名前はミケ"),
    ("日本語で返事してください。", "language:reply", "ユーザーは日本語での返答を希望している"),
    ("私は看護師として働いています。", "profession:job", "ユーザーは看護師として働いている"),
    # Chinese
    ("我叫王芳。", "name:user", "用户的名字是王芳"),
    ("我住在上海。", "location:home", "用户住在上海"),
    ("我是素食者。", "diet:vegetarian", "用户是素食者"),
    ("我对花生过敏。", "diet:allergy_花生", "用户对花生过敏"),
    ("我有两个孩子。", "family:children", "用户有两个孩子"),
    ("我的猫叫咪咪。", "pet:咪咪", "用户的猫叫咪咪"),
    ("请用中文回答。", "language:reply", "用户希望用中文回复"),
    ("我是一名软件工程师。", "profession:job", "用户是软件工程师"),
    # Russian
    ("Меня зовут Ольга.", "name:user", "Пользователя зовут Ольга"),
    ("Я живу в Казани.", "location:home", "Пользователь живёт в Казани"),
    ("Я вегетарианец.", "diet:vegetarian", "Пользователь — вегетарианец"),
    ("У меня аллергия на орехи.", "diet:allergy_орехи", "У пользователя аллергия на орехи"),
    ("У меня двое детей.", "family:children", "У пользователя есть двое детей"),
    ("Мою кошку зовут Мурка.", "pet:мурка", "Кошку пользователя зовут Мурка"),
    ("Отвечай на английском.", "language:reply", "Пользователь просит отвечать на английском"),
    ("Я работаю программистом.", "profession:job", "Пользователь работает программистом"),
]


@pytest.mark.parametrize(("text", "key", "content"), EVERYDAY, ids=[t for t, _, _ in EVERYDAY])
def test_everyday_facts(text: str, key: str, content: str) -> None:
    [fact] = extract_facts(text)
    assert (fact.key, fact.content, fact.type) == (key, content, "factual")
    assert fact.category == key.split(":")[0]


@pytest.mark.parametrize(
    ("text", "key", "content"),
    [
        ("I don't eat pork.", "diet:pork", "User does not eat pork"),
        ("肉は食べません。", "diet:肉", "ユーザーは肉を食べない"),
        ("我不吃牛肉。", "diet:牛肉", "用户不吃牛肉"),
        ("Я не ем мясо.", "diet:мясо", "Пользователь не ест мясо"),
        ("I'm not married.", "family:marital", "User is not married"),
    ],
)
def test_everyday_facts_that_say_what_the_user_does_not_do_are_negative(text, key, content) -> None:
    assert statements(text) == [(key, content, "negative")]


def test_a_list_after_i_have_goes_on() -> None:
    assert [f.key for f in extract_facts("I have a cat and two hamsters.")] == ["pet:cat", "pet:hamsters"]
    assert [f.key for f in extract_facts("My sister has a cat and a dog.")] == []


@pytest.mark.parametrize(
    "text",
    [
        "Call me when you are done.",  # not a name: no capital
        "I live in a small flat.",  # not a place
        "I'm a big fan of doctors.",  # not a profession
        "I'm a vegetarian restaurant owner's son.",
        "I always reply in French to my clients.",  # the user's habit, not a request
    ],
)
def test_everyday_rules_need_the_shape_of_the_fact(text: str) -> None:
    assert all(f.category not in ("name", "location", "profession", "diet", "language") for f in extract_facts(text))


# -- what is not the user's statement ----------------------------------------------------------

NOT_THE_USERS = [
    # hypotheticals
    "If I liked coffee, I would drink more of it.",
    "Suppose I prefer dark mode, what changes?",
    "I wish I liked vegetables.",
    "If I'm allergic to nuts, tell me.",
    "もし猫が好きだったら、飼っていたと思います。",
    "仮にPythonが嫌いなら、何を使えばいいですか？",
    "如果我喜欢猫，我就会养一只。",
    "要是我住在北京，我会天天吃烤鸭。",
    "Если бы я любил кошек, я бы завёл кошку.",
    "Допустим, я люблю кофе, что тогда?",
    # questions
    "Do I like jazz?",
    "Am I allergic to nuts?",
    "私はコーヒーが好きですか？",
    "辛い料理は好きですか",
    "我喜欢茶吗？",
    "我喜欢茶吗",
    "Я люблю джаз?",
    # reported speech and other people's preferences
    "My wife prefers tea.",
    "My husband says I like horror movies.",
    "She told me I love sushi.",
    "According to my doctor, I like salty food too much.",
    "My friends say I always arrive late.",
    "妻は紅茶が好きです。",
    "彼はVimが好きだと言っています。",
    "妻は東京に住んでいます。",
    "我妻子喜欢喝茶。",
    "他说我喜欢吃辣。",
    "妈妈觉得我喜欢甜食。",
    "Моя жена любит чай.",
    "Жена думает, что я люблю сладкое.",
    "Он сказал, что я предпочитаю чай.",
]


@pytest.mark.parametrize("text", NOT_THE_USERS)
def test_hypotheticals_questions_and_reported_speech_give_no_fact(text: str) -> None:
    assert extract_facts(text) == []


@pytest.mark.parametrize(
    ("text", "key", "content"),
    [
        ("My wife is a doctor.", "family:wife_profession", "User's wife is a doctor"),
        ("妻は医者です。", "family:wife_profession", "ユーザーの妻は医者"),
        ("我妻子是医生。", "family:wife_profession", "用户的妻子是医生"),
        ("Моя жена — врач.", "family:wife_profession", "Жена пользователя — врач"),
    ],
)
def test_a_relatives_profession_is_a_family_fact_not_the_users(text, key, content) -> None:
    facts = extract_facts(text)
    assert [(f.key, f.content) for f in facts] == [(key, content)]
    assert not any(f.category == "profession" for f in facts)


def test_the_user_still_speaks_beside_someone_else() -> None:
    assert [f.key for f in extract_facts("My wife prefers tea, but I prefer coffee.")] == ["preference:coffee"]
    assert [f.key for f in extract_facts("I always say I prefer tabs")] == [
        "pattern:say_i_prefer_tabs",
        "preference:tabs",
    ]


@pytest.mark.parametrize(
    ("text", "content"),
    [
        ("Can you always reply in Spanish?", "User wants replies in Spanish"),
        ("Could you answer in German from now on?", "User wants replies in German"),
        ("可以用英语回答吗？", "用户希望用英语回复"),
    ],
)
def test_a_request_phrased_as_a_question_still_sets_the_reply_language(text: str, content: str) -> None:
    assert statements(text) == [("language:reply", content, "positive")]


@pytest.mark.parametrize(
    "text",
    ["Do you reply in French?", "Should I reply in French?", "Do I speak French?", "If you can, reply in French."],
)
def test_a_question_about_a_language_is_no_request(text: str) -> None:
    assert extract_facts(text) == []
