"""report.html and the pytest-html page in a real browser (Debian's chromium, driven by selenium).

Skipped when chromium, chromedriver or selenium is missing, except in CI (``CI=true``), where
a missing browser fails instead: CI installs it. Each test leaves a screenshot under
``artifacts/screenshots/`` (kept by CI). Timings are printed and written to
``artifacts/browser-timings.json``, never asserted.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_evalmine.reports.html_page import render_html
from pytest_evalmine.reports.labelling import a_side, pair_id

from .conftest import unavailable
from .test_binary_judges import BINARY_SUITE
from .test_judge_run import SMALL_SUITE
from .test_report_html import HOSTILE, answer_doc, pair_doc, report_doc, run_docs, win_rate

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
SCREENSHOTS = ARTIFACTS / "screenshots"
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1300,1800",
)
JUDGED_NO_LABELS = SMALL_SUITE.replace(
    "tasks:",
    """judge:
  model: fake/judge
  calibration: {min_kappa: 0.0, min_labels: 3}
tasks:""",
)


def _missing(what: str) -> None:
    unavailable(f"{what} is missing")


def _find(*names: str) -> str | None:
    for name in names:
        found = shutil.which(name) or (
            f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None
        )
        if found:
            return found
    return None


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _missing("selenium")
    browser = _find("chromium", "chromium-browser")
    chromedriver = _find("chromedriver")
    if browser is None or chromedriver is None:
        _missing("chromium or chromedriver")
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    web = webdriver.Chrome(service=Service(chromedriver), options=options)
    try:
        yield web
    finally:
        web.quit()


@pytest.fixture
def page(driver: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """The browser; after the test, a screenshot named after it, and the window's own width
    back (a test may emulate a phone's)."""
    yield driver
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SCREENSHOTS / f"{request.node.name}.png"))
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def at_width(driver: Any, width: int, height: int = 900) -> None:
    """The viewport of a ``width`` px screen (Chromium's device emulation, as its developer
    tools do): window sizes below Chromium's minimum window are not reliable."""
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
    )


