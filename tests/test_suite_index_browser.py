"""reports/<suite>/index.html in a real browser (Debian's chromium, driven by selenium;
skipped without them, failing in CI): each run's name, figures and verdict, a trend chart per
figure, and "compare with the previous run" opening, inside the page, what ``evalmine
compare`` prints. Screenshots under artifacts/screenshots/."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_evalmine.commands.cli import main
from pytest_evalmine.engine.stored import StoredRun, comparison
from pytest_evalmine.reports.sections import changes_section

from . import test_report_browser
from .test_report_browser import JUDGED_NO_LABELS, at_width, by_id, open_file, screenshot

driver = test_report_browser.driver
page = test_report_browser.page


def words(text: str) -> str:
    return " ".join(text.split())


def test_the_index_lists_figures_trends_and_opens_the_comparison_with_the_previous_run(
    pytester: pytest.Pytester, page: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    pytester.makefile(".eval.yaml", small=JUDGED_NO_LABELS)
    suite_dir = pytester.path / "reports" / "small"
    for _ in range(3):
        assert pytester.runpytest("--evalmine-fake", "-p", "no:cacheprovider").ret == 0
        if len(list(suite_dir.glob("*/report.json"))) == 1:  # name the first run
            first = next(suite_dir.glob("*/report.json"))
            named = json.loads(first.read_text())
            named["run_name"] = "before the prompt change"
            first.write_text(json.dumps(named))
    runs = sorted(p.parent for p in suite_dir.glob("*/report.json"))
    assert len(runs) == 3
    reports = [json.loads((r / "report.json").read_text()) for r in runs]

    open_file(page, suite_dir / "index.html")
    heads = [th.text for th in page.find_elements("css selector", "#runs thead th")]
    assert heads == [
        "date (UTC)", "name", "run", "models", "pass rate", "kappa", "win rate", "spend",
        "verdict", "flags", "compare",
    ]  # fmt: skip
    rows = page.find_elements("css selector", "#runs tbody tr")
    cells = [[td.text for td in row.find_elements("css selector", "td")] for row in rows]
    assert [c[2] for c in cells] == [r.name for r in reversed(runs)]
    assert [c[1] for c in cells] == ["", "", "before the prompt change"]
    newest = reports[-1]
    passed = {row["model"]: (row["passed"], row["items"]) for row in newest["scorecard"]}
    assert cells[0][4] == "; ".join(
        f"{m} {100 * p / n:.1f}% ({p}/{n})" for m, (p, n) in passed.items()
    )
    calibration = newest["headline"]["calibration"]
    assert cells[0][5] == f"- ({calibration['status']})"  # no labels: no kappa
    rate = newest["headline"]["win_rates"][0]
    assert cells[0][6] == f"{rate['candidate']} {100 * rate['win_rate']:.1f}%\u2020 UNCALIBRATED"
    assert cells[0][7].startswith("$") and cells[0][8] == "UNCALIBRATED"
    assert cells[0][10] == "compare with the previous run" and cells[2][10] == ""

    # A trend chart per figure, a point per run that has the figure; none is fetched.
    figures = page.find_elements("css selector", "#trends figure")
    assert [f.get_attribute("data-figure") for f in figures] == [
        "pass rate", "kappa", "win rate", "spend",
    ]  # fmt: skip
    points = page.execute_script(
        "return Array.from(document.querySelectorAll('#trends figure')).map(f => "
        "[f.querySelectorAll('circle').length, f.querySelectorAll('circle.flagged').length])"
    )
    assert points == [[3 * len(passed), 0], [0, 0], [3, 3], [3, 0]]
    assert "no run has this figure" in figures[1].text

    # The comparison opens inside the page: the lines `evalmine compare` prints.
    section_id = f"compare-{runs[-1].name}"
    assert not by_id(page, section_id).is_displayed()
    rows[0].find_element("css selector", "a.compare").click()
    assert by_id(page, section_id).is_displayed()
    assert page.execute_script("return location.hash") == f"#{section_id}"
    shown = words(by_id(page, section_id).text)
    capsys.readouterr()
    assert main(["compare", "--rootdir", str(pytester.path), runs[1].name, runs[2].name]) == 0
    printed = words(capsys.readouterr().out)
    assert f"What changed since {runs[1].name}" in shown and "case by case: A = run" in shown
    section = changes_section(comparison(StoredRun(runs[1]), StoredRun(runs[2])))
    lines = [words(line) for line in section.lines + section.detail_lines]
    assert len(lines) >= 4
    for line in lines:  # each line the command prints, on the page
        assert line in printed and line in shown
    screenshot(page, "suite-index-compare.png", element=section_id)
    rows = page.find_elements("css selector", "#runs tbody tr")
    for width in (390, 768, 1280):
        at_width(page, width)
        inner = page.execute_script("return window.innerWidth")
        assert page.execute_script("return document.documentElement.scrollWidth") <= inner
        screenshot(page, f"suite-index-{width}.png", full=True)


def test_the_pytest_html_page_links_to_report_html_which_says_where_that_page_is(
    pytester: pytest.Pytester, page: Any
) -> None:
    pytester.makefile(".eval.yaml", small=JUDGED_NO_LABELS)
    html_args = ("--html=pages/out.html", "--self-contained-html", "-p", "html")
    assert pytester.runpytest("--evalmine-fake", "-p", "no:cacheprovider", *html_args).ret == 0
    run_dir = next((pytester.path / "reports" / "small").glob("*/report.json")).parent
    open_file(page, pytester.path / "pages" / "out.html")
    link = page.find_element("css selector", ".evalmine-summary a.evalmine-report")
    assert link.get_attribute("href").endswith(f"/reports/small/{run_dir.name}/report.html")
    link.click()
    assert page.current_url.endswith(f"/{run_dir.name}/report.html")
    assert by_id(page, "verdict").is_displayed()
    # The way back leaves the run folder: the page says an archive of it alone lacks it.
    note = by_id(page, "pytest-html-note").text
    assert "outside this run folder" in note and "../../../pages/out.html" in note
    screenshot(page, "report-links-pytest-html.png")
