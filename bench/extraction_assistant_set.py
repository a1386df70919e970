"""The assistant turns of the labelled extraction set, generated from templates × slots in
English, Japanese, Chinese and Russian, and written to bench/extraction_assistant_set.jsonl:

    .venv/bin/python bench/extraction_assistant_set.py

A slot is one fact about a person in four forms: the assistant restating it about the user
(second person: "you live in Paris", 「パリにお住まい」, "你住在巴黎", "вы живёте в
Париже"), the assistant saying it of itself (first person), a question, and a topic for a
suggestion. The templates put each form in a sentence:
- `restatement`: the assistant restates the user ("You mentioned you live in Paris.") and
  the user's fact is expected (`{category, polarity, about}`, as in extraction_set.jsonl);
- `assistant-self`: the assistant's own first person ("Sure! I live in Paris, and …"):
  no user fact;
- `question`, `suggestion`, `hypothetical`: "Do you live in Paris?", "You might like
  Paris.", "If you live in Paris, …": no user fact.
Every row has `speaker: "assistant"`. The rows are data for the bench; regenerating gives
the same file (a unit test checks it).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SET = Path(__file__).resolve().parent / "extraction_assistant_set.jsonl"


@dataclass(frozen=True)
class Slot:
    you: str  # the fact restated about the user, second person, lower-case start
    me: str  # the same fact as the assistant's own, first person
    question: str
    topic: str  # what a suggestion offers
    category: str
    about: str
    polarity: str = "positive"
    nounlike: bool = False  # Japanese: the clause needs な/だ before ので/と


# -- English -----------------------------------------------------------------------------------

EN_SLOTS = (
    Slot(
        "you live in Paris", "I live in Paris", "Do you live in Paris?", "a walk along the Seine", "location", "Paris"
    ),
    Slot("you're vegetarian", "I'm vegetarian", "Are you vegetarian?", "a lentil curry", "diet", "vegetarian"),
    Slot(
        "you're allergic to peanuts",
        "I'm allergic to peanuts",
        "Are you allergic to peanuts?",
        "almond butter",
        "diet",
        "peanuts",
    ),
    Slot("your name is Anna", "my name is Mia", "Is your name Anna?", "a new nickname", "name", "Anna"),
    Slot(
        "you prefer short answers",
        "I prefer short answers",
        "Do you prefer short answers?",
        "a shorter format",
        "preference",
        "short answers",
    ),
    Slot(
        "you love Italian food",
        "I love Italian food",
        "Do you love Italian food?",
        "a risotto",
        "preference",
        "Italian food",
    ),
    Slot(
        "you don't like horror movies",
        "I don't like horror movies",
        "Don't you like horror movies?",
        "a quiet comedy",
        "preference",
        "horror movies",
        "negative",
    ),
    Slot(
        "your wife is a doctor",
        "my wife is a doctor",
        "Is your wife a doctor?",
        "a gift for your wife",
        "family",
        "doctor",
    ),
    Slot("you have two kids", "I have two kids", "Do you have kids?", "a family board game", "family", "two kids"),
    Slot("you have a dog named Max", "I have a dog named Max", "Do you have a dog?", "a dog park nearby", "pet", "Max"),
    Slot(
        "you work as a nurse", "I work as a nurse", "Do you work as a nurse?", "a shift planner", "profession", "nurse"
    ),
    Slot(
        "you usually run in the morning",
        "I usually run in the morning",
        "Do you usually run in the morning?",
        "an evening yoga class",
        "pattern",
        "run in the morning",
    ),
    Slot("you speak Spanish", "I speak Spanish", "Do you speak Spanish?", "a Spanish podcast", "language", "Spanish"),
    Slot(
        "you moved to Berlin", "I moved to Berlin", "Did you move to Berlin?", "a guide to Berlin", "location", "Berlin"
    ),
)


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


EN_TEMPLATES: dict[str, tuple[str, ...]] = {
    "restatement": (
        "You mentioned {you}.",
        "You mentioned earlier that {you}, so I picked a few ideas for you.",
        "As you said, {you}.",
        "Since {you}, here are three ideas.",
        "You told me {you}, and I kept that in mind.",
        "{You}, as you mentioned.",
        "From what you've told me, {you}.",
        "I remember you saying {you}.",
        "You've said that {you}.",
        "Because {you}, I left a few options out.",
    ),
    "assistant-self": ("{Me}.", "Sure! {me}, and I'm happy to help.", "Fun fact about me: {me}."),
    "question": ("{question}", "You mentioned {you}, right?"),
    "suggestion": ("You might like {topic}.", "You should try {topic}."),
    "hypothetical": ("If {you}, I can suggest a few places.",),
}


# -- Japanese ----------------------------------------------------------------------------------

JA_SLOTS = (
    Slot(
        "パリにお住まい",
        "私はパリに住んでいます",
        "パリにお住まいですか？",
        "セーヌ川の散歩",
        "location",
        "パリ",
        nounlike=True,
    ),
    Slot(
        "ベジタリアンでいらっしゃる",
        "私はベジタリアンです",
        "ベジタリアンですか？",
        "レンズ豆のカレー",
        "diet",
        "ベジタリアン",
    ),
    Slot(
        "ピーナッツアレルギーをお持ち",
        "私はピーナッツアレルギーがあります",
        "ピーナッツアレルギーはありますか？",
        "アーモンドバター",
        "diet",
        "ピーナッツ",
        nounlike=True,
    ),
    Slot(
        "お名前はアンナさん",
        "私の名前はミアです",
        "お名前はアンナさんですか？",
        "新しいニックネーム",
        "name",
        "アンナ",
        nounlike=True,
    ),
    Slot(
        "コーヒーがお好き",
        "私はコーヒーが好きです",
        "コーヒーはお好きですか？",
        "カフェラテ",
        "preference",
        "コーヒー",
        nounlike=True,
    ),
    Slot(
        "ホラー映画がお嫌い",
        "私はホラー映画が嫌いです",
        "ホラー映画はお嫌いですか？",
        "コメディ映画",
        "preference",
        "ホラー映画",
        "negative",
        nounlike=True,
    ),
    Slot(
        "奥様は医者",
        "私の妻は医者です",
        "奥様はお医者さんですか？",
        "奥様へのプレゼント",
        "family",
        "医者",
        nounlike=True,
    ),
    Slot("犬を飼っていらっしゃる", "私は犬を飼っています", "犬を飼っていますか？", "近くのドッグラン", "pet", "犬"),
    Slot(
        "エンジニア",
        "私はエンジニアです",
        "エンジニアですか？",
        "新しいキーボード",
        "profession",
        "エンジニア",
        nounlike=True,
    ),
    Slot(
        "いつも朝に走っている",
        "私はいつも朝に走っています",
        "いつも朝に走っているんですか？",
        "夜のヨガ教室",
        "pattern",
        "朝に走って",
    ),
    Slot(
        "スペイン語を勉強していらっしゃる",
        "私はスペイン語を勉強しています",
        "スペイン語を勉強していますか？",
        "スペイン語のポッドキャスト",
        "language",
        "スペイン語",
    ),
    Slot(
        "ベルリンに引っ越された",
        "私はベルリンに引っ越しました",
        "ベルリンに引っ越したんですか？",
        "ベルリンのガイド",
        "location",
        "ベルリン",
    ),
)

JA_TEMPLATES: dict[str, tuple[str, ...]] = {
    "restatement": (
        "{you}{da}と伺いました。",
        "以前、{you}{da}とおっしゃっていましたね。",
        "{you}とのことですが、何かお手伝いできることはありますか？",
        "{you}{na}んですね。",
        "{you}{na}ので、いくつか選んでみました。",
        "{you}{da}と言っていましたね。",
    ),
    "assistant-self": ("{me}。", "実は{me}。", "そうですね、{me}。"),
    "question": ("{question}",),
    "suggestion": ("{topic}はいかがですか？", "{topic}を試してみてはどうでしょう。"),
    "hypothetical": ("もし{you}なら、いくつかご提案できます。",),
}


# -- Chinese -----------------------------------------------------------------------------------

ZH_SLOTS = (
    Slot("你住在巴黎", "我住在巴黎", "你住在巴黎吗？", "塞纳河边散步", "location", "巴黎"),
    Slot("你是素食者", "我是素食者", "你是素食者吗？", "扁豆咖喱", "diet", "素食者"),
    Slot("你对花生过敏", "我对花生过敏", "你对花生过敏吗？", "杏仁酱", "diet", "花生"),
    Slot("你叫安娜", "我叫小美", "你叫安娜吗？", "一个新昵称", "name", "安娜"),
    Slot("你喜欢咖啡", "我喜欢咖啡", "你喜欢咖啡吗？", "拿铁", "preference", "咖啡"),
    Slot(
        "你不喜欢恐怖片", "我不喜欢恐怖片", "你不喜欢恐怖片吗？", "一部轻松的喜剧", "preference", "恐怖片", "negative"
    ),
    Slot("你的妻子是医生", "我的妻子是医生", "你的妻子是医生吗？", "给妻子的礼物", "family", "医生"),
    Slot("你养了一只狗", "我养了一只狗", "你养狗吗？", "附近的狗公园", "pet", "狗"),
    Slot("你是护士", "我是护士", "你是护士吗？", "排班软件", "profession", "护士"),
    Slot("你通常早上跑步", "我通常早上跑步", "你通常早上跑步吗？", "晚上的瑜伽课", "pattern", "早上跑步"),
    Slot("你在学西班牙语", "我在学西班牙语", "你在学西班牙语吗？", "西班牙语播客", "language", "西班牙语"),
    Slot("你搬到了柏林", "我搬到了柏林", "你搬到柏林了吗？", "柏林指南", "location", "柏林"),
)

ZH_TEMPLATES: dict[str, tuple[str, ...]] = {
    "restatement": (
        "你说过{you}。",
        "你之前提到{you}，所以我挑了几个建议。",
        "既然{you}，我推荐这个。",
        "你告诉过我{you}。",
        "正如你说的，{you}。",
        "我记得{you}。",
    ),
    "assistant-self": ("{me}。", "其实{me}。", "好的！{me}，很高兴帮你。"),
    "question": ("{question}", "你说过{you}吗？"),
    "suggestion": ("你可能会喜欢{topic}。", "你应该试试{topic}。"),
    "hypothetical": ("如果{you}，我可以给你一些建议。",),
}


# -- Russian -----------------------------------------------------------------------------------

RU_SLOTS = (
    Slot(
        "вы живёте в Париже",
        "я живу в Париже",
        "Вы живёте в Париже?",
        "прогулку по набережной Сены",
        "location",
        "Париже",
    ),
    Slot("вы вегетарианец", "я вегетарианец", "Вы вегетарианец?", "чечевичное карри", "diet", "вегетарианец"),
    Slot(
        "у вас аллергия на арахис",
        "у меня аллергия на арахис",
        "У вас аллергия на арахис?",
        "миндальную пасту",
        "diet",
        "арахис",
    ),
    Slot("вас зовут Анна", "меня зовут Мия", "Вас зовут Анна?", "новое прозвище", "name", "Анна"),
    Slot("вы любите кофе", "я люблю кофе", "Вы любите кофе?", "латте", "preference", "кофе"),
    Slot(
        "вы не любите фильмы ужасов",
        "я не люблю фильмы ужасов",
        "Вы не любите фильмы ужасов?",
        "лёгкую комедию",
        "preference",
        "фильмы ужасов",
        "negative",
    ),
    Slot("ваша жена врач", "моя жена врач", "Ваша жена врач?", "подарок для жены", "family", "врач"),
    Slot("у вас есть собака", "у меня есть собака", "У вас есть собака?", "собачью площадку рядом", "pet", "собака"),
    Slot(
        "вы работаете медсестрой",
        "я работаю медсестрой",
        "Вы работаете медсестрой?",
        "планировщик смен",
        "profession",
        "медсестрой",
    ),
    Slot(
        "вы обычно бегаете по утрам",
        "я обычно бегаю по утрам",
        "Вы обычно бегаете по утрам?",
        "вечернюю йогу",
        "pattern",
        "по утрам",
    ),
    Slot(
        "вы изучаете испанский",
        "я изучаю испанский",
        "Вы изучаете испанский?",
        "испанский подкаст",
        "language",
        "испанский",
    ),
    Slot(
        "вы переехали в Берлин",
        "я переехал в Берлин",
        "Вы переехали в Берлин?",
        "путеводитель по Берлину",
        "location",
        "Берлин",
    ),
)

RU_TEMPLATES: dict[str, tuple[str, ...]] = {
    "restatement": (
        "Вы упоминали, что {you}.",
        "Как вы говорили, {you}.",
        "Раз {you}, вот несколько идей.",
        "Вы говорили мне, что {you}, поэтому я это учёл.",
        "{You}, как вы упоминали.",
        "Помню, что {you}.",
        "По вашим словам, {you}.",
    ),
    "assistant-self": ("{Me}.", "Кстати, {me}.", "Конечно! {Me}, и я рад помочь."),
    "question": ("{question}", "Вы говорили, что {you}?"),
    "suggestion": ("Вам может понравиться {topic}.", "Попробуйте {topic}."),
    "hypothetical": ("Если {you}, я могу кое-что предложить.",),
}

LANGUAGES: dict[str, tuple[tuple[Slot, ...], dict[str, tuple[str, ...]]]] = {
    "en": (EN_SLOTS, EN_TEMPLATES),
    "ja": (JA_SLOTS, JA_TEMPLATES),
    "zh": (ZH_SLOTS, ZH_TEMPLATES),
    "ru": (RU_SLOTS, RU_TEMPLATES),
}


def _fill(template: str, slot: Slot) -> str:
    return template.format(
        you=slot.you,
        You=_cap(slot.you),
        me=slot.me,
        Me=_cap(slot.me),
        question=slot.question,
        topic=slot.topic,
        da="だ" if slot.nounlike else "",
        na="な" if slot.nounlike else "",
    )


def rows() -> Iterator[dict[str, Any]]:
    """Every template × slot, language by language, in a fixed order."""
    for lang, (slots, templates) in LANGUAGES.items():
        n = 0
        for kind, kind_templates in templates.items():
            for template in kind_templates:
                for slot in slots:
                    n += 1
                    facts = (
                        [{"category": slot.category, "polarity": slot.polarity, "about": slot.about}]
                        if kind == "restatement"
                        else []
                    )
                    yield {
                        "id": f"asst-{lang}-{n:03d}",
                        "lang": lang,
                        "speaker": "assistant",
                        "kind": kind,
                        "text": _fill(template, slot),
                        "facts": facts,
                    }


def render() -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows())


def main() -> int:
    SET.write_text(render(), encoding="utf-8")
    print(f"wrote {sum(1 for _ in rows())} rows to {SET}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
