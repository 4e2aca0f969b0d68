"""report.html's grid view (cases x contenders) in a real browser (Debian's chromium, driven
by selenium; skipped without them, failing in CI): a row per task x case, a column per
contender, the list view's filters, search and sort, a row opened by click or Enter, a
phone's width, and 4,000 answers a page of rows at a time. Screenshots under
artifacts/screenshots/."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pytest_evalmine.reports.html_page import render_html

from . import test_report_browser
from .test_report_browser import (
    at_width,
    by_id,
    open_file,
    press,
    record_timing,
    screenshot,
)
from .test_report_html import answer_doc, report_doc, run_docs

# The browser and its page, the fixtures of test_report_browser.
driver = test_report_browser.driver
page = test_report_browser.page
VARIANT = "fake/beta@terse-with-a-long-variant-name"


def grid_page(tmp_path: Path, cases: int = 300) -> tuple[Path, list[dict[str, Any]]]:
    """``cases`` judged cases of fake/alpha and fake/beta, and a variant answering the even
    ones (passing every third of them)."""
    pairs, answers = run_docs(cases)
    for i in range(0, cases, 2):
        answers.append(
            answer_doc(
                f"case-{i:05d}", VARIANT, f"terse {i}", task=f"task-{i % 3}",
                passed=i % 3 == 0, score=0.5,
            )
        )  # fmt: skip
    report = report_doc(False)
    report["models"] = ["fake/alpha", "fake/beta", VARIANT]
    target = tmp_path / "report.html"
    target.write_text(render_html(report, pairs, answers), "utf-8")
    return target, answers


def grid_rows(page: Any) -> list[list[str]]:
    return page.execute_script(
        "return Array.from(document.querySelectorAll('#grid-body tr')).map(tr => "
        "Array.from(tr.children).map(c => Array.from(c.children).map(s => s.textContent)"
        ".join(' | ') || c.textContent))"
    )


def test_the_grid_shows_a_row_per_case_and_a_column_per_contender(
    page: Any, tmp_path: Path
) -> None:
    target, _ = grid_page(tmp_path)
    open_file(page, target)
    assert not by_id(page, "grid-wrap").is_displayed()
    by_id(page, "view-grid").click()
    assert by_id(page, "grid-wrap").is_displayed()
    assert not by_id(page, "cases-table").is_displayed()
    assert by_id(page, "view-grid").get_attribute("aria-pressed") == "true"
    assert by_id(page, "cases-count").text == "300 of 300 cases (750 of 750 answers)"
    assert by_id(page, "cases-page").text == "page 1 of 3"
    heads = [th.text for th in page.find_elements("css selector", "#grid-head th")]
    assert heads == ["task / case", "fake/alpha (baseline)", "fake/beta", VARIANT]
    rows = grid_rows(page)
    assert len(rows) == 100
    # case 0: beta fails its check (every fourth) and the pair flips (every seventh)
    assert rows[0] == [
        "task-0 | case-00000",
        "passed | score 1.00, checks 1/1 | baseline",
        "failed | score 0.00, checks 0/1 | judge: flip",
        "passed | score 0.50, checks 1/1 | judge: not judged",
    ]
    assert (
        rows[1][3] == "no answer" and rows[1][2] == "passed | score 0.00, checks 1/1 | judge: win"
    )

    # The list's filters: a case is a row when one of its answers matches.
    by_id(page, "f-failed").click()
    failing = {i for i in range(300) if i % 4 == 0} | {i for i in range(0, 300, 2) if i % 3}
    assert by_id(page, "cases-count").text.startswith(f"{len(failing)} of 300 cases")
    assert page.execute_script("return location.hash").startswith("#cases?failed=1&view=grid")
    by_id(page, "f-failed").click()
    by_id(page, "f-differ").click()  # different outcomes only
    differ = {i for i in range(300) if i % 4 == 0 or (i % 2 == 0 and i % 3)}
    assert by_id(page, "cases-count").text.startswith(f"{len(differ)} of 300 cases")
    by_id(page, "f-differ").click()
    by_id(page, "f-search").send_keys("terse 12")
    assert by_id(page, "cases-count").text == "6 of 300 cases (6 of 750 answers)"  # 12, 120..128
    assert grid_rows(page)[0][1].endswith("baseline")  # unmatched answers shown, dimmed
    assert page.find_elements("css selector", "#grid-body td.dim")
    by_id(page, "f-search").clear()
    by_id(page, "f-search").send_keys(" ")
    by_id(page, "f-search").clear()
    assert by_id(page, "cases-count").text.startswith("300 of 300 cases")

    # Sort: a contender's header orders the cases by its answer's score, then the other way.
    beta = page.find_element("css selector", '#grid-head th[data-by="fake/beta"]')
    beta.click()
    assert beta.get_attribute("aria-sort") == "ascending"
    assert grid_rows(page)[0][0] == "task-0 | case-00000"  # beta's score i / 300
    beta.click()
    assert grid_rows(page)[0][0] == "task-2 | case-00299"
    page.find_element("css selector", '#grid-head th[data-sort="case"]').click()
    assert grid_rows(page)[0][0] == "task-0 | case-00000"
    by_id(page, "cases-next").click()
    assert grid_rows(page)[0][0] == "task-1 | case-00100"
    by_id(page, "cases-prev").click()

    # A click opens the case; so does Enter on a row reached with Tab.
    page.find_element("css selector", "#grid-body tr:nth-child(3)").click()
    assert by_id(page, "case-detail").is_displayed()
    assert by_id(page, "case-title").text == "task-2 / case-00002"
    by_id(page, "case-close").click()
    by_id(page, "view-grid").click()  # focus on the switch, then Tab through the headers
    for _ in range(8):
        press(page, "\ue004")  # Tab
        if page.execute_script("return document.activeElement.parentNode.id") == "grid-body":
            break
    assert page.execute_script("return document.activeElement.getAttribute('data-case')") == "0"
    press(page, "\ue004")
    press(page, "\ue007")  # Enter on the second row
    assert by_id(page, "case-title").text == "task-1 / case-00001"
    page.refresh()  # the view lives in the hash
    assert by_id(page, "grid-wrap").is_displayed()
    screenshot(page, "grid-1280.png", element="cases")
    by_id(page, "view-list").click()
    assert by_id(page, "cases-count").text == "750 of 750 answers"
    assert by_id(page, "cases-table").is_displayed() and not by_id(page, "grid-wrap").is_displayed()


def test_the_grid_on_a_phone_scrolls_inside_its_box_with_the_case_column_in_view(
    page: Any, tmp_path: Path
) -> None:
    target, _ = grid_page(tmp_path, cases=30)
    open_file(page, target)
    by_id(page, "view-grid").click()
    for width in (390, 768, 1280):
        at_width(page, width)
        inner = page.execute_script("return window.innerWidth")
        assert page.execute_script("return document.documentElement.scrollWidth") <= inner
        box = page.execute_script(
            "var w = document.getElementById('grid-wrap'); var r = w.getBoundingClientRect();"
            "return [w.scrollWidth, w.clientWidth, r.right]"
        )
        assert box[2] <= inner
        if width == 390:
            assert box[0] > box[1]  # the contenders scroll sideways, inside the grid
            left = page.execute_script(
                "var w = document.getElementById('grid-wrap'); w.scrollLeft = 400;"
                "return [w.scrollLeft, w.getBoundingClientRect().left,"
                " document.querySelector('#grid-body tr th').getBoundingClientRect().left]"
            )
            assert left[0] > 0 and abs(left[2] - left[1]) < 1.5  # the case column stays put
        screenshot(page, f"grid-{width}.png", element="cases")
        page.execute_script("document.getElementById('grid-wrap').scrollLeft = 0")


def test_four_thousand_answers_in_the_grid_a_page_of_rows_at_a_time(
    page: Any, tmp_path: Path
) -> None:
    pairs, answers = run_docs(2000)
    target = tmp_path / "report.html"
    target.write_text(render_html(report_doc(False), pairs, answers), "utf-8")
    open_file(page, target)
    started = time.perf_counter()
    by_id(page, "view-grid").click()
    switch_s = time.perf_counter() - started
    assert by_id(page, "cases-count").text == "2000 of 2000 cases (4000 of 4000 answers)"
    assert len(page.find_elements("css selector", "#grid-body tr")) == 100
    assert by_id(page, "cases-page").text == "page 1 of 20"
    started = time.perf_counter()
    by_id(page, "f-failed").click()
    filter_s = time.perf_counter() - started
    assert by_id(page, "cases-count").text == "500 of 2000 cases (500 of 4000 answers)"
    in_page_ms = page.execute_script(
        "var t = performance.now(); window.evalmineCases.apply(); return performance.now() - t"
    )
    record_timing(
        "grid_4000_answers",
        {
            "page_bytes": target.stat().st_size,
            "switch_via_webdriver_s": round(switch_s, 3),
            "filter_via_webdriver_s": round(filter_s, 3),
            "render_in_page_ms": round(in_page_ms, 2),
        },
    )
