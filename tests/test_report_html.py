"""report.html (spec: "report.html") and "label next": the page from report.json and
pairs.jsonl, its escaping, its verdict banner, and the order of pairs to label."""

from __future__ import annotations

import hashlib
import json
import re
from html import escape as html_escape
from html import unescape as html_unescape
from html.parser import HTMLParser
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_evalmine.engine.stored import compare_run_folders
from pytest_evalmine.judging.binary import BinaryJudging
from pytest_evalmine.reports.html_banner import links_nav
from pytest_evalmine.reports.html_data import script_json
from pytest_evalmine.reports.html_page import render_html, render_run_dir
from pytest_evalmine.reports.labelling import (
    CHECK,
    DISAGREES,
    FEW_LABELS,
    FLIP,
    a_side,
    label_fields,
    label_next,
    pair_id,
)
from pytest_evalmine.reports.suite_index import suite_index_html
from pytest_evalmine.suite.loader import CriterionLabel

from .conftest import latest_report
from .test_judge_run import JUDGED_SUITE, JUDGES_CONFTEST

HOSTILE = '</script><script>alert("x")</script><b onmouseover="x()">&amp; bold</b>'
IN_YAML = "</script><script>alert(1)</script><b onmouseover='x()'>&amp; bold</b>"
DATA_SCRIPT = re.compile(
    r'<script type="application/json" id="evalmine-data">(.*?)</script>', re.DOTALL
)


def win_rate(candidate: str, eligible: bool, task: str | None = None) -> dict[str, Any]:
    return {
        "candidate": candidate,
        "task": task,
        "n": 4,
        "win_rate": 0.625,
        "interval": {"low": 0.25, "high": 0.875},
        "headline_eligible": eligible,
        "flag": None if eligible else "UNCALIBRATED",
        "ineligible_reasons": [] if eligible else ["below_floor: kappa 0.10 is below 0.40"],
    }


def report_doc(eligible: bool, candidate: str = "fake/beta") -> dict[str, Any]:
    return {
        "run_id": "20261130T000000.000Z-aaaaaaaa-bbbbbbbb",
        "suite": {"name": "small", "file": "small.eval.yaml", "hash": "ab" * 32},
        "models": ["fake/alpha", candidate],
        "scorecard": [{"model": "fake/alpha", "baseline": True, "passed": 2, "items": 2}],
        "cost": {"spent_usd": 0.01},
        "headline": {
            "judge": {"model": "fake/judge"},
            "headline_eligible": eligible,
            "calibration": {
                "status": "ok" if eligible else "below_floor",
                "reason": "why",
                "kappa": 0.7 if eligible else 0.1,
                "n": 12,
                "min_labels": 2,
                "confusion": {"matrix": [[3, 1, 0], [0, 2, 0], [1, 0, 5]]},
            },
            "win_rates": [win_rate(candidate, eligible)],
            "win_rates_per_task": [win_rate(candidate, eligible, "triage")],
        },
    }


def pair_doc(case: str = "c1", **overrides: Any) -> dict[str, Any]:
    pair = {
        "task": "triage",
        "case": case,
        "baseline": "fake/alpha",
        "candidate": "fake/beta",
        "excluded": None,
        "category": "candidate",
        "outcome": "win",
        "flip": False,
        "label": None,
        "prompt": "Classify this",
        "baseline_text": "base answer",
        "candidate_text": "cand answer",
        "baseline_checks": [{"name": "answer", "passed": True, "message": ""}],
        "candidate_checks": [{"name": "answer", "passed": True, "message": ""}],
        "passes": [
            {"order": "baseline_first", "winner_slot": "2", "reason": "r1"},
            {"order": "candidate_first", "winner_slot": "1", "reason": "r2"},
        ],
    }
    pair.update(overrides)
    return pair