def screenshot(driver: Any, name: str, *, full: bool = False, element: str | None = None) -> None:
    """A named screenshot under artifacts/screenshots/ (kept by CI); ``full``: the whole
    page at the current width (up to 6,000 px tall), not only the visible part; ``element``:
    the id of the part to scroll to first."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    if element:
        driver.execute_script(f"document.getElementById('{element}').scrollIntoView()")
    if full:
        width = driver.execute_script("return window.innerWidth")
        tall = driver.execute_script("return document.documentElement.scrollHeight")
        driver.execute_script("window.scrollTo(0, 0)")
        at_width(driver, width, min(int(tall), 6000))
    driver.save_screenshot(str(SCREENSHOTS / name))
    if full:
        at_width(driver, width)


def open_file(driver: Any, path: Path) -> None:
    driver.get(path.resolve().as_uri())


def by_id(driver: Any, element_id: str) -> Any:
    return driver.find_element("id", element_id)


def press(driver: Any, key: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(driver).send_keys(key).perform()


def record_timing(name: str, value: Any) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    target = ARTIFACTS / "browser-timings.json"
    timings = json.loads(target.read_text()) if target.is_file() else {}
    timings[name] = value
    target.write_text(json.dumps(timings, indent=2) + "\n")
    print(f"{name}: {value}")


def latest_run_dir(root: Path) -> Path:
    pointer = json.loads((root / "reports" / "small" / "latest.json").read_text())
    return root / "reports" / "small" / pointer["run_id"]


def test_label_blind_copy_the_yaml_and_rerun_from_the_cache_with_kappa(
    pytester: pytest.Pytester, page: Any
) -> None:
    from sklearn.metrics import cohen_kappa_score

    suite = pytester.makefile(".eval.yaml", small=JUDGED_NO_LABELS)
    assert pytester.runpytest("--evalmine-fake").ret == 0
    run_dir = latest_run_dir(pytester.path)
    open_file(page, run_dir / "report.html")
    banner = by_id(page, "verdict").text
    assert banner.startswith("UNCALIBRATED") and "no_labels" in banner
    assert "Answer A" in page.page_source and "fake/alpha" not in by_id(page, "labelling").text

    pairs = {
        (p["task"], p["case"]): p
        for p in map(json.loads, (run_dir / "pairs.jsonl").read_text().splitlines())
    }
    chosen: dict[tuple[str, str], str] = {}
    for step, choice in enumerate(("A", "tie", "B")):
        where = tuple(by_id(page, "lab-where").text.split(" / "))
        assert by_id(page, "lab-judge").get_attribute("open") is None  # hidden until chosen
        assert by_id(page, "lab-judge-body").text == ""
        if step == 0:
            by_id(page, "lab-note").send_keys('a "quoted" note: with colon')
            by_id(page, "choose-A").click()
        else:
            by_id(page, "lab-prompt").click()  # focus off the note field: keys now choose
            press(page, {"tie": "2", "B": "3"}[choice])
        assert by_id(page, f"choose-{choice}").get_attribute("aria-pressed") == "true"
        assert by_id(page, "lab-judge").get_attribute("open") == "true"
        assert by_id(page, "lab-judge-summary").text.startswith("Judge verdict: ")
        chosen[where] = choice  # type: ignore[index]
        press(page, "\ue014")  # arrow right
    assert by_id(page, "lab-progress").text.startswith("3 chosen here")

    page.refresh()  # progress survives in localStorage, per run id
    assert by_id(page, "lab-progress").text.startswith("3 chosen here")
    by_id(page, "copy-labels").click()
    copied = by_id(page, "labels-yaml").get_attribute("value")
    assert copied == page.execute_script("return window.evalmineLabelsYaml")
    first, rest = copied.split("\n", 1)
    assert first.startswith("# 3 label(s) from run ") and first.endswith(
        ": paste at the end of small.eval.yaml (or into its labels_path file)"
    )
    assert rest.startswith("labels:\n  - {task: ")

    entries = yaml.safe_load(copied)["labels"]
    assert len(entries) == 3
    for entry in entries:
        pair = pairs[(entry["task"], entry["case"])]
        choice = chosen[(entry["task"], entry["case"])]
        side = a_side(pair_id(pair))
        other = "candidate" if side == "baseline" else "baseline"
        assert entry["prefer"] == {"A": side, "B": other, "tie": "tie"}[choice]
        assert (entry["baseline"], entry["candidate"]) == ("fake/alpha", "fake/beta")
    assert [e.get("note") for e in entries].count('a "quoted" note: with colon') == 1

    # Paste unchanged into the suite, rerun from the cache only: kappa over the new labels.
    text = suite.read_text()
    suite.write_text(text + ("" if text.endswith("\n") else "\n") + copied)  # on a new line
    result = pytester.runpytest("--evalmine-fake", "--evalmine-record=none")
    assert result.ret == 0, result.stdout.str()
    report = json.loads((latest_run_dir(pytester.path) / "report.json").read_text())
    assert report["calls"]["made"] == 0 and report["headline"]["judge_calls"]["made"] == 0
    calibration = report["headline"]["calibration"]
    assert calibration["n"] == 3 and calibration["labels_total"] == 3
    human = [e["prefer"] for e in entries]
    judge = [pairs[(e["task"], e["case"])]["category"] for e in entries]
    expected = cohen_kappa_score(human, judge, labels=["baseline", "tie", "candidate"])
    assert calibration["kappa"] == pytest.approx(expected)
    open_file(page, latest_run_dir(pytester.path) / "report.html")
    assert f"kappa {calibration['kappa']:.2f}" in by_id(page, "calibration").text
    assert "0 chosen here, 3 already labelled in the suite" in by_id(page, "lab-progress").text


def test_hostile_answers_stay_text_in_the_browser(page: Any, tmp_path: Path) -> None:
    hostile = HOSTILE + '<img src=x onerror="window.pwned=1">'
    pair = pair_doc(prompt=hostile, baseline_text=hostile, candidate_text=hostile)
    pair["passes"][0]["reason"] = hostile
    answers = [
        answer_doc("c1", "fake/alpha", hostile, task=hostile),
        answer_doc("c1", hostile, hostile, task=hostile, passed=False),
    ]
    answers[1]["checks"][0]["message"] = hostile
    pair.update(task=hostile, candidate=hostile)
    target = tmp_path / "report.html"
    target.write_text(render_html(report_doc(False, candidate=hostile), [pair], answers), "utf-8")
    open_file(page, target)
    by_id(page, "choose-A").click()  # reveals the judge's reason too
    assert page.execute_script("return window.pwned === undefined")
    assert page.execute_script("return document.querySelectorAll('#labelling b, img').length") == 0
    for element_id in ("lab-prompt", "lab-a", "lab-b"):
        assert by_id(page, element_id).get_attribute("textContent") == hostile
    assert hostile in by_id(page, "lab-judge-body").get_attribute("textContent")
    by_id(page, "lab-diff").click()  # the diff's spans hold text too
    assert by_id(page, "lab-a").get_attribute("textContent") == hostile
    # The cases view: the table, the filters' options, the case with its checks and passes.
    assert (
        page.execute_script("return document.querySelectorAll('#cases b, #cases img').length") == 0
    )
    assert hostile in by_id(page, "cases-body").get_attribute("textContent")
    assert hostile in [
        o.get_attribute("value") for o in page.find_elements("css selector", "#f-model option")
    ]
    page.find_element("css selector", "#cases-body tr").click()
    by_id(page, "case-diff").click()
    assert by_id(page, "case-prompt").get_attribute("textContent") == hostile
    detail = by_id(page, "case-detail").get_attribute("textContent")
    assert detail.count(hostile) >= 4  # title, both answers, the check's message, the reason
    assert (
        page.execute_script("return document.querySelectorAll('#cases b, #cases img').length") == 0
    )
    assert page.execute_script("return window.pwned === undefined")
    assert page.execute_script("return document.scripts.length") == 2
    assert "UNCALIBRATED" in by_id(page, "verdict").text


def test_two_thousand_pairs_open_and_a_label_click_stays_quick(page: Any, tmp_path: Path) -> None:
    answer = "The parcel left our depot on Monday and should arrive within two days. " * 8
    pairs = [
        pair_doc(
            case=f"case-{i:04d}",
            task=f"task-{i % 20:02d}",
            prompt=f"Prompt {i}: reply to the customer. " * 6,
            baseline_text=answer + f"(baseline {i})",
            candidate_text=answer + f"(candidate {i})",
            flip=i % 17 == 0,
        )
        for i in range(2000)
    ]
    target = tmp_path / "report.html"
    started = time.perf_counter()
    target.write_text(render_html(report_doc(False), pairs), "utf-8")
    render_s = time.perf_counter() - started
    started = time.perf_counter()
    open_file(page, target)
    open_s = time.perf_counter() - started
    assert by_id(page, "lab-position").text == "pair 1 of 2000"
    in_page_ms = page.execute_script(
        "var t = performance.now(); document.getElementById('choose-A').click();"
        "return performance.now() - t;"
    )
    started = time.perf_counter()
    by_id(page, "lab-next").click()
    by_id(page, "choose-B").click()
    round_trip_s = time.perf_counter() - started
    assert by_id(page, "lab-progress").text.startswith("2 chosen here")
    record_timing(
        "2000_pairs",
        {
            "page_bytes": target.stat().st_size,
            "render_s": round(render_s, 3),
            "open_s": round(open_s, 3),
            "label_click_in_page_ms": round(in_page_ms, 2),
            "next_and_label_clicks_via_webdriver_s": round(round_trip_s, 3),
        },
    )


def test_pytest_html_shows_the_verdict_banner_first(pytester: pytest.Pytester, page: Any) -> None:
    pytester.makefile(".eval.yaml", small=JUDGED_NO_LABELS)
    result = pytester.runpytest(
        "--evalmine-fake", "--html=out.html", "--self-contained-html", "-p", "html"
    )
    assert result.ret == 0
    open_file(page, pytester.path / "out.html")
    summary = page.find_element("css selector", ".additional-summary.prefix")
    first = summary.find_element("css selector", ".evalmine-summary > :first-child")
    assert first.tag_name == "header" and first.text.startswith("UNCALIBRATED")
    assert first.value_of_css_property("background-color") == "rgba(254, 226, 226, 1)"
    page.find_element("css selector", "tbody.passed .col-result").click()  # expand one row
    pre = page.find_element("css selector", ".evalmine-answer pre")
    assert pre.value_of_css_property("white-space") == "pre-wrap"
    assert "No log output captured" not in page.find_element("css selector", "body").text
    frame = page.find_element("css selector", "tbody.passed .logwrapper")
    assert not frame.is_displayed()  # no empty grey box either


# responsive layout, cases view, diff, labelling keys, criterion labelling -------------------
LONG_MODEL = "openai/gpt-4.1-mini-2025-04-14-with-a-long-variant-name"


def rich_page(tmp_path: Path, cases: int = 60) -> Path:
    """A page with every part: banner, heatmap, win rates overall and per task (long names),
    tables, label next, the cases view and the labelling."""
    report = report_doc(False, candidate=LONG_MODEL)
    report["headline"]["win_rates_per_task"] = [
        win_rate(LONG_MODEL, False, f"task-{i}-with-a-rather-long-descriptive-id") for i in range(3)
    ]
    report["scorecard"] = [
        {"model": LONG_MODEL, "passed": 40, "items": 60, "latency_p50_s": 0.4, "cost_usd": 0.1}
    ]
    pairs, answers = run_docs(cases)
    for row in pairs:
        row["candidate"] = LONG_MODEL
    for row in answers[1::2]:
        row["model"] = LONG_MODEL
    target = tmp_path / "report.html"
    target.write_text(render_html(report, pairs, answers), "utf-8")
    return target


def test_the_page_fits_a_phone_a_tablet_and_a_desktop(page: Any, tmp_path: Path) -> None:
    open_file(page, rich_page(tmp_path))
    for width in (390, 768, 1280):
        at_width(page, width)
        inner = page.execute_script("return window.innerWidth")
        assert inner == width
        # No horizontal scrolling of the document: every part fits, or scrolls in its box.
        assert page.execute_script("return document.documentElement.scrollWidth") <= inner
        boxes = page.execute_script(
            "return Array.from(document.querySelectorAll('.win-rates, .chart, .table-wrap, "
            "nav, header, #labelling')).map(e => e.getBoundingClientRect().right)"
        )
        assert boxes and max(boxes) <= inner
        # Charts scale with readable labels: names and figures are text at the page's size,
        # the heatmap's numbers at 11 px or more.
        sizes = page.execute_script(
            "return Array.from(document.querySelectorAll('.wr-name, .wr-value'))"
            ".map(e => parseFloat(getComputedStyle(e).fontSize))"
        )
        assert sizes and min(sizes) >= 12
        cell_text = page.execute_script(
            "return document.querySelector('#confusion-heatmap text[style]')"
            ".getBoundingClientRect().height"
        )
        assert cell_text >= 11
        plot = page.execute_script(
            "var r = document.querySelector('.wr-plot').getBoundingClientRect();"
            "return [r.width, r.right]"
        )
        assert plot[0] >= 100 and plot[1] <= inner
        # The wide cases table scrolls in its own box on a tablet; a phone gets cards.
        wrap = page.execute_script(
            "var w = document.querySelector('#cases .table-wrap');"
            "return [w.scrollWidth, w.clientWidth]"
        )
        assert wrap[1] <= inner
        if width == 390:
            assert wrap[0] <= wrap[1]
        screenshot(page, f"report-{width}.png", full=True)


def cases_count(page: Any) -> str:
    return by_id(page, "cases-count").text


def count_becomes(page: Any, expected: str) -> str:
    """The count once the view has followed a new hash: ``hashchange`` fires after the
    click or the script that changed the hash has returned."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    with contextlib.suppress(TimeoutException):  # the caller's assertion shows the count
        WebDriverWait(page, 5).until(lambda _: cases_count(page) == expected)
    return cases_count(page)


