"""A case's details in report.html (issue 32): the call's figures with a truncated answer
marked, the stored records (redacted as the run folder is), JSON pretty-printed, Markdown as
text or rendered without running anything, bidi controls isolated, and the filtered view
exported as CSV and JSON.

One browser for the module (the fixtures of test_report_browser); skipped without Chromium,
chromedriver or selenium, except under CI=true.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from pytest_evalmine.reports.files import atomic_write
from pytest_evalmine.reports.html_page import html_pieces, render_html

from . import test_report_browser as browser
from .test_report_browser import by_id, open_file, screenshot
from .test_report_html import answer_doc, pair_doc, report_doc, run_docs

# The browser fixtures, one driver for this module.
driver, page = browser.driver, browser.page
KEY = "sk-proj-" + "Q7w9E2r4T6y8U1i3O5p7A9s2"  # a provider key's shape: redacted on write


def detailed_answers() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    base = answer_doc("c1", "fake/alpha", '{"label": "billing", "urgent": true, "tags": [1, 2]}')
    cand = answer_doc("c1", "fake/beta", "...Change update data cust", passed=False)
    for row, tokens in ((base, (120, 14)), (cand, (118, 64))):
        row.update(
            finish_reason="stop" if row is base else "length",
            tokens={
                "input_tokens": tokens[0],
                "output_tokens": tokens[1],
                "cached_input_tokens": 0,
                "cache_write_tokens": 0,
            },
            key="ab" * 32,
            provider_request_id=f"req-{KEY}",
            usage_anomaly=None,
            parsed={"label": "billing"},
        )
    pair = pair_doc(baseline_text=base["text"], candidate_text=cand["text"])
    pair["passes"][0].update(candidate_verdict="better", cached=False, cost_usd=0.0004)
    return [pair], [base, cand]


def test_a_cases_details_show_the_call_the_truncation_and_the_stored_records_redacted(
    page: Any, tmp_path: Path
) -> None:
    pairs, answers = detailed_answers()
    target = tmp_path / "report.html"
    atomic_write(target, html_pieces(report_doc(False), pairs, answers))  # as a run writes it
    assert KEY not in target.read_text("utf-8")
    open_file(page, target)
    outcomes = page.execute_script(
        "return Array.from(document.querySelectorAll('#cases-body td[data-label=outcome]'))"
        ".map(td => td.textContent)"
    )
    assert outcomes == ["passed", "failed (truncated)"]
    page.find_element("css selector", "#cases-body tr").click()
    calls = [e.text for e in page.find_elements("css selector", "#case-answers .call")]
    assert calls == [
        "tokens in 120, out 14; finish stop; latency 250 ms; cost $0.0012",
        "tokens in 118, out 64; finish length; latency 250 ms; cost $0.0012 "
        "TRUNCATED at max_tokens: the answer is cut off",
    ]
    shown = page.find_elements("css selector", "#case-answers .answer-text")
    # JSON pretty-printed; the cut answer as it came
    assert shown[0].get_attribute("textContent") == json.dumps(
        json.loads(answers[0]["text"]), indent=2
    )
    assert shown[1].get_attribute("textContent") == answers[1]["text"]
    assert by_id(page, "case-prompt").text == "Classify this"  # the full rendered prompt
    assert page.find_elements("css selector", "#case-detail details.raw") == []
    by_id(page, "case-raw").click()
    raw = [
        json.loads(e.get_attribute("textContent"))
        for e in page.find_elements("css selector", "#case-detail .raw-json")
    ]
    assert len(raw) == 3  # each answer, then the judge's passes
    for stored, row in zip(raw[:2], answers, strict=True):
        expected = {k: v for k, v in row.items() if v is not None and k != "parsed"}
        expected["provider_request_id"] = "req-[redacted]"  # as the run folder holds it
        assert stored == expected
    assert raw[2] == [
        {k: v for k, v in p.items() if v is not None} for p in pairs[0]["passes"]
    ]  # the judge's raw verdicts, reasons included
    screenshot(page, "case-details.png", element="case-detail")


def test_markdown_is_text_by_default_and_its_rendered_view_runs_nothing(
    page: Any, tmp_path: Path
) -> None:
    text = (
        "# Reply\n\nThanks, **we are on it** and *soon* `done`.\n\n- first\n- second "
        '<img src=x onerror="window.pwned=1">\n\n<script>window.pwned=2</script>\n'
        "[click](javascript:window.pwned=3)\n\n```\n<b>code</b>\n```"
    )
    answers = [answer_doc("c1", "fake/alpha", text), answer_doc("c1", "fake/beta", "plain")]
    target = tmp_path / "report.html"
    target.write_text(render_html(report_doc(False), [pair_doc()], answers), "utf-8")
    open_file(page, target)
    page.find_element("css selector", "#cases-body tr").click()
    box = page.find_element("css selector", "#case-answers .answer-text")
    assert box.get_attribute("textContent") == text  # as text by default
    by_id(page, "case-markdown").click()
    box = page.find_element("css selector", "#case-answers .answer-text")
    tags = page.execute_script(
        "return Array.from(document.querySelectorAll('#case-answers .answer-text *'))"
        ".map(e => e.tagName.toLowerCase())"
    )
    assert {"h4", "strong", "em", "code", "ul", "li", "pre"} <= set(tags)
    assert not {"img", "script", "a", "b"} & set(tags)
    assert box.find_element("css selector", "strong").text == "we are on it"
    rendered = box.get_attribute("textContent")
    assert '<img src=x onerror="window.pwned=1">' in rendered and "<b>code</b>" in rendered
    assert "click (javascript:window.pwned=3)" in rendered  # a link is text, never followed
    for link in box.find_elements("css selector", ".md-link"):
        link.click()
    assert page.execute_script("return window.pwned === undefined")
    assert page.execute_script("return document.scripts.length") == 2
    screenshot(page, "case-markdown.png", element="case-detail")


def text_left(page: Any, selector: str, needle: str) -> float:
    """The left edge of ``needle``'s first character inside ``selector``, as laid out."""
    return page.execute_script(
        "var root = document.querySelector(arguments[0]), needle = arguments[1];"
        "var walk = document.createTreeWalker(root, NodeFilter.SHOW_TEXT), node;"
        "while ((node = walk.nextNode())) { var at = node.data.indexOf(needle);"
        " if (at >= 0) { var r = document.createRange(); r.setStart(node, at);"
        " r.setEnd(node, at + 1); return r.getBoundingClientRect().left; } }"
        "return null;",
        selector,
        needle,
    )


