"""The labeled retrieval-quality set: facts of three owners, each with a keyword query
(shares distinctive words with the fact) and a paraphrased query (says the same thing in
other words), among distractors (generated facts about other topics, bench/facts.py).

Topics of the labeled facts (health, family, home, work details, hobbies, plans) do not
occur in the generator's vocabularies, so a distractor is never a right answer.
"""

from __future__ import annotations

# (owner, content, keyword query, paraphrased query)
LABELED: list[tuple[str, str, str, str]] = [
    ("q-alice", "I am allergic to peanuts and cashews", "peanuts allergy", "Which nuts make me sick?"),
    (
        "q-alice",
        "My daughter Mia was born on March 14",
        "Mia birthday March",
        "When does my kid celebrate turning a year older?",
    ),
    (
        "q-alice",
        "I live in a small apartment with a balcony garden",
        "balcony garden apartment",
        "Describe the place where I reside",
    ),
    (
        "q-alice",
        "I work night shifts at the hospital as a nurse",
        "nurse night shifts hospital",
        "What is my job and when do I do it?",
    ),
    (
        "q-alice",
        "I'm training for the Berlin marathon in September",
        "Berlin marathon training",
        "Which long-distance race am I preparing for?",
    ),
    (
        "q-alice",
        "My cat is called Pixel and she is twelve years old",
        "cat Pixel",
        "What's the name of my feline companion?",
    ),
    (
        "q-alice",
        "I prefer replies in Portuguese when I write in Portuguese",
        "Portuguese replies",
        "Which language should you answer me in?",
    ),
    (
        "q-alice",
        "I am saving money to buy an electric car next year",
        "electric car saving",
        "What big purchase am I budgeting for?",
    ),
    ("q-alice", "I have a phobia of spiders", "spiders phobia", "What creepy crawlies terrify me?"),
    (
        "q-alice",
        "I play the cello in a community orchestra",
        "cello orchestra",
        "Which string instrument do I perform with?",
    ),
    (
        "q-alice",
        "I'm lactose intolerant, so no dairy in recipes please",
        "lactose dairy recipes",
        "Are there foods I should not be served?",
    ),
    (
        "q-alice",
        "My mother's surgery is scheduled for next Tuesday",
        "mother surgery Tuesday",
        "What medical event is coming up in my family?",
    ),
    (
        "q-bob",
        "I am learning Japanese and practice kanji every evening",
        "Japanese kanji practice",
        "What foreign tongue am I studying?",
    ),
    ("q-bob", "I drive a 2015 Subaru Outback", "Subaru Outback", "What vehicle do I own?"),
    (
        "q-bob",
        "My wife is a veterinarian at the city animal clinic",
        "wife veterinarian clinic",
        "What does my spouse do for a living?",
    ),
    (
        "q-bob",
        "I renovated my kitchen last spring with oak cabinets",
        "kitchen renovation oak cabinets",
        "Which room of my home did I remodel?",
    ),
    (
        "q-bob",
        "I collect vintage mechanical watches",
        "vintage mechanical watches collection",
        "What kind of items do I like to hoard as a hobby?",
    ),
    (
        "q-bob",
        "I have type 2 diabetes and track my blood sugar",
        "diabetes blood sugar",
        "Which chronic condition do I manage?",
    ),
    (
        "q-bob",
        "I am afraid of flying and take the train whenever possible",
        "afraid flying",
        "Why do I avoid airplanes?",
    ),
    ("q-bob", "Our team standup is at 9:30 every weekday", "standup 9:30", "When is my daily work meeting?"),
    (
        "q-bob",
        "I volunteer at the food bank on Saturday mornings",
        "volunteer food bank",
        "How do I help my community on weekends?",
    ),
    ("q-bob", "My son plays goalkeeper in the under-12 team", "son goalkeeper", "What position does my boy play?"),
    (
        "q-bob",
        "I wear glasses for reading and prefer large print",
        "glasses reading large print",
        "Do I have trouble seeing small text?",
    ),
    (
        "q-bob",
        "I am planning to propose to my girlfriend in Paris",
        "propose girlfriend Paris",
        "Where do I want to ask my partner to marry me?",
    ),
    ("q-chen", "I grew up on a rice farm in Yunnan province", "rice farm Yunnan", "Where was my childhood spent?"),
    ("q-chen", "I have two older sisters and no brothers", "two older sisters", "How many siblings do I have?"),
    (
        "q-chen",
        "I need my invoices in euros because my company is in Ireland",
        "invoices euros Ireland",
        "Which currency should billing use?",
    ),
    (
        "q-chen",
        "I suffer from migraines when I look at screens too long",
        "migraines screens",
        "What health issue do monitors trigger for me?",
    ),
    ("q-chen", "I am a vegan for ethical reasons", "vegan ethical", "Do I eat animal products?"),
    (
        "q-chen",
        "My favourite author is Ursula K. Le Guin",
        "favourite author Le Guin",
        "Which writer's books do I love most?",
    ),
    ("q-chen", "I bike to the office every day, about 12 km", "bike office 12 km", "How do I commute to work?"),
    (
        "q-chen",
        "I'm moving to Vancouver in August for a new job",
        "moving Vancouver August",
        "Which city am I relocating to?",
    ),
    ("q-chen", "我对猫毛过敏", "猫毛过敏", "我对什么动物的毛发有反应？"),
    ("q-chen", "私は毎朝ジョギングをします", "毎朝ジョギング", "朝の運動習慣は何ですか"),
    ("q-chen", "My blood type is O negative", "blood type O negative", "Which group is my blood?"),
    ("q-chen", "I meditate for twenty minutes before bed", "meditate before bed", "What do I do to relax at night?"),
]

OWNERS = sorted({o for o, *_ in LABELED})
DISTRACTORS_PER_OWNER = 150