def column(page: Any, index: int) -> list[str]:
    return page.execute_script(
        f"return Array.from(document.querySelectorAll('#cases-body tr td:nth-child({index})'))"
        ".map(td => td.textContent)"
    )


def test_the_cases_view_filters_searches_sorts_and_opens_a_case(page: Any, tmp_path: Path) -> None:
    from selenium.webdriver.support.ui import Select

    pairs, answers = run_docs(300)
    target = tmp_path / "report.html"
    target.write_text(render_html(report_doc(False), pairs, answers), "utf-8")
    open_file(page, target)
    assert cases_count(page) == "600 of 600 answers"
    assert len(column(page, 1)) == 100  # a page of rows, not 600
    assert by_id(page, "cases-page").text == "page 1 of 6"

    Select(by_id(page, "f-task")).select_by_value("task-1")
    assert cases_count(page) == "200 of 600 answers"
    assert set(column(page, 1)) == {"task-1"}
    by_id(page, "f-failed").click()
    failing = [i for i in range(300) if i % 3 == 1 and i % 4 == 0]
    assert cases_count(page) == f"{len(failing)} of 600 answers"
    assert set(column(page, 5)) == {"0/1"}
    by_id(page, "f-flip").click()
    assert cases_count(page) == f"{len([i for i in failing if i % 7 == 0])} of 600 answers"
    assert page.execute_script("return location.hash") == "#cases?task=task-1&flip=1&failed=1"
    by_id(page, "f-flip").click()
    by_id(page, "f-failed").click()
    Select(by_id(page, "f-task")).select_by_value("")
    Select(by_id(page, "f-model")).select_by_value("fake/beta")
    Select(by_id(page, "f-outcome")).select_by_value("failed")
    assert cases_count(page) == "75 of 600 answers"
    Select(by_id(page, "f-outcome")).select_by_value("")
    by_id(page, "f-flagged").click()  # label next: every pair (no task has labels)
    assert cases_count(page) == "300 of 600 answers"
    by_id(page, "f-flagged").click()
    Select(by_id(page, "f-model")).select_by_value("")

    # Search: answers and prompts, case-insensitive.
    by_id(page, "f-search").send_keys("TUESDAY")
    assert cases_count(page) == "300 of 600 answers"
    by_id(page, "f-search").clear()
    by_id(page, "f-search").send_keys("prompt 17:")
    assert cases_count(page) == "2 of 600 answers"  # both models' answers to case 17
    assert set(column(page, 2)) == {"case-00017"}
    by_id(page, "f-search").clear()
    by_id(page, "f-search").send_keys(" ")
    by_id(page, "f-search").clear()

    # Sort by score, then the other way; by model; blanks last.
    page.find_element("css selector", 'th[data-sort="score"]').click()
    scores = sorted(a["score"] for a in answers)
    assert column(page, 6)[:3] == [f"{v:.2f}" for v in scores[:3]]
    page.find_element("css selector", 'th[data-sort="score"]').click()
    assert column(page, 6)[:3] == [f"{v:.2f}" for v in scores[::-1][:3]]
    page.find_element("css selector", 'th[data-sort="judge"]').click()
    assert column(page, 9)[0] == "flip" and column(page, 3)[0] == "fake/beta"
    for name, index in (("task", 1), ("case", 2), ("model", 3), ("outcome", 4), ("checks", 5),
                        ("cost", 7), ("latency", 8), ("flip", 10), ("label", 11)):  # fmt: skip
        page.find_element("css selector", f'th[data-sort="{name}"]').click()
        assert len(column(page, index)) == 100
    page.find_element("css selector", 'th[data-sort="case"]').click()
    assert column(page, 2)[:2] == ["case-00000", "case-00000"]
    assert (
        page.find_element("css selector", 'th[data-sort="case"]').get_attribute("aria-sort")
        == "ascending"
    )

    # A row opens its case: the prompt, each model's answer with its checks, both passes.
    page.find_element("css selector", "#cases-body tr:nth-child(2)").click()
    assert by_id(page, "case-detail").is_displayed()
    assert by_id(page, "case-title").text == "task-0 / case-00000"
    assert by_id(page, "case-prompt").text == "Prompt 0: where is my parcel?"
    answers_text = by_id(page, "case-answers").text
    assert answers[0]["text"] in answers_text and answers[1]["text"] in answers_text
    assert "fake/beta: failed" in answers_text and "contains: no 'refund'" in answers_text
    judge = by_id(page, "case-judge").text
    assert "Judge: fake/beta vs fake/alpha: flip" in judge
    assert "Pass 1, fake/alpha shown first: fake/beta better. r1" in judge
    assert "Pass 2, fake/beta shown first: fake/beta better. r2" in judge
    screenshot(page, "cases-view.png", element="cases")

    # Links: a hash opens the view filtered (as the charts' and per-task rows' links do).
    page.execute_script("location.hash = '#cases?task=task-2&model=fake%2Fbeta'")
    assert count_becomes(page, "100 of 600 answers") == "100 of 600 answers"
    assert by_id(page, "f-task").get_attribute("value") == "task-2"
    page.execute_script("location.hash = ''")
    page.find_element("css selector", "#win-rates .wr-name").click()
    # the overall row: the candidate's answers
    assert count_becomes(page, "300 of 600 answers") == "300 of 600 answers"
    assert by_id(page, "f-model").get_attribute("value") == "fake/beta"
    page.refresh()  # the filters live in the hash
    assert cases_count(page) == "300 of 600 answers"
    # A "Label next" entry opens its case, filtered to it.
    entry = page.find_element("css selector", "#label-next li a")
    where = entry.text
    entry.click()
    assert count_becomes(page, "2 of 600 answers") == "2 of 600 answers"
    assert by_id(page, "case-title").text == where.replace("/", " / ")
    Select(by_id(page, "f-task")).select_by_value("")  # a control clears the case filter
    assert cases_count(page) == "600 of 600 answers"


