"""Small data files the tests write themselves, laid out like the public data sets the
built-in suites read (GSM8K's ``test.jsonl``, E2E's ``testset_w_refs.csv``), so a fresh clone
with no copy of those still exercises the suites' logic and the checkers. The problems and
sentences are written for these tests, in the data sets' style; none is copied from them."""

from __future__ import annotations

import csv
import io
import json

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