def answer_doc(
    case: str = "c1",
    model: str = "fake/alpha",
    text: str = "base answer",
    *,
    task: str = "triage",
    passed: bool = True,
    score: float = 1.0,
    **overrides: Any,
) -> dict[str, Any]:
    """An answers.jsonl row with the fields the cases view reads."""
    answer = {
        "task": task,
        "case": case,
        "model": model,
        "repeat": 0,
        "outcome": "passed" if passed else "failed",
        "text": text,
        "checks": [
            {"name": "contains", "passed": passed, "message": "" if passed else "no 'refund'"}
        ],
        "score": score,
        "cost_usd": 0.0012,
        "latency_s": 0.25,
    }
    answer.update(overrides)
    return answer


def run_docs(cases: int, *, tasks: int = 3) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``cases`` judged pairs and their 2 x ``cases`` answers: every fourth candidate answer
    fails its check, every seventh pair flips, scores fall with the case number."""
    pairs, answers = [], []
    for i in range(cases):
        task, case = f"task-{i % tasks}", f"case-{i:05d}"
        base = f"Answer {i}: the parcel left on Monday and arrives in two days."
        cand = f"Answer {i}: the parcel left on Tuesday and arrives in two days, sorry."
        pairs.append(
            pair_doc(
                case,
                task=task,
                prompt=f"Prompt {i}: where is my parcel?",
                baseline_text=base,
                candidate_text=cand,
                flip=i % 7 == 0,
                outcome="flip" if i % 7 == 0 else "win",
            )
        )
        answers.append(answer_doc(case, "fake/alpha", base, task=task, score=1 - i / cases))
        answers.append(
            answer_doc(case, "fake/beta", cand, task=task, passed=i % 4 != 0, score=i / cases)
        )
        pairs[-1]["baseline_checks"] = answers[-2]["checks"]  # as the run copies them
        pairs[-1]["candidate_checks"] = answers[-1]["checks"]
    return pairs, answers


def embedded_data(page: str) -> dict[str, Any]:
    match = DATA_SCRIPT.search(page)
    assert match is not None
    return json.loads(match.group(1))


class TextCollector(HTMLParser):
    """The page as a browser's parser sees it: visible text, and script bodies apart."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.scripts = 0
        self.tags: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag == "script":
            self.scripts += 1
            self._in_script = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if not self._in_script:
            self.text.append(data)


def test_every_user_string_is_escaped_in_markup_and_in_the_embedded_data() -> None:
    report = report_doc(False, candidate=f"fake/{HOSTILE}")
    report["suite"]["file"] = HOSTILE
    report["judge_note"] = HOSTILE
    pair = pair_doc(
        candidate=f"fake/{HOSTILE}",
        prompt=HOSTILE,
        baseline_text=HOSTILE,
        candidate_text="line one\u2028" + HOSTILE,
        candidate_checks=[{"name": "schema", "passed": False, "message": HOSTILE}],
    )
    pair["passes"][0]["reason"] = HOSTILE
    page = render_html(report, [pair])
    assert HOSTILE not in page
    assert "<b onmouseover" not in page
    parser = TextCollector()
    parser.feed(page)
    assert parser.scripts == 2  # the JSON data and the page script: nothing injected
    assert "b" not in parser.tags
    assert HOSTILE in "".join(parser.text)  # shown as text, escaped in the markup
    data = embedded_data(page)
    entry = data["pairs"][0]
    texts = {entry["A"]["text"], entry["B"]["text"]}
    assert texts == {HOSTILE, "line one\u2028" + HOSTILE}
    assert data["case_list"][entry["case_row"]]["prompt"] == HOSTILE  # named, not copied
    assert entry["judge"]["passes"][0]["reason"] == HOSTILE