def test_a_word_diff_of_the_two_answers_in_the_labelling_and_the_case_view(
    page: Any, tmp_path: Path
) -> None:
    base = "The parcel left on Monday and arrives soon."
    cand = "The parcel left on Tuesday and arrives soon, sorry."
    pair = pair_doc(baseline_text=base, candidate_text=cand)
    answers = [answer_doc("c1", "fake/alpha", base), answer_doc("c1", "fake/beta", cand)]
    target = tmp_path / "report.html"
    target.write_text(render_html(report_doc(False), [pair], answers), "utf-8")
    open_file(page, target)

    def marked(selector: str) -> list[str]:
        return page.execute_script(
            f"return Array.from(document.querySelectorAll('{selector}')).map(e => e.textContent)"
        )

    assert marked("#lab-a .diff-del, #lab-b .diff-ins") == []
    press(page, "d")  # the key toggles the diff
    assert by_id(page, "lab-diff").is_selected()
    a_is_baseline = a_side(pair_id(pair)) == "baseline"
    removed, added = ["Monday ", "soon."], ["Tuesday ", "soon, sorry."]
    # A keeps its own text, B its own; each marks the words the other lacks.
    assert marked("#lab-a .diff-del") == (removed if a_is_baseline else added)
    assert marked("#lab-b .diff-ins") == (added if a_is_baseline else removed)
    assert by_id(page, "lab-a").get_attribute("textContent") == (base if a_is_baseline else cand)
    assert "fake/" not in by_id(page, "labelling").text  # still blind
    screenshot(page, "diff-labelling.png", element="labelling")
    press(page, "d")
    assert marked("#lab-a .diff-del") == []

    page.find_element("css selector", "#cases-body tr").click()
    by_id(page, "case-diff").click()
    assert marked("#case-answers .diff-del") == removed
    assert marked("#case-answers .diff-ins") == added
    screenshot(page, "diff-case.png", element="case-detail")