def test_bidi_controls_in_names_and_answers_stay_inside_their_own_text(
    page: Any, tmp_path: Path
) -> None:
    model = "fake/\u202eevil"  # RIGHT-TO-LEFT OVERRIDE: reverses what follows it
    answers = [
        answer_doc("c1", model, "abc \u202e def"),
        answer_doc("c1", "fake/beta", "plain"),
    ]
    pair = pair_doc(baseline=model)
    target = tmp_path / "report.html"
    target.write_text(render_html(report_doc(False), [pair], answers), "utf-8")
    open_file(page, target)
    page.find_element("css selector", "#cases-body tr").click()
    heading = "#case-answers .case-answer h4"
    # "passed" follows the model's name on the line, left to right, not drawn before it
    assert text_left(page, heading, "passed") > text_left(page, heading, "fake")
    judge = "#case-judge h4"
    assert text_left(page, judge, ": win") > text_left(page, judge, " vs ")
    assert page.execute_script(
        "return getComputedStyle(document.querySelector('#case-answers .answer-text')).unicodeBidi"
    ) in ("isolate", "plaintext", "isolate-override")
    names = page.execute_script(
        "return Array.from(document.querySelectorAll('#case-detail bdi')).map(b => b.textContent)"
    )
    assert model in names
    screenshot(page, "case-bidi.png", element="case-detail")


def blob_text(page: Any, button: str) -> str:
    """The text of the file the button downloads: the Blob handed to createObjectURL."""
    page.execute_script(
        "window.exportedBlobs = []; var make = URL.createObjectURL;"
        "URL.createObjectURL = function (b) { window.exportedBlobs.push(b); return make(b); };"
    )
    by_id(page, button).click()
    return page.execute_async_script(
        "var done = arguments[arguments.length - 1];window.exportedBlobs[0].text().then(done);"
    )


def test_the_filtered_view_exports_as_csv_and_json(page: Any, tmp_path: Path) -> None:
    pairs, answers = run_docs(30)
    answers[3]["text"] = '=HYPERLINK("x"), with "quotes"\nand a line'
    target = tmp_path / "report.html"
    target.write_text(render_html(report_doc(False), pairs, answers), "utf-8")
    open_file(page, target)
    page.execute_script("location.hash = '#cases?model=fake%2Fbeta&sort=score&dir=desc'")
    page.refresh()
    assert by_id(page, "cases-count").text == "30 of 60 answers"
    beta = sorted((a for a in answers if a["model"] == "fake/beta"), key=lambda a: -a["score"])
    rows = list(csv.DictReader(io.StringIO(blob_text(page, "export-csv"), newline="")))
    assert [r["case"] for r in rows] == [a["case"] for a in beta]  # all pages, shown order
    assert rows[0]["model"] == "fake/beta" and float(rows[0]["score"]) == beta[0]["score"]
    assert rows[0]["checks_passed"] + "/" + rows[0]["checks"] in ("1/1", "0/1")
    odd = next(r for r in rows if r["case"] == answers[3]["case"])
    assert odd["text"] == "'" + answers[3]["text"]  # no formula runs in a spreadsheet
    exported = json.loads(blob_text(page, "export-json"))
    assert len(exported) == 30 and exported[0]["text"] == beta[0]["text"]
    assert {e["model"] for e in exported} == {"fake/beta"}
    assert abs(exported[0]["score"] - beta[0]["score"]) < 1e-9
