"""report.html at scale (issue 24): a page of N cases x 2 models, every pair judged, opened in
headless Chromium; prints the page's size, the time to write it, and in the browser the time
to load it and to filter, search, sort and open a case. Numbers for people (docs/benchmarks.md),
never thresholds in tests.

    python benchmarks/bench_report_page.py --cases 10000 --repeat 3

Needs Debian's chromium and chromedriver and selenium (tests/test_report_browser.py's set-up).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_evalmine.reports.files import atomic_write
from pytest_evalmine.reports.html_page import html_pieces

ANSWER = (
    "Thanks for reaching out. Your parcel left our depot on {day} and is with the courier; "
    "it should reach you within two working days. If it has not arrived by Friday, reply to "
    "this message with your order number and we will send a replacement at no cost. "
    "Order {i}: tracking is updated every few hours, so the status may lag a little. "
)


def run_files(cases: int) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """report.json's essentials, pairs.jsonl and answers.jsonl rows of a judged run: answers of
    about 400 characters, prompts of about 200, 20 tasks, a flip every 17th pair."""
    report = {
        "run_id": "20261201T000000.000Z_000000-aaaaaaaa-bbbbbbbb",
        "created_utc": "2026-12-01T00:00:00Z",
        "suite": {"name": "bench", "file": "bench.eval.yaml", "hash": "ab" * 32},
        "models": ["fake/alpha", "fake/beta"],
        "scorecard": [],
        "headline": {
            "judge": {"model": "fake/judge"},
            "headline_eligible": False,
            "calibration": {"status": "no_labels", "kappa": None, "n": 0, "min_labels": 3},
            "win_rates": [],
        },
    }
    pairs, answers = [], []
    for i in range(cases):
        task, case = f"task-{i % 20:02d}", f"case-{i:05d}"
        prompt = (
            f"Reply to the customer (order {i}): where is my parcel? It was due on Monday. " * 2
        )
        texts = {m: ANSWER.format(day=d, i=i) for m, d in (("alpha", "Monday"), ("beta", "Tue"))}
        checks = [
            {"name": "contains", "passed": i % 5 != 0, "message": "" if i % 5 else "no 'order'"}
        ]
        pairs.append(
            {
                "task": task, "case": case, "baseline": "fake/alpha", "candidate": "fake/beta",
                "excluded": None, "category": "candidate",
                "outcome": "flip" if i % 17 == 0 else "win",
                "flip": i % 17 == 0, "label": None, "prompt": prompt,
                "baseline_text": texts["alpha"], "candidate_text": texts["beta"],
                "baseline_checks": checks, "candidate_checks": checks,
                "passes": [
                    {"order": "baseline_first", "winner_slot": "2", "reason": "B is clearer."},
                    {"order": "candidate_first", "winner_slot": "1", "reason": "A is clearer."},
                ],
            }
        )  # fmt: skip
        for model in ("alpha", "beta"):
            answers.append(
                {
                    "task": task, "case": case, "model": f"fake/{model}", "repeat": 0,
                    "outcome": "passed" if i % 5 else "failed", "text": texts[model],
                    "checks": checks, "score": (i % 10) / 10, "cost_usd": 0.0002,
                    "latency_s": 0.3 + (i % 7) / 10,
                }
            )  # fmt: skip
    return report, pairs, answers


def measure(driver: Any, script: str, repeat: int) -> float:
    """The median of ``repeat`` in-page timings (ms) of ``script``, which returns one."""
    return statistics.median(driver.execute_script(script) for _ in range(repeat))


TIMED = "var t = performance.now(); {action}; return performance.now() - t;"
CHANGE = (
    "var e = document.getElementById('{id}'); e.value = {value};"
    "e.dispatchEvent(new Event('{event}'))"
)


def browser_figures(page: Path, repeat: int) -> dict[str, float]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--window-size=1300,1800"):
        options.add_argument(flag)
    driver = webdriver.Chrome(
        service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=options
    )
    try:
        loads = []
        for _ in range(repeat):
            driver.get(page.as_uri())
            loads.append(
                driver.execute_script(
                    "var n = performance.getEntriesByType('navigation')[0];"
                    "return [n.domContentLoadedEventEnd, n.loadEventEnd];"
                )
            )
        figures = {
            "load_dom_content_loaded_ms": statistics.median(x[0] for x in loads),
            "load_event_end_ms": statistics.median(x[1] for x in loads),
        }

        def change(element: str, value: str, event: str = "change") -> str:
            return TIMED.format(
                action=CHANGE.format(id=element, value=json.dumps(value), event=event)
            )

        figures["filter_task_ms"] = measure(driver, change("f-task", "task-07"), repeat)
        figures["filter_all_again_ms"] = measure(driver, change("f-task", ""), repeat)
        figures["search_first_ms"] = driver.execute_script(
            change("f-search", "order 9999)", "input")
        )
        figures["search_again_ms"] = measure(
            driver, change("f-search", "order 1234)", "input"), repeat
        )
        driver.execute_script(CHANGE.format(id="f-search", value='""', event="input"))
        sort = "document.querySelector('th[data-sort=\"score\"]').click()"
        figures["sort_score_ms"] = measure(driver, TIMED.format(action=sort), repeat)
        open_case = "document.querySelector('#cases-body tr').click()"
        figures["open_case_ms"] = measure(driver, TIMED.format(action=open_case), repeat)
        choose = "document.getElementById('choose-A').click()"
        figures["label_click_ms"] = measure(driver, TIMED.format(action=choose), repeat)
        return {key: round(value, 1) for key, value in figures.items()}
    finally:
        driver.quit()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, nargs="+", default=[10000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for cases in args.cases:
        report, pairs, answers = run_files(cases)
        with tempfile.TemporaryDirectory() as folder:
            page = Path(folder) / "report.html"
            started = time.perf_counter()
            atomic_write(page, html_pieces(report, pairs, answers))
            written_s = time.perf_counter() - started
            row = {
                "cases": cases,
                "answers": len(answers),
                "page_mb": round(page.stat().st_size / 1e6, 2),
                "write_s": round(written_s, 2),
                **browser_figures(page, args.repeat),
            }
        print(json.dumps(row))


if __name__ == "__main__":
    main()