def test_labelling_keys_advance_on_choice_and_the_copy_status_counts_entries_and_comments(
    page: Any, tmp_path: Path
) -> None:
    pairs = [pair_doc(f"c{i}") for i in range(4)]
    pairs[3]["label"] = "baseline"  # in the suite already; the judge disagrees
    target = tmp_path / "report.html"
    target.write_text(render_html(report_doc(False), pairs), "utf-8")
    open_file(page, target)
    page.execute_script("localStorage.clear()")
    page.refresh()
    by_id(page, "lab-advance").click()
    by_id(page, "lab-prompt").click()  # focus off the checkbox: keys act
    first = by_id(page, "lab-where").text
    press(page, "1")
    assert by_id(page, "lab-where").text != first  # advanced to the next unlabelled
    assert by_id(page, "lab-progress").text.startswith("1 chosen here")
    press(page, "3")
    assert by_id(page, "lab-progress").text.startswith("2 chosen here")
    by_id(page, "lab-advance").click()
    by_id(page, "lab-prompt").click()
    before = by_id(page, "lab-where").text
    press(page, "2")
    assert by_id(page, "lab-where").text == before  # no advance: the verdict opens
    assert by_id(page, "lab-judge").get_attribute("open") == "true"
    press(page, "n")  # next unlabelled: the one pair left
    assert by_id(page, "lab-where").text == "triage / c3"
    assert "Your label in the suite" in by_id(page, "lab-existing").text
    press(page, "3")
    press(page, "c")  # copy labels
    status = by_id(page, "copy-status").text
    assert status.startswith("3 new entries and 1 comment (pairs the suite labels already")
    assert status.endswith("paste under labels: in small.eval.yaml")
    copied = by_id(page, "labels-yaml").get_attribute("value")
    lines = copied.splitlines()
    assert lines[0] == (
        "# 3 label(s) from run 20261130T000000.000Z-aaaaaaaa-bbbbbbbb: paste at the end of "
        "small.eval.yaml (or into its labels_path file)"
    )
    assert lines[1] == "labels:" and len(yaml.safe_load(copied)["labels"]) == 3
    assert lines[-1].startswith("  # already in the suite, edit that entry: {task: ")
    page.refresh()  # the option is kept
    assert not by_id(page, "lab-advance").is_selected()


