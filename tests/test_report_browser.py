"""report.html and the pytest-html page in a real browser (Debian's chromium, driven by selenium).

Skipped when chromium, chromedriver or selenium is missing, except in CI (``CI=true``), where
a missing browser fails instead: CI installs it. Each test leaves a screenshot under
``artifacts/screenshots/`` (kept by CI). Timings are printed and written to
``artifacts/browser-timings.json``, never asserted.
"""

from __future__ import annotations

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
from .test_judge_run import SMALL_SUITE
from .test_report_html import HOSTILE, pair_doc, report_doc

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
    """The browser; after the test, a screenshot named after it."""
    yield driver
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SCREENSHOTS / f"{request.node.name}.png"))


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
    assert copied.startswith("labels:\n  - {task: ")

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
    target = tmp_path / "report.html"
    target.write_text(render_html(report_doc(False, candidate=hostile), [pair]), "utf-8")
    open_file(page, target)
    by_id(page, "choose-A").click()  # reveals the judge's reason too
    assert page.execute_script("return window.pwned === undefined")
    assert page.execute_script("return document.querySelectorAll('#labelling b, img').length") == 0
    for element_id in ("lab-prompt", "lab-a", "lab-b"):
        assert by_id(page, element_id).get_attribute("textContent") == hostile
    assert hostile in by_id(page, "lab-judge-body").get_attribute("textContent")
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
