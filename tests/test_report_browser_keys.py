"""report.html by keyboard, on a phone and under axe-core (issue 32): sortable headers and rows
reached and pressed by keys with a visible focus, labelling keys past a checkbox and only in the
panel in use, one "advance on choice", Esc in the search, the choice buttons within reach at
390 px, the cases as cards, and no serious or critical axe violation on any view.

One browser for the module (the fixtures of test_report_browser); skipped without Chromium,
chromedriver or selenium, except under CI=true.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_evalmine.engine.stored import compare_run_folders
from pytest_evalmine.reports.html_page import render_html
from pytest_evalmine.reports.suite_index import suite_index_html

from . import test_report_browser as browser
from .conftest import unavailable
from .test_report_browser import at_width, by_id, open_file, press, rich_page, screenshot
from .test_report_html import pair_doc, report_doc, run_docs

# The browser fixtures, one driver for this module.
driver, page = browser.driver, browser.page
TAB, ENTER, SPACE, ESCAPE = "\ue004", "\ue007", " ", "\ue00c"


def active(page: Any) -> dict[str, Any]:
    return page.execute_script(
        "var e = document.activeElement, s = getComputedStyle(e);"
        "var head = e.closest('th');"
        "return {tag: e.tagName, sort: head ? head.getAttribute('data-sort') : null,"
        " item: e.getAttribute('data-item'), outline: s.outlineStyle,"
        " width: parseFloat(s.outlineWidth)}"
    )


def tab_until(page: Any, wanted: Any, limit: int = 40) -> dict[str, Any]:
    for _ in range(limit):
        press(page, TAB)
        now = active(page)
        if wanted(now):
            return now
    raise AssertionError(f"Tab never reached it; focus ended on {active(page)}")


def cases_page(tmp_path: Path, cases: int = 30) -> Path:
    pairs, answers = run_docs(cases)
    target = tmp_path / "report.html"
    target.write_text(render_html(report_doc(False), pairs, answers), "utf-8")
    return target


def test_headers_sort_and_rows_open_from_the_keyboard_with_a_visible_focus(
    page: Any, tmp_path: Path
) -> None:
    open_file(page, cases_page(tmp_path))
    by_id(page, "f-search").click()
    head = tab_until(page, lambda a: a["sort"] == "task")
    assert head["outline"] != "none" and head["width"] >= 2  # the focus is visible
    press(page, TAB)
    assert active(page)["sort"] == "case"
    press(page, ENTER)
    sorted_by = page.find_element("css selector", 'th[data-sort="case"]')
    assert sorted_by.get_attribute("aria-sort") == "ascending"
    press(page, SPACE)
    assert sorted_by.get_attribute("aria-sort") == "descending"
    row = tab_until(page, lambda a: a["tag"] == "TR")
    assert row["outline"] != "none" and row["width"] >= 2
    first_case = page.find_element("css selector", "#cases-body tr td:nth-child(2)").text
    assert first_case == "case-00029"  # descending
    screenshot(page, "keyboard-focus-row.png", element="cases-table")
    press(page, ENTER)
    assert by_id(page, "case-detail").is_displayed()
    assert by_id(page, "case-title").text == "task-2 / case-00029"


def test_search_matches_case_ids_and_check_messages_esc_clears_and_nothing_found_says_so(
    page: Any, tmp_path: Path
) -> None:
    open_file(page, cases_page(tmp_path, 40))
    box = by_id(page, "f-search")
    box.send_keys("case-00017")  # a case id, in neither its prompt nor its answers
    assert by_id(page, "cases-count").text == "2 of 80 answers"
    box.clear()
    box.send_keys("no 'refund'")  # a failed check's message
    failing = len([i for i in range(40) if i % 4 == 0])
    assert by_id(page, "cases-count").text == f"{failing} of 80 answers"
    box.clear()
    box.send_keys("xyz-nothing")
    assert by_id(page, "cases-count").text == "0 of 80 answers"
    assert by_id(page, "cases-empty").text == "no answer matches 'xyz-nothing'"
    screenshot(page, "search-empty.png", element="cases")
    box.send_keys(ESCAPE)
    assert box.get_attribute("value") == ""
    assert by_id(page, "cases-count").text == "80 of 80 answers"
    assert not by_id(page, "cases-empty").is_displayed()
    assert "q=" not in page.execute_script("return location.hash")


def two_panel_page(tmp_path: Path) -> Path:
    """Blind pairs and criterion verdicts on one page."""
    pairs = [pair_doc(f"c{i}") for i in range(4)]
    verdicts = [
        {
            "task": "triage",
            "case": f"c{i}",
            "model": "fake/alpha",
            "criterion": "polite",
            "label": "PASS",
            "critique": "fine",
            "prompt": "Classify this",
        }
        for i in range(4)
    ]
    target = tmp_path / "report.html"
    target.write_text(render_html(report_doc(False), pairs, [], verdicts), "utf-8")
    return target


def test_keys_work_after_a_checkbox_and_act_only_on_the_panel_in_use(
    page: Any, tmp_path: Path
) -> None:
    open_file(page, two_panel_page(tmp_path))
    page.execute_script("localStorage.clear()")
    page.refresh()
    assert not by_id(page, "crit-advance").is_selected()
    by_id(page, "lab-advance").click()  # focus stays on the checkbox
    assert by_id(page, "crit-advance").is_selected()  # one setting for both panels
    first = by_id(page, "lab-where").text
    press(page, "1")
    assert by_id(page, "lab-progress").text.startswith("1 chosen here")
    assert by_id(page, "lab-where").text != first  # advanced
    # In the criterion panel, 1 labels no pair; p chooses PASS there.
    by_id(page, "crit-prompt").click()
    press(page, "1")
    assert by_id(page, "lab-progress").text.startswith("1 chosen here")
    press(page, "p")
    assert by_id(page, "crit-progress").text == "1 chosen here"
    assert by_id(page, "crit-position").text == "answer 2 of 4"  # advanced: one setting
    # Back in the blind pairs, p and f leave the criteria alone.
    by_id(page, "lab-prompt").click()
    press(page, "f")
    assert by_id(page, "crit-progress").text == "1 chosen here"
    press(page, "3")
    assert by_id(page, "lab-progress").text.startswith("2 chosen here")
    # Unticked in the criterion panel: unticked in the blind one at once, and after a reload.
    by_id(page, "crit-advance").click()
    assert not by_id(page, "lab-advance").is_selected()
    page.refresh()
    assert not by_id(page, "lab-advance").is_selected()
    assert not by_id(page, "crit-advance").is_selected()


def test_on_a_phone_the_choices_stay_within_reach_and_the_next_pair_starts_on_screen(
    page: Any, tmp_path: Path
) -> None:
    long = "The parcel left our depot on Monday and should arrive within two days. " * 12
    pairs = [
        pair_doc(f"c{i}", baseline_text=long + "base", candidate_text=long + "cand")
        for i in range(3)
    ]
    target = tmp_path / "report.html"
    target.write_text(render_html(report_doc(False), pairs), "utf-8")
    open_file(page, target)
    page.execute_script("localStorage.clear()")
    page.refresh()
    at_width(page, 390, 844)
    page.execute_script("document.getElementById('lab-top').scrollIntoView()")
    by_id(page, "lab-advance").click()

    def rect(element_id: str) -> dict[str, float]:
        return page.execute_script(
            f"return document.getElementById('{element_id}').getBoundingClientRect().toJSON()"
        )

    button = rect("choose-A")
    assert button["top"] >= 0 and button["bottom"] <= 844  # within reach, not 1,095 px down
    screenshot(page, "phone-labelling.png")
    by_id(page, "choose-A").click()
    assert by_id(page, "lab-position").text == "pair 2 of 3"
    for element_id in ("lab-position", "lab-where"):
        top = rect(element_id)["top"]
        assert 0 <= top < 844, (element_id, top)
    assert rect("choose-B")["bottom"] <= 844
    screenshot(page, "phone-labelling-next.png")


def test_on_a_phone_the_cases_are_cards_showing_outcome_model_and_verdict(
    page: Any, tmp_path: Path
) -> None:
    open_file(page, rich_page(tmp_path, cases=10))
    at_width(page, 390, 844)
    page.execute_script("document.getElementById('cases-table').scrollIntoView()")
    wrap = page.execute_script(
        "var w = document.querySelector('#cases .table-wrap');return [w.scrollWidth, w.clientWidth]"
    )
    assert wrap[0] <= wrap[1]  # no sideways scrolling
    cells = page.execute_script(
        "var row = document.querySelectorAll('#cases-body tr')[1];"
        "return Array.from(row.children).filter(td => td.offsetWidth > 0).map(td => {"
        " var r = td.getBoundingClientRect();"
        " return {label: td.getAttribute('data-label'), text: td.innerText,"
        " left: r.left, right: r.right}; })"
    )
    seen = {c["label"]: c for c in cells}
    assert {"outcome", "model", "judge"} <= set(seen)
    for name in ("outcome", "model", "judge"):
        assert seen[name]["left"] >= 0 and seen[name]["right"] <= 390
    assert seen["model"]["text"].startswith("openai/gpt-4.1-mini")
    assert seen["judge"]["text"] == "flip"  # case 0 flips (every seventh)
    label = page.execute_script(
        "return getComputedStyle(document.querySelector('#cases-body td'), '::before').content"
    )
    assert label == '"task: "'  # each field named
    screenshot(page, "phone-cases-cards.png")


# axe-core ---------------------------------------------------------------------------------
SEVERE = ("serious", "critical")


def axe_severe(page: Any) -> list[dict[str, Any]]:
    try:
        from axe_selenium_python import Axe
    except ImportError:
        unavailable("axe-selenium-python is missing (pip install axe-selenium-python)")
    axe = Axe(page)
    axe.inject()
    results = axe.run()
    return [
        {"id": v["id"], "impact": v["impact"], "nodes": [n["target"] for n in v["nodes"]][:5]}
        for v in results["violations"]
        if v.get("impact") in SEVERE
    ]


def test_axe_finds_no_serious_or_critical_violation_on_any_view_at_390_and_1280(
    page: Any, tmp_path: Path
) -> None:
    (tmp_path / "rich").mkdir()
    rich = rich_page(tmp_path / "rich", cases=12)
    panels = two_panel_page(tmp_path)
    suite_dir = tmp_path / "suite" / "small"
    run = suite_dir / "20261130T000000.000Z-run"
    run.mkdir(parents=True)
    (run / "report.json").write_text(json.dumps(report_doc(False)))
    index = suite_dir / "index.html"
    index.write_text(suite_index_html(suite_dir, compare_run_folders), "utf-8")

    def views() -> Any:
        open_file(page, rich)
        yield "page"
        page.find_element("css selector", "#cases-body tr").click()
        for box in ("case-diff", "case-raw"):
            by_id(page, box).click()
        yield "case"
        by_id(page, "case-markdown").click()
        by_id(page, "choose-A").click()  # the judge's verdict opens
        yield "labelling"
        open_file(page, panels)
        by_id(page, "crit-PASS").click()
        yield "criteria"
        open_file(page, index)
        yield "index"

    found: dict[str, list[dict[str, Any]]] = {}
    for width in (390, 1280):
        at_width(page, width)
        for name in views():
            severe = axe_severe(page)
            if severe:
                found[f"{name}@{width}"] = severe
            screenshot(page, f"axe-{name}-{width}.png", full=True)
    assert found == {}, json.dumps(found, indent=1)