CRITERION_SUITE = BINARY_SUITE.split("labels:")[0]


def test_criterion_labels_from_the_page_load_into_the_suite_and_calibrate_the_judge(
    pytester: pytest.Pytester, page: Any
) -> None:
    suite = pytester.makefile(".eval.yaml", binary=CRITERION_SUITE)
    assert pytester.runpytest("--evalmine-fake").ret == 0
    pointer = json.loads((pytester.path / "reports" / "binary" / "latest.json").read_text())
    run_dir = pytester.path / "reports" / "binary" / pointer["run_id"]
    verdicts = [json.loads(line) for line in (run_dir / "verdicts.jsonl").read_text().splitlines()]
    assert verdicts and all(
        v["prompt"].startswith("Reply politely to: message c") for v in verdicts
    )
    open_file(page, run_dir / "report.html")
    assert by_id(page, "crit-position").text == f"answer 1 of {len(verdicts)}"
    chosen = []
    for label in ("PASS", "FAIL", "PASS"):
        assert by_id(page, "crit-judge").get_attribute("open") is None
        assert by_id(page, "crit-judge-body").text == ""
        assert by_id(page, "crit-prompt").text.startswith("Reply politely to: message c")
        assert by_id(page, "crit-text").text in (
            "The reply is polite.",
            "The reply answers the message.",
        )
        chosen.append((by_id(page, "crit-where").text, by_id(page, "crit-name").text, label))
        if label == "FAIL":
            by_id(page, "crit-note").send_keys("too curt")
            by_id(page, "crit-FAIL").click()
        else:
            by_id(page, "crit-prompt").click()
            press(page, "p")
        assert by_id(page, f"crit-{label}").get_attribute("aria-pressed") == "true"
        assert by_id(page, "crit-judge-summary").text.startswith("Judge verdict: ")
        by_id(page, "crit-next").click()
    screenshot(page, "criterion-panel.png", element="criterion-labelling")
    by_id(page, "crit-copy").click()
    copied = by_id(page, "crit-yaml").get_attribute("value")
    assert copied.startswith("# 3 criterion label(s) from run ")
    assert by_id(page, "crit-status").text.startswith("3 new entries and 0 comments")
    entries = yaml.safe_load(copied)["labels"]
    assert [(f"{e['task']} / {e['case']}", e["criterion"], e["label"]) for e in entries] == chosen
    assert [e.get("note") for e in entries] == [None, "too curt", None]
    assert {e["model"] for e in entries} == {"fake/alpha"}

    # Pasted unchanged, the suite loads them as criterion labels: the rerun's calibration
    # counts them, from the cache alone.
    suite.write_text(suite.read_text() + copied)
    result = pytester.runpytest("--evalmine-fake", "--evalmine-record=none")
    assert result.ret == 0, result.stdout.str()
    pointer = json.loads((pytester.path / "reports" / "binary" / "latest.json").read_text())
    report = json.loads(
        (pytester.path / "reports" / "binary" / pointer["run_id"] / "report.json").read_text()
    )
    rows = report["binary_judges"]["calibration"]
    assert sum(row["labels"] for row in rows) == 3
    assert sum(row["unmatched_labels"] for row in rows) == 0

    # The rerun's page knows them: it starts past them (the first three answers), shows a
    # labelled one's label, and a new choice on it comes out as a comment to edit.
    open_file(page, pytester.path / "reports" / "binary" / pointer["run_id"] / "report.html")
    page.execute_script("localStorage.clear()")
    page.refresh()
    assert by_id(page, "crit-position").text == f"answer 4 of {len(verdicts)}"
    assert by_id(page, "crit-existing").text == ""
    by_id(page, "crit-prev").click()
    assert by_id(page, "crit-existing").text == "Your label in the suite: PASS"
    by_id(page, "crit-prompt").click()
    press(page, "f")
    by_id(page, "crit-copy").click()
    assert by_id(page, "crit-status").text.startswith("0 new entries and 1 comment")
    assert (
        by_id(page, "crit-yaml")
        .get_attribute("value")
        .splitlines()[-1]
        .startswith("  # already in the suite, edit that entry: {task: ")
    )