def test_script_json_cannot_close_its_element() -> None:
    text = script_json({"a": "</script><!-- & \u2028"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"a": "</script><!-- & \u2028"}


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=300, derandomize=True, database=None, deadline=None)
@given(JSON_VALUES)
def test_script_json_in_pieces_is_the_whole_escaped_document(value: Any) -> None:
    whole = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    for raw in ("<", ">", "&", "\u2028", "\u2029"):
        whole = whole.replace(raw, f"\\u{ord(raw):04x}")
    assert script_json(value) == whole
    assert json.loads(script_json(value)) == value


@pytest.mark.parametrize(
    ("report", "css_class", "word"),
    [
        (report_doc(True), "verdict-ok", "ELIGIBLE"),
        (report_doc(False), "verdict-uncalibrated", "UNCALIBRATED"),
        ({"run_id": "r", "judge_note": "no judge configured"}, "verdict-none", "NO HEADLINE"),
    ],
)
def test_the_verdict_banner_comes_first(report: dict[str, Any], css_class: str, word: str) -> None:
    page = render_html(report, [])
    body = page.split("<body>", 1)[1]
    assert body.lstrip().startswith(f'<header id="verdict" class="verdict {css_class}">')
    banner = body.split("</header>", 1)[0]
    assert word in banner
    if word == "UNCALIBRATED":
        assert "below_floor: kappa 0.10 is below 0.40" in banner
        assert "62.5% [25.0%, 87.5%], n=4 \u2020 UNCALIBRATED" in banner


def test_the_page_is_self_contained() -> None:
    page = render_html(report_doc(False), [pair_doc()])
    assert "default-src 'none'" in page  # the browser refuses any network request
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)
    assert "<link" not in page and "@import" not in page


def test_charts_are_svg_written_by_the_code() -> None:
    page = render_html(report_doc(False), [])
    heatmap = page.split('id="confusion-heatmap"', 1)[1].split("</svg>", 1)[0]
    cells = re.findall(r'<text [^>]*style="fill:[^"]*;font-size:15px">(\d+)</text>', heatmap)
    assert [int(c) for c in cells] == [3, 1, 0, 0, 2, 0, 1, 0, 5]
    assert page.count('class="win-rates"') == 2  # overall and per task
    # The dot sits at 62.5 % of the 320-unit plot, whose viewBox stretches to its cell; the
    # interval bar from 25 % to 87.5 %.
    assert page.count('class="wr-dot" x1="200.0"') == 2
    assert page.count('x1="80.0" y1="13.0" x2="280.0"') == 2
    assert 'viewBox="0 0 320 26" preserveAspectRatio="none"' in page
    # The heatmap scales too (a viewBox, no fixed width); each row links to its cases.
    assert re.search(r'<svg [^>]*viewBox="0 0 428 182"[^>]*id="confusion-heatmap"', page)
    assert '<a class="wr-name" href="#cases?task=triage&amp;model=fake%2Fbeta">' in page
    # and so do the calibration's per-task rows and the scorecard's models
    report = report_doc(False)
    report["headline"]["calibration"]["per_task"] = [{"task": "triage", "n": 5, "kappa": 0.5}]
    assert '<td><a href="#cases?task=triage">triage</a></td>' in render_html(report, [])
    assert '<td><a href="#cases?model=fake%2Falpha">fake/alpha (baseline)</a></td>' in page


def test_old_or_partial_reports_render_without_failing() -> None:
    for report in ({}, {"headline": {}}, {"headline": {"calibration": {}, "win_rates": [{}]}}):
        assert "<header" in render_html(report, [])


def test_a_b_sides_come_from_a_hash_of_the_pair() -> None:
    pairs = [pair_doc(case=f"c{i}") for i in range(200)]
    sides = [a_side(pair_id(p)) for p in pairs]
    assert sides == [a_side(pair_id(dict(p))) for p in pairs]  # stable
    assert 70 < sides.count("baseline") < 130  # not always the same side
    assert len({pair_id(p) for p in pairs}) == 200
    # By hand: sha256 of the canonical JSON list, 16 hex digits, even -> baseline is A.
    text = '["triage","c0","fake/alpha","fake/beta"]'
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    assert pair_id(pairs[0]) == digest
    assert sides[0] == ("baseline" if int(digest[-1], 16) % 2 == 0 else "candidate")


