"""Speaker attribution of extraction rules: the assistant's first-person words give no user
fact; its second-person restatements give the fact the user's own words would give (same
key, same statement); questions, suggestions and hypotheticals give nothing; in all four
languages."""

from __future__ import annotations

import pytest

from memsvc.core.extraction.facts import extract_facts
from memsvc.core.extraction.speakers import ASSISTANT, USER


def facts(text: str, speaker: str = ASSISTANT) -> list[tuple[str, str]]:
    return [(f.key, f.content) for f in extract_facts(text, speaker)]


ASSISTANT_SELF = [
    "I prefer concise answers. I usually answer in bullet points.",
    "Sure! I love Italian food, and I prefer simple recipes.",
    "My name is Mia and I live in Tokyo.",
    "I'm vegetarian too! I have two cats.",
    "私はイタリア料理が好きです。東京に住んでいます。",
    "我喜欢意大利菜。我住在东京。",
    "Я люблю итальянскую кухню. Я живу в Токио.",
]


@pytest.mark.parametrize("text", ASSISTANT_SELF)
def test_assistant_first_person_is_no_user_fact(text: str) -> None:
    assert facts(text) == []
    assert facts(text, USER)  # the same words from the user are the user's facts


# (assistant's restatement, the user's own words that mean the same)
RESTATEMENTS = [
    ("You mentioned you live in Paris.", "I live in Paris."),
    ("You mentioned that you live in Paris, so here are some cafés.", "I live in Paris."),
    ("Since you're vegetarian, try the lentil soup.", "I'm vegetarian."),
    ("As you said, you're allergic to peanuts.", "I'm allergic to peanuts."),
    ("You told me your name is Anna.", "My name is Anna."),
    ("You've said your wife is a doctor.", "My wife is a doctor."),
    ("You told me you were a teacher.", "I'm a teacher."),
    ("You're vegetarian, as you mentioned.", "I'm vegetarian."),
    ("From what you've told me, you don't like long answers.", "I don't like long answers."),
    ("I remember you saying you have two kids.", "I have two kids."),
    ("Because you prefer tea, I made oolong.", "I prefer tea."),
    ("パリにお住まいとのことですが、おすすめのカフェを紹介します。", "パリに住んでいます。"),
    ("以前、猫を飼っているとおっしゃっていましたね。", "猫を飼っています。"),
    ("ベジタリアンでいらっしゃるので、野菜料理をおすすめします。", "私はベジタリアンです。"),
    ("奥様は医者だと伺いました。", "妻は医者です。"),
    ("コーヒーがお好きなんですね。", "コーヒーが好きです。"),
    ("你说过你住在巴黎。", "我住在巴黎。"),
    ("你提到过你对花生过敏，所以我没放。", "我对花生过敏。"),
    ("既然你是素食者，我推荐这道菜。", "我是素食者。"),
    ("你告诉过我你的妻子是医生。", "我的妻子是医生。"),
    ("Вы упоминали, что живёте в Париже.", "Я живу в Париже."),
    ("Раз вы вегетарианец, попробуйте этот суп.", "Я вегетарианец."),
    ("Как вы говорили, у вас есть собака.", "У меня есть собака."),
    ("Ты говорил, что любишь джаз.", "Я люблю джаз."),
    ("Вы сказали, что предпочитаете короткие ответы.", "Я предпочитаю короткие ответы."),
    ("Вы упоминали, что вас зовут Анна.", "Меня зовут Анна."),
]


@pytest.mark.parametrize(("reply", "own"), RESTATEMENTS, ids=[r for r, _ in RESTATEMENTS])
def test_restatement_gives_the_users_own_fact(reply: str, own: str) -> None:
    expected = facts(own, USER)
    assert expected, own
    assert facts(reply) == expected


NOTHING = [
    "Do you like tea?",
    "You might like jazz.",
    "You should try sushi.",
    "If you live in Paris, visit the Louvre.",
    "If, as you said, you live in Paris, visit the Louvre.",
    "You mentioned you live in Paris, right?",
    "Did you say you live in Paris?",
    "You said you like my recipes.",  # "my" is the assistant's: not guessed at
    "You mentioned that Paris is lovely.",
    "猫がお好きですか？",
    "もしパリにお住まいなら、ルーヴルへどうぞ。",
    "パリにお住まいとのことですか？",
    "你喜欢茶吗？",
    "你可能会喜欢爵士乐。",
    "如果你住在巴黎，可以去卢浮宫。",
    "你说过你住在巴黎吗？",
    "Вы любите чай?",
    "Вам может понравиться джаз.",
    "Если вы живёте в Париже, сходите в Лувр.",
    "Вы говорили, что живёте в Париже?",
]


@pytest.mark.parametrize("reply", NOTHING)
def test_questions_suggestions_hypotheticals_give_nothing(reply: str) -> None:
    assert facts(reply) == []


def test_only_the_restated_clause_is_read() -> None:
    """The rest of the assistant's sentence is its own: "I love this dish" after the
    restated premise is not the user's."""
    assert facts("Since you're vegetarian, I love this dish for you.") == [("diet:vegetarian", "User is vegetarian")]


def test_unknown_speaker_is_refused() -> None:
    with pytest.raises(ValueError, match="speaker"):
        extract_facts("I like tea", "narrator")
