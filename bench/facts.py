"""Realistic, varied facts about users (preferences, decisions, habits), generated from
templates × vocabularies, deterministic per owner; and realistic chat queries about them.

About 3 % of facts are in German, Spanish, Japanese, Chinese or Russian, so both keyword
indexes (porter/unicode61 and the CJK trigram one) carry real load.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

TOPICS: dict[str, list[str]] = {
    "editor": ["vim", "neovim", "VS Code", "Emacs", "IntelliJ IDEA", "Sublime Text", "Helix", "Zed", "PyCharm", "nano"],
    "language": [
        "Python",
        "Rust",
        "Go",
        "TypeScript",
        "Kotlin",
        "Elixir",
        "Haskell",
        "C++",
        "Java",
        "Ruby",
        "Swift",
        "Scala",
        "Zig",
        "OCaml",
        "Clojure",
        "PHP",
        "Lua",
        "Julia",
    ],
    "database": [
        "PostgreSQL",
        "SQLite",
        "MySQL",
        "MongoDB",
        "Redis",
        "DynamoDB",
        "ClickHouse",
        "Cassandra",
        "CockroachDB",
        "DuckDB",
        "Elasticsearch",
        "Neo4j",
    ],
    "drink": [
        "green tea",
        "espresso",
        "oat milk lattes",
        "sparkling water",
        "matcha",
        "cold brew coffee",
        "chamomile tea",
        "hot chocolate",
        "kombucha",
        "black coffee",
    ],
    "food": [
        "sushi",
        "ramen",
        "vegetarian curry",
        "spicy Thai food",
        "dark chocolate",
        "sourdough bread",
        "Neapolitan pizza",
        "tacos al pastor",
        "Greek salad",
        "dumplings",
        "pho",
        "falafel wraps",
    ],
    "music": [
        "jazz",
        "lo-fi beats",
        "classical piano",
        "synthwave",
        "indie folk",
        "techno",
        "bossa nova",
        "film soundtracks",
        "podcasts about history",
        "audiobooks",
    ],
    "tool": [
        "Docker",
        "Kubernetes",
        "Terraform",
        "GitHub Actions",
        "tmux",
        "zsh",
        "fish shell",
        "Ansible",
        "Nix",
        "Bazel",
        "Poetry",
        "uv",
        "pnpm",
        "Make",
    ],
    "style": [
        "concise answers",
        "bullet points",
        "detailed explanations",
        "code examples first",
        "a formal tone",
        "a casual tone",
        "step-by-step instructions",
        "short summaries",
        "tables",
    ],
    "ui": [
        "dark mode",
        "a light theme",
        "large fonts",
        "high contrast colors",
        "a minimal layout",
        "keyboard shortcuts",
        "a vertical tab bar",
        "monospace fonts",
    ],
    "travel": [
        "window seats",
        "night trains",
        "small hostels",
        "beach holidays",
        "hiking trips",
        "city breaks",
        "aisle seats",
        "road trips",
        "direct flights",
    ],
    "sport": ["running", "cycling", "yoga", "swimming", "bouldering", "tennis", "weightlifting", "football"],
    "pet": ["cats", "dogs", "parrots", "rabbits", "aquarium fish"],
}

CONTEXTS: dict[str, list[str]] = {
    "editor": ["for writing code", "at work", "for quick edits", "on my laptop", "for {project}", "over SSH"],
    "language": [
        "for backend services",
        "for {project}",
        "for data analysis",
        "for scripting",
        "for the CLI tools",
        "in side projects",
        "for the new microservice",
    ],
    "database": [
        "for {project}",
        "for the billing service",
        "for analytics",
        "for caching",
        "for the mobile app",
        "in production",
        "for local development",
    ],
    "drink": ["in the morning", "after lunch", "while coding", "on weekends", "before meetings", "in the evening"],
    "food": ["for dinner", "on Fridays", "when I travel", "for lunch at work", "with friends", "in {city}"],
    "music": ["while working", "when I run", "on long drives", "to fall asleep", "while cooking"],
    "tool": ["for {project}", "for deployments", "in CI", "on every machine", "for local builds"],
    "style": ["in code reviews", "when explaining concepts", "in emails", "for documentation", "in chat"],
    "ui": ["in my editor", "in the terminal", "on my phone", "in every app", "at night"],
    "travel": ["on long flights", "in Europe", "with my family", "in summer", "to {city}"],
    "sport": ["three times a week", "before work", "on Sunday mornings", "with my colleagues", "in {city}"],
    "pet": ["at home", "since childhood", "more than anything"],
}

PROJECTS = [
    "Atlas",
    "Borealis",
    "Cobalt",
    "Delta",
    "Ember",
    "Falcon",
    "Granite",
    "Harbor",
    "Iris",
    "Juniper",
    "Kestrel",
    "Lumen",
    "Mosaic",
    "Nimbus",
    "Orion",
    "Pioneer",
    "Quartz",
    "Raven",
    "Sierra",
    "Tundra",
    "Umbra",
    "Vertex",
    "Willow",
    "Xenon",
    "Yukon",
    "Zephyr",
    "the payments platform",
    "the data pipeline",
    "the internal wiki",
    "the mobile app",
    "the marketing site",
    "the recommendation engine",
]
CITIES = [
    "Berlin",
    "Lisbon",
    "Tokyo",
    "Kyoto",
    "Seoul",
    "Montreal",
    "Oslo",
    "Prague",
    "Vienna",
    "Barcelona",
    "Buenos Aires",
    "Cape Town",
    "Hanoi",
    "Istanbul",
    "Edinburgh",
    "Melbourne",
    "Reykjavik",
    "Porto",
]
PEOPLE = [
    "my sister Anna",
    "my brother Tom",
    "my manager",
    "my partner",
    "my team",
    "my daughter",
    "my son",
    "my parents",
    "our designer",
    "the new intern",
]

PREFERENCE = [
    "I prefer {item} {ctx}",
    "I really like {item} {ctx}",
    "My favorite is {item} {ctx}",
    "I love {item} {ctx}",
    "I enjoy {item} {ctx}",
    "I don't like {item} {ctx}",
    "I hate {item} {ctx}",
    "Prefers {item} {ctx}",
    "User likes {item} {ctx}",
    "Avoid suggesting {item} {ctx}",
    "{person} and I both like {item} {ctx}",
    "I always choose {item} {ctx}",
]
DECISION = [
    "I decided to use {item} {ctx}",
    "I'll use {item} {ctx}",
    "We chose {item} {ctx}",
    "I went with {item} {ctx}",
    "I'm going to adopt {item} {ctx}",
    "Decided to migrate to {item} {ctx}",
    "We switched from {other} to {item} {ctx}",
    "I picked {item} over {other} {ctx}",
]
HABIT = [
    "I usually have {item} {ctx}",
    "I always use {item} {ctx}",
    "I never use {other} {ctx}",
    "I typically go for {item} {ctx}",
    "I tend to pick {item} {ctx}",
    "I often do {item} {ctx}",
    "Every week I spend time on {item} {ctx}",
    "I regularly recommend {item} to {person}",
]
CATEGORIES = {"preference": ("factual", PREFERENCE), "decision": ("episodic", DECISION), "pattern": ("factual", HABIT)}

FOREIGN = [
    ("de", "Ich bevorzuge {item} {ctx_de}", ["bei der Arbeit", "am Wochenende", "für {project}", "zu Hause"]),
    ("es", "Prefiero {item} {ctx_es}", ["en el trabajo", "los fines de semana", "para {project}", "en casa"]),
    ("ja", "私は{item}が好きです{ctx_ja}", ["。仕事中によく使います", "。週末に楽しみます", "。毎朝飲みます", ""]),
    ("zh", "我喜欢{item}{ctx_zh}", ["，尤其是在工作的时候", "，周末经常用", "，每天早上都喝", ""]),
    ("ru", "Я предпочитаю {item} {ctx_ru}", ["на работе", "по выходным", "для проекта {project}", "дома"]),
]
FOREIGN_SHARE = 0.03

_SLUG = re.compile(r"[^0-9a-z\u00c0-\uffff]+")


def slug(text: str) -> str:
    return _SLUG.sub("_", text.lower())[:40].strip("_")


@dataclass(frozen=True)
class Fact:
    key: str
    content: str
    type: str
    topic: str
    item: str


def _fill(rng: random.Random, template: str, topic: str) -> tuple[str, str]:
    items = TOPICS[topic]
    n = len(items)
    pick = int(rng.random() * n)
    item = items[pick]
    other = items[(pick + 1 + int(rng.random() * (n - 1))) % n]
    ctx = rng.choice(CONTEXTS[topic]).format(project=rng.choice(PROJECTS), city=rng.choice(CITIES))
    text = template.format(item=item, other=other, ctx=ctx, person=rng.choice(PEOPLE))
    return text[0].upper() + text[1:], item


def owner_facts(owner: str, count: int, seed: int = 0) -> list[Fact]:
    """`count` facts of one owner, the same for the same (owner, count, seed): unique keys,
    varied content (templates × topics × items × contexts × projects/cities/people)."""
    rng = random.Random(f"{seed}:{owner}")
    topics = list(TOPICS)
    out: list[Fact] = []
    seen: set[str] = set()
    for i in range(count):
        topic = rng.choice(topics)
        if rng.random() < FOREIGN_SHARE:
            lang, template, ctxs = rng.choice(FOREIGN)
            item = rng.choice(TOPICS[topic])
            ctx = rng.choice(ctxs).format(project=rng.choice(PROJECTS))
            content = template.format(item=item, ctx_de=ctx, ctx_es=ctx, ctx_ja=ctx, ctx_zh=ctx, ctx_ru=ctx)
            category, mtype = "preference", "factual"
        else:
            category = rng.choice(list(CATEGORIES))
            mtype, templates = CATEGORIES[category]
            content, item = _fill(rng, rng.choice(templates), topic)
        key = f"{category}:{slug(content)}"
        if key in seen:
            key = f"{key}_{i}"
        seen.add(key)
        out.append(Fact(key, content, mtype, topic, item))
    return out


QUERY_TEMPLATES = [
    "Which {topic_word} do I like?",
    "What {topic_word} did I choose for {project}?",
    "Can you recommend something similar to {item}?",
    "Remind me what I said about {item}",
    "help me set up {item} {ctx}",
    "what do I usually prefer {ctx}?",
    "Is {item} a good fit for me?",
    "Write a short plan for {project} using my usual tools",
    "I'm planning a trip to {city}, any suggestions?",
    "What should I drink {ctx}?",
]
TOPIC_WORDS = {
    "editor": "editor",
    "language": "programming language",
    "database": "database",
    "drink": "drink",
    "food": "food",
    "music": "music",
    "tool": "tool",
    "style": "answer style",
    "ui": "theme",
    "travel": "way to travel",
    "sport": "sport",
    "pet": "pet",
}


def queries(count: int, seed: int = 7) -> list[str]:
    """Realistic last-user-messages of chat requests (what Inject and Retrieve get)."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        topic = rng.choice(list(TOPICS))
        ctx = rng.choice(CONTEXTS[topic]).format(project=rng.choice(PROJECTS), city=rng.choice(CITIES))
        out.append(
            rng.choice(QUERY_TEMPLATES).format(
                topic_word=TOPIC_WORDS[topic],
                project=rng.choice(PROJECTS),
                item=rng.choice(TOPICS[topic]),
                ctx=ctx,
                city=rng.choice(CITIES),
            )
        )
    return out