def test_the_embedded_mapping_and_fields_give_the_label_yaml() -> None:
    pair = pair_doc(case='quote"d: case')
    entry = embedded_data(render_html(report_doc(False), [pair]))["pairs"][0]
    side = a_side(pair_id(pair))
    assert entry["prefer"] == {"A": side, "B": "candidate" if side == "baseline" else "baseline"}
    assert entry["A"]["text"] == pair[f"{side}_text"]
    line = "  - {" + label_fields(pair) + f", prefer: {entry['prefer']['B']}" + "}"
    assert entry["fields"] == label_fields(pair)
    assert yaml.safe_load(line) == [
        {
            "task": "triage",
            "case": 'quote"d: case',
            "baseline": "fake/alpha",
            "candidate": "fake/beta",
            "prefer": entry["prefer"]["B"],
        }
    ]
    # The judge preferred the candidate in both orders: translated to A/B.
    assert entry["judge"]["choice"] == ("A" if side == "candidate" else "B")
    assert {p["winner"] for p in entry["judge"]["passes"]} == {entry["judge"]["choice"]}


def test_label_next_orders_flips_contradictions_short_tasks_then_disagreements() -> None:
    failed = [{"name": "contains", "passed": False, "message": "no 'refund'"}]
    pairs = [
        pair_doc("labelled-agrees", label="candidate"),
        pair_doc("short-1"),
        pair_doc("disagrees", label="baseline"),
        pair_doc("contradiction", candidate_checks=failed),
        pair_doc("flip", flip=True, category="tie", outcome="flip"),
        pair_doc("excluded", excluded="parse_fail", category=None),
        pair_doc("other-task", task="polite"),
        pair_doc("short-2"),
    ]
    order = label_next(pairs, min_labels=3)
    assert [(s.task, s.case) for s in order] == [
        ("triage", "flip"),
        ("triage", "contradiction"),
        ("polite", "other-task"),  # no labels: its first pair before triage's next ones
        ("triage", "short-1"),
        ("triage", "short-2"),
        ("triage", "disagrees"),
    ]
    assert order[0].kinds == (FLIP, FEW_LABELS)
    assert order[1].kinds == (CHECK, FEW_LABELS)
    assert "failed check 'contains'" in order[1].reasons[0]
    assert order[-1].kinds == (DISAGREES,)
    assert label_next(pairs, min_labels=2)[2].case == "other-task"
    assert [s.case for s in label_next(pairs, min_labels=1)] == [
        "flip",
        "contradiction",
        "other-task",
        "disagrees",
    ]


# end to end --------------------------------------------------------------------------------
@pytest.fixture
def judged_run(pytester: pytest.Pytester) -> Path:
    pytester.makefile(".eval.yaml", judged=JUDGED_SUITE.replace("min_labels: 3", "min_labels: 2"))
    pytester.makeconftest(JUDGES_CONFTEST)
    result = pytester.runpytest("--evalmine-fake")
    assert result.ret == 0
    return pytester.path


def test_every_run_writes_report_html_that_rerenders_from_its_files(judged_run: Path) -> None:
    run_dir = next((judged_run / "reports" / "small").glob("*/report.html")).parent
    page = (run_dir / "report.html").read_text("utf-8")
    assert page == render_run_dir(run_dir)
    assert '<header id="verdict" class="verdict verdict-ok">' in page
    pairs = [json.loads(line) for line in (run_dir / "pairs.jsonl").read_text().splitlines()]
    answers = {
        (a["task"], a["case"], a["model"]): a
        for a in map(json.loads, (run_dir / "answers.jsonl").read_text().splitlines())
    }
    for pair in pairs:
        assert pair["prompt"].startswith(("Classify: ", "Rewrite politely: "))
        base = answers[(pair["task"], pair["case"], pair["baseline"])]
        assert pair["baseline_text"] == base["text"] and pair["baseline_checks"] == base["checks"]
    # Every label matched; the polite one names the models swapped, stored inverted.
    assert {(p["case"], p["label"]) for p in pairs} == {
        ("charged-twice", "candidate"),
        ("login-loop", "baseline"),
        ("refund-no", "candidate"),
    }