def test_links_lead_to_the_suites_runs_the_compared_run_and_the_pytest_html_page(
    pytester: pytest.Pytester, page: Any
) -> None:
    pytester.makefile(".eval.yaml", small=JUDGED_NO_LABELS)
    assert pytester.runpytest("--evalmine-fake").ret == 0
    first = latest_run_dir(pytester.path)
    html_args = ("--html=pages/out.html", "--self-contained-html", "-p", "html")
    assert pytester.runpytest("--evalmine-fake", *html_args).ret == 0
    second = latest_run_dir(pytester.path)
    assert second != first
    report = json.loads((second / "report.json").read_text())
    assert report["pytest_html"] == "../../../pages/out.html"

    open_file(page, second / "report.html")
    by_id(page, "link-index").click()
    assert page.title == "evalmine: small runs"
    rows = page.find_elements("css selector", "#runs tbody tr")
    assert [r.find_element("css selector", "a").text for r in rows] == [second.name, first.name]
    assert "latest" in rows[0].text and "UNCALIBRATED" in rows[0].text
    assert "fake/alpha, fake/beta" in rows[1].text and "$" in rows[1].text
    screenshot(page, "suite-index.png")
    rows[1].find_element("css selector", "a").click()
    assert by_id(page, "verdict").is_displayed()
    assert page.current_url.endswith(f"/{first.name}/report.html")
    assert page.find_elements("id", "link-previous") == []  # the first run compared with none

    open_file(page, second / "report.html")
    by_id(page, "link-previous").click()
    assert page.current_url.endswith(f"/{first.name}/report.html")
    open_file(page, second / "report.html")
    by_id(page, "link-pytest-html").click()
    assert page.current_url.split("?")[0].endswith("/pages/out.html")  # it adds ?sort=
    assert page.find_elements("css selector", ".evalmine-summary")