def test_label_next_is_listed_in_report_md_and_the_terminal(pytester: pytest.Pytester) -> None:
    pytester.makefile(".eval.yaml", judged=JUDGED_SUITE)
    result = pytester.runpytest("--evalmine-fake")
    out = " ".join(result.stdout.str().split())  # the terminal wraps long lines
    assert "-- Label next --" in out
    report = latest_report(pytester.path)
    markdown = next((pytester.path / "reports" / "small").glob("*/report.md")).read_text()
    assert "## Label next" in markdown
    pairs = report["headline"]["pairs"]["judged"]
    section = markdown.split("## Label next")[1].split("\n## ")[0]
    listed = [line for line in section.splitlines() if line[:2] == "- "]
    assert 0 < len(listed) <= pairs
    for line in listed:
        assert re.match(r"- (triage|polite)/[a-z-]+ \(fake/beta\): ", line)
        assert line in out


def test_labels_for_models_not_in_the_run_say_which_models_would_match(
    pytester: pytest.Pytester,
) -> None:
    suite = JUDGED_SUITE.replace(
        "labels:\n",
        "labels:\n  - {task: polite, case: refund-no, baseline: fake/alpha, "
        "candidate: fake/gamma, prefer: tie}\n",
    )
    pytester.makefile(".eval.yaml", judged=suite)
    result = pytester.runpytest("--evalmine-fake")
    calibration = latest_report(pytester.path)["headline"]["calibration"]
    assert calibration["unmatched_model_pairs"] == [
        {"baseline": "fake/alpha", "candidate": "fake/gamma", "labels": 1}
    ]
    assert calibration["unmatched_labels"] == {"pair_not_in_run": 1}
    words = " ".join(result.stdout.str().split())  # the terminal wraps long lines
    assert (
        "1 labels compare fake/alpha with fake/gamma, which this run did not compare; "
        "--evalmine-models=fake/alpha,fake/gamma would match them"
    ) in words


def pytest_html_page(path: Path) -> tuple[str, dict[str, Any]]:
    """pytest-html 4's summary markup and its per-test data (a JSON attribute)."""
    page = path.read_text("utf-8")
    blob = re.search(r'data-jsonblob="([^"]*)"', page)
    assert blob is not None
    summary = page.split('<div class="additional-summary prefix">', 1)[1].split("</div>\n", 1)[0]
    return summary, json.loads(html_unescape(blob.group(1)))


def test_pytest_html_installed_but_not_asked_for_gets_no_extras(
    pytester: pytest.Pytester,
) -> None:
    # Building an answer's extra for every item costs memory to the end of the run; without
    # --html no page shows them.
    pytester.makefile(".eval.yaml", judged=JUDGED_SUITE)
    recorder = pytester.inline_run("--evalmine-fake", "-p", "html")
    reports = recorder.getreports("pytest_runtest_logreport")
    assert len([r for r in reports if r.when == "call"]) == 6
    # (-p html loads pytest-html; the same run with --html gives every call report an extra)
    assert all(not getattr(r, "extras", None) for r in reports)


def test_pytest_html_gets_the_banner_first_wrapped_answers_with_prompts_and_no_empty_log(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".eval.yaml", judged=JUDGED_SUITE.replace("The login page loops", IN_YAML))
    result = pytester.runpytest(
        "--evalmine-fake", "--html=out.html", "--self-contained-html", "-p", "html"
    )
    assert result.ret == 0
    summary, data = pytest_html_page(pytester.path / "out.html")
    markup = re.sub(r"<style>.*?</style>", "", summary, flags=re.DOTALL).lstrip()
    assert markup.startswith(
        '<div class="evalmine-summary"><header class="verdict verdict-uncalibrated">'
        "<strong>UNCALIBRATED"
    )
    rows = [row for runs in data["tests"].values() for row in runs]
    assert len(rows) == 6
    for row in rows:
        assert row["log"] == ""  # no "No log output captured." box
        extra = row["extras"][0]["content"]
        assert extra.count('<pre style="white-space: pre-wrap; overflow-wrap: anywhere">') >= 2
        assert "<p>prompt:</p>" in extra
    hostile = next(r for r in rows if "login-loop" in r["testId"])["extras"][0]["content"]
    assert IN_YAML not in hostile and html_escape(IN_YAML) in hostile


def test_label_next_in_the_page_follows_the_suites_min_labels() -> None:
    report = report_doc(False)
    report["headline"]["calibration"]["min_labels"] = 0  # no task is short of labels
    data = embedded_data(render_html(report, [pair_doc("a"), pair_doc("b", flip=True)]))
    assert [data["pairs"][i]["case"] for i in data["next_order"]] == ["b"]
    report["headline"]["calibration"]["min_labels"] = 1
    data = embedded_data(render_html(report, [pair_doc("a"), pair_doc("b", flip=True)]))
    assert [data["pairs"][i]["case"] for i in data["next_order"]] == ["b", "a"]


# the cases view and the criterion labelling: the data the page embeds ---------------------
def test_the_cases_view_has_every_answer_once_with_its_case_and_its_pairs_verdict() -> None:
    pairs, answers = run_docs(8)
    pairs[1]["label"], pairs[2]["label"] = "baseline", "candidate"
    report = report_doc(False)
    report["headline"]["calibration"]["min_labels"] = 0  # no task short of labels
    data = embedded_data(render_html(report, pairs, answers))
    items, cases = data["items"], data["case_list"]
    assert len(items) == 16 and len(cases) == 8
    assert [(cases[i["case"]]["task"], cases[i["case"]]["case"], i["model"]) for i in items] == [
        (a["task"], a["case"], a["model"]) for a in answers
    ]
    baseline, candidate = items[0], items[1]
    assert (baseline["judge"], baseline["flip"], baseline["label"]) == ("", False, "")
    assert (candidate["judge"], candidate["flip"]) == ("flip", True)  # case 0 flips
    assert items[3]["label"] == "baseline" and items[3]["judge"] == "win"
    assert candidate["checks"] == [{"name": "contains", "passed": False, "message": "no 'refund'"}]
    assert (candidate["score"], candidate["cost"], candidate["latency"]) == (0.0, 0.0012, 0.25)
    assert candidate["text"] == answers[1]["text"]
    assert cases[0]["prompt"] == "Prompt 0: where is my parcel?"
    # Both passes, with the models named (the cases view is not blind) and the reasons.
    assert cases[0]["judge"][0]["passes"] == [
        {
            "first": "fake/alpha",
            "winner": "fake/beta",
            "reason": "r1",
            "raw": {"order": "baseline_first", "winner_slot": "2"},  # as stored, reason aside
        },
        {
            "first": "fake/beta",
            "winner": "fake/beta",
            "reason": "r2",
            "raw": {"order": "candidate_first", "winner_slot": "1"},
        },
    ]
    # "flagged" is Label next's list: the flips (cases 0 and 7), the judge preferring an
    # answer that failed its check (case 4) and the label it disagrees with (case 1); not the
    # label it agrees with (case 2).
    flagged = [True, True, False, False, True, False, False, True]
    assert [i["flagged"] for i in items[1::2]] == flagged
    assert not any(i["flagged"] for i in items[0::2])  # the baseline's rows carry no pair
    assert data["models"] == ["fake/alpha", "fake/beta"]


def test_a_run_without_answers_has_no_cases_view_and_old_pages_still_render() -> None:
    page = render_html(report_doc(False), [pair_doc()])
    assert 'id="cases"' not in page and 'href="#cases"' not in page
    assert embedded_data(page)["items"] == []


def test_links_to_pytest_html_the_compared_run_and_the_suites_index() -> None:
    report = report_doc(False)
    report["pytest_html"] = "../../../out.html"
    report["changes"] = {"previous_run_id": "20261129T000000.000Z-aaaaaaaa-bbbbbbbb"}
    nav = links_nav(report, has_cases=True)
    assert re.findall(r'href="([^"]*)"', nav) == [
        "#cases",
        "../../../out.html",
        "../20261129T000000.000Z-aaaaaaaa-bbbbbbbb/report.html",
        "../index.html",
    ]
    plain = render_html(report_doc(False), [])
    assert re.findall(r'href="([^"]*)"', plain.split("</nav>")[0]) == ["../index.html"]


def test_criterion_items_carry_the_prompt_the_criterion_and_a_loadable_label_line() -> None:
    report = report_doc(False)
    texts = {"triage": {"polite": "The reply is polite."}}
    labels = [CriterionLabel("triage", "c1", "fake/beta", "polite", "PASS")]
    binary = BinaryJudging({"model": "fake/judge"}, [], [], [], [], 1, 0.0, texts, labels)
    report["binary_judges"] = binary.to_dict()
    verdicts = [
        {"task": "triage", "case": "c1", "model": "fake/beta", "criterion": "polite",
         "label": "FAIL", "critique": HOSTILE, "status": "ok", "prompt": "Classify this"},
        {"task": "triage", "case": "c1", "model": "fake/alpha", "criterion": "polite",
         "label": None, "critique": "", "status": "unparseable", "prompt": "Classify this"},
    ]  # fmt: skip
    answers = [answer_doc("c1", "fake/alpha"), answer_doc("c1", "fake/beta", "cand answer")]
    page = render_html(report, [], answers, verdicts)
    assert 'id="criterion-labelling"' in page
    (item,) = embedded_data(page)["criterion_items"]  # the unusable verdict is not offered
    assert item["prompt"] == "Classify this" and item["answer"] == "cand answer"
    assert item["text"] == "The reply is polite." and item["criterion"] == "polite"
    assert item["judge"] == {"label": "FAIL", "critique": HOSTILE}
    assert item["labelled"] == "PASS"  # the suite's label of this answer, shown
    line = "  - {" + item["fields"] + ', label: PASS, note: "a note"}'
    assert yaml.safe_load(line) == [
        {"task": "triage", "case": "c1", "model": "fake/beta", "criterion": "polite",
         "label": "PASS", "note": "a note"}
    ]  # fmt: skip
    assert HOSTILE not in page
    assert 'id="criterion-labelling"' not in render_html(report, [], answers, verdicts[1:])


def test_labelling_entries_name_the_cases_views_rows_instead_of_copying_them() -> None:
    pairs, answers = run_docs(3)
    answers[3]["text"] = "not what the pair holds"  # a row that differs keeps its own copy
    data = embedded_data(render_html(report_doc(False), pairs, answers))
    for pair, entry in zip(pairs, data["pairs"], strict=True):
        assert "prompt" not in entry
        assert data["case_list"][entry["case_row"]]["prompt"] == pair["prompt"]
        for letter in ("A", "B"):
            side = entry["prefer"][letter]
            shown = entry[letter]
            if "item" in shown:
                row = data["items"][shown["item"]]
                assert data["case_list"][row["case"]]["case"] == pair["case"]
                assert row["model"] == pair[side] and row["text"] == pair[f"{side}_text"]
                assert row["checks"] == pair[f"{side}_checks"]
            else:
                assert (pair["case"], side) == ("case-00001", "candidate")
                assert shown["text"] == pair["candidate_text"]
    assert sum("item" in e[x] for e in data["pairs"] for x in "AB") == 5


def test_the_page_stays_within_its_size_budget() -> None:
    # spec "Page budget": the texts once, at most 800 bytes per answer besides, and about
    # 64 KB of styles and scripts; one self-contained file whatever the size.
    pairs, answers = run_docs(2000)
    page = render_html(report_doc(False), pairs, answers).encode()
    assets = resources.files("pytest_evalmine.reports").joinpath("assets")
    fixed = sum(len(f.read_bytes()) for f in assets.iterdir() if f.name.endswith((".css", ".js")))
    assert fixed <= 64_000
    texts = sum(len(a["text"]) for a in answers) + sum(len(p["prompt"]) for p in pairs)
    assert (len(page) - fixed - texts) / len(answers) <= 800
    assert page.count(answers[1]["text"].encode()) == 1  # each answer's text embedded once
    assert b"default-src 'none'" in page and b"<link" not in page


def test_the_suites_index_lists_its_runs_newest_first_with_verdicts_cost_and_flags(
    tmp_path: Path,
) -> None:
    suite_dir = tmp_path / "small"
    older, newer, broken = (suite_dir / f"2026113{i}T000000.000Z-run" for i in (0, 1, 2))
    for folder in (older, newer, broken):
        folder.mkdir(parents=True)
    first = report_doc(True)
    first.update(created_utc="2026-11-30T00:00:00Z", partial=True, partial_reason="cap reached")
    first["run_name"] = "week 1"
    first["gate"] = {"verdict": "hold"}
    second = report_doc(False, candidate=HOSTILE)
    second.update(created_utc="2026-11-31T00:00:00Z", redactions=2)
    second["regressions"] = {"tasks": ["triage"], "failed": [{"case": "c1"}]}
    (older / "report.json").write_text(json.dumps(first))
    (newer / "report.json").write_text(json.dumps(second))
    (broken / "report.json").write_text("{not json")
    (suite_dir / "notes").write_text("not a run folder")
    (suite_dir / "latest.json").write_text(json.dumps({"run_id": newer.name}))
    page = suite_index_html(suite_dir, compare_run_folders)
    assert HOSTILE not in page and "default-src 'none'" in page
    body = page.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    rows = body.split("</tr>")[:-1]
    assert len(rows) == 3
    assert broken.name in rows[0] and "unreadable" in rows[0]
    assert f'<a href="{newer.name}/report.html">' in rows[1]
    cells = [
        html_unescape(re.sub("<[^>]+>", "", c)) for c in re.findall(r"<td>(.*?)</td>", rows[1])
    ]
    assert cells[1] == "" and cells[2] == newer.name  # no run_name: blank
    assert cells[3] == f"fake/alpha, {HOSTILE}" and cells[8] == "UNCALIBRATED"
    assert cells[4] == "fake/alpha 100.0% (2/2)" and cells[5] == "0.10 (below_floor)"
    assert cells[6] == f"{HOSTILE} 62.5%† UNCALIBRATED"
    assert cells[7] == "$0.0100"
    assert cells[9] == "latest; REGRESSIONS FAILED; 2 key(s) redacted"
    assert cells[10] == "compare with the previous run"
    assert f'href="#compare-{newer.name}"' in rows[1] and f'id="compare-{newer.name}"' in page
    cells = [
        html_unescape(re.sub("<[^>]+>", "", c)) for c in re.findall(r"<td>(.*?)</td>", rows[2])
    ]
    assert cells[0] == "2026-11-30T00:00:00Z" and cells[8] == "ELIGIBLE; gate hold"
    assert cells[1] == "week 1"
    assert cells[6] == "fake/beta 62.5%" and cells[10] == ""  # eligible; none before it
    assert cells[9] == "PARTIAL (cap reached)"
