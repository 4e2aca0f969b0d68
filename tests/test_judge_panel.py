"""A panel of judges end to end on the fake adapter (spec: "Judge panel"): three fake jurors,
one biased to slot 1, one agreeing with the labels, one noisy."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from .conftest import latest_report, newest_run_dir

CASES = "\n".join(
    f'      - {{id: case-{n:02d}, vars: {{text: "Message number {n}: no refunds, sorry."}}}}'
    for n in range(16)
)
PANEL_SUITE = f"""\
version: 1
suite: panel
models: [fake/alpha, fake/beta]
defaults: {{max_tokens: 400, temperature: 0}}
judge:
  panel: [fake/judge-slot1, fake/judge-longer, fake/judge-noisy]
  vote: majority
  calibration: {{min_kappa: 0.4, min_labels: 10, min_pairs: 3}}
tasks:
  - id: polite
    kind: rewrite
    prompt: "Rewrite politely: {{{{ text }}}}"
    cases:
{CASES}
"""


def hand_kappa(ratings: list[tuple[str, str]]) -> float:
    """Cohen's kappa written out again, independently of stats.estimators."""
    n = len(ratings)
    observed = sum(a == b for a, b in ratings) / n
    categories = {c for pair in ratings for c in pair}
    chance = sum(
        (sum(a == c for a, _ in ratings) / n) * (sum(b == c for _, b in ratings) / n)
        for c in categories
    )
    return (observed - chance) / (1 - chance)


def run_pairs(root: Path) -> list[dict]:
    lines = (newest_run_dir(root, "panel") / "pairs.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def longer_answer_labels(pairs: Iterable[dict[str, Any]]) -> str:
    """A ``labels:`` section for PANEL_SUITE over the pairs.jsonl rows ``pairs``: each
    preferring the longer answer, as fake/judge-longer does."""
    labels = []
    for p in pairs:
        base, cand = len(p["baseline_text"]), len(p["candidate_text"])
        prefer = "candidate" if cand > base else "baseline" if base > cand else "tie"
        labels.append(
            f"  - {{task: polite, case: {p['case']}, baseline: fake/alpha, "
            f"candidate: fake/beta, prefer: {prefer}}}"
        )
    return "labels:\n" + "\n".join(labels) + "\n"


def test_panel_of_three_fake_jurors_end_to_end(pytester: pytest.Pytester) -> None:
    suite = pytester.makefile(".eval.yaml", panel=PANEL_SUITE)
    first = pytester.runpytest("--evalmine-fake")
    assert first.ret == 0, first.stdout.str()
    report = latest_report(pytester.path, "panel")["headline"]
    pairs = run_pairs(pytester.path)
    judged = [p for p in pairs if p["excluded"] is None]
    assert len(judged) == 16
    # every juror judged every pair in both orders: 3 x 16 x 2 calls
    assert report["judge_calls"]["made"] == 3 * 16 * 2
    assert all(len(p["jurors"]) == 3 for p in judged)
    labels = longer_answer_labels(judged)
    suite.write_text(PANEL_SUITE + labels)

    second = pytester.runpytest("--evalmine-fake")
    assert second.ret == 0, second.stdout.str()
    headline = latest_report(pytester.path, "panel")["headline"]
    assert headline["judge_calls"]["made"] == 0  # every verdict cached
    panel = headline["panel"]
    rows = {row["juror"]: row for row in panel["jurors"]}
    assert panel["position_biased"] == ["fake/judge-slot1"]
    assert rows["fake/judge-slot1"]["position_bias"]["slot_1_share"] == 1.0
    assert rows["fake/judge-slot1"]["flip_rate"] == 1.0
    assert "fake/judge-slot1" in panel["disagree_with_labels"]
    assert "fake/judge-longer" in panel["agree_with_labels"]
    assert rows["fake/judge-longer"]["calibration"]["kappa"] == pytest.approx(1.0)
    # The panel's kappa: its majority verdicts (pairs.jsonl) against the labels, by hand.
    pairs = run_pairs(pytester.path)
    by_case = {p["case"]: p for p in pairs}
    wanted = {
        line.split("case: ")[1].split(",")[0]: line.rsplit(" ", 1)[1][:-1]
        for line in labels.splitlines()[1:]
    }
    ratings = [(wanted[case], by_case[case]["panel"]["verdict"]) for case in wanted]
    assert headline["calibration"]["kappa"] == pytest.approx(hand_kappa(ratings), abs=1e-9)
    assert headline["calibration"]["n"] == 16
    # the gain over the best juror (fake/judge-longer, kappa 1) is the panel's kappa - 1
    gain = panel["gain_over_best_juror"]
    assert panel["best_juror"] == "fake/judge-longer"
    assert gain["difference"] == pytest.approx(hand_kappa(ratings) - 1.0, abs=1e-9)
    assert gain["interval"]["low"] <= gain["difference"] <= gain["interval"]["high"] + 1e-9
    # the cheapest passing choice is one juror alone: fake/judge-longer
    assert panel["cheapest_passing"]["jurors"] == ["fake/judge-longer"]
    report_md = (newest_run_dir(pytester.path, "panel") / "report.md").read_text()
    assert "juror fake/judge-slot1: does NOT agree" in report_md
    assert "POSITION-BIASED" in report_md
    assert f"panel kappa {headline['calibration']['kappa']:.2f}" in report_md
    # report.html: the panel's section, a row per juror, the biased juror named
    page = (newest_run_dir(pytester.path, "panel") / "report.html").read_text()
    section = page.split('<section id="panel">')[1].split("</section>")[0]
    assert section.count("<tr>") == 1 + 3  # the header and one row per juror
    assert "Position-biased jurors: fake/judge-slot1</strong>" in section
    assert "Jurors that do NOT agree with your labels: " in section
    assert "fake/judge-slot1" in section.split("do NOT agree with your labels: ")[1]
    assert f"panel kappa {headline['calibration']['kappa']:.2f}" in section
    assert "100.0% slot 1; POSITION-BIASED" in section
    assert "http://" not in section and "https://" not in section  # self-contained
    # old single-judge fields stay: the judge is named as the panel
    assert headline["judge"]["jurors"] == [
        "fake/judge-slot1",
        "fake/judge-longer",
        "fake/judge-noisy",
    ]


@pytest.mark.parametrize(
    ("judge", "where", "message"),
    [
        ("{panel: [fake/a]}", "$.judge.panel", "a panel needs at least 2 jurors (1 given)"),
        ("{panel: [fake/a, fake/b, fake/a]}", "$.judge.panel[2]", "juror 'fake/a' is listed twice"),
        ("{panel: [fake/a, fake/b], vote: mean}", "$.judge.vote", "unknown vote rule 'mean'"),
    ],
)
def test_bad_panels_are_refused_at_their_key(
    tmp_path: Path, judge: str, where: str, message: str
) -> None:
    from pytest_evalmine.errors import SuiteError
    from pytest_evalmine.suite.loader import load_suite

    path = tmp_path / "s.eval.yaml"
    path.write_text(
        PANEL_SUITE.replace(PANEL_SUITE.split("judge:\n")[1].split("tasks:")[0], "").replace(
            "judge:\n", f"judge: {judge}\n"
        )
    )
    with pytest.raises(SuiteError) as error:
        load_suite(path)
    assert where in str(error.value) and message in str(error.value)


def test_task_panel_is_checked_and_used(tmp_path: Path) -> None:
    from pytest_evalmine.errors import SuiteError
    from pytest_evalmine.judging.panel import jurors_by_task
    from pytest_evalmine.suite.loader import load_suite

    path = tmp_path / "s.eval.yaml"
    text = PANEL_SUITE.replace(
        "    kind: rewrite\n", "    kind: rewrite\n    judge: {panel: [fake/x, fake/y]}\n"
    )
    path.write_text(text)
    assert jurors_by_task(load_suite(path)) == {"polite": ("fake/x", "fake/y")}
    assert jurors_by_task(load_suite(path), ("fake/q", "fake/r")) == {
        "polite": ("fake/q", "fake/r")
    }
    path.write_text(text.replace("[fake/x, fake/y]", "[fake/x]"))
    with pytest.raises(SuiteError, match=r"\$\.tasks\[0\]\.judge\.panel"):
        load_suite(path)


def test_reference_answer_in_prompt_and_fingerprint(tmp_path: Path) -> None:
    from pytest_evalmine.judging.judge import judge_record, judge_request, judge_text_chars
    from pytest_evalmine.judging.pairs import BASELINE_FIRST, Pair
    from pytest_evalmine.suite.loader import load_suite

    (tmp_path / "ref.txt").write_text("We cannot refund, but here is what we can do.")
    path = tmp_path / "s.eval.yaml"
    plain = PANEL_SUITE
    path.write_text(plain)
    before = load_suite(path)
    with_ref = plain.replace(
        "{id: case-00, vars:", "{id: case-00, reference: {file: ref.txt}, vars:"
    ).replace("{id: case-01, vars:", '{id: case-01, reference: "Sorry: no refunds.", vars:')
    path.write_text(with_ref)
    after = load_suite(path)
    assert after.case("polite", "case-00").reference_answer.startswith("We cannot refund")
    answers = {"fake/alpha": "A", "fake/beta": "B"}
    for case, shown in (("case-00", "We cannot refund"), ("case-01", "Sorry: no refunds.")):
        pair = Pair("panel", "polite", case, "fake/alpha", "fake/beta")
        request = judge_request("fake/j", after, pair, BASELINE_FIRST, answers)
        assert "## Reference answer" in request.prompt and shown in request.prompt
        chars = judge_text_chars(after, pair, 2)
        assert chars == len(request.system) + len(request.prompt)
        old = judge_request("fake/j", before, pair, BASELINE_FIRST, answers)
        assert "Reference answer" not in old.prompt
    untouched = Pair("panel", "polite", "case-05", "fake/alpha", "fake/beta")
    assert (
        judge_request("fake/j", after, untouched, BASELINE_FIRST, answers).prompt
        == judge_request("fake/j", before, untouched, BASELINE_FIRST, answers).prompt
    )
    assert judge_record(before, "fake/j").reference_hash is None
    changed = with_ref.replace("Sorry: no refunds.", "Sorry: no refunds at all.")
    path.write_text(changed)
    assert (
        judge_record(after, "fake/j").reference_hash
        != judge_record(load_suite(path), "fake/j").reference_hash
    )
    path.write_text(
        plain.replace("{id: case-00, vars:", "{id: case-00, reference: {file: ../x.txt}, vars:")
    )
    from pytest_evalmine.errors import SuiteError

    with pytest.raises(SuiteError, match=r"reference\.file"):
        load_suite(path)


def test_kappa_difference_matches_hand_computation_and_is_paired() -> None:
    from pytest_evalmine.stats.agreement import kappa_difference

    human = ["candidate", "baseline", "tie", "candidate", "baseline"] * 6
    first = list(human)
    first[0] = "tie"
    second = ["candidate", "candidate", "tie", "baseline", "baseline"] * 6
    triples = list(zip(human, first, second, strict=True))
    result = kappa_difference(triples, seed=7, resamples=4000)
    expected = hand_kappa(list(zip(human, first, strict=True))) - hand_kappa(
        list(zip(human, second, strict=True))
    )
    assert result.difference == pytest.approx(expected, abs=1e-12)
    assert result.interval.low < expected < result.interval.high
    assert result.interval.low > 0  # clearly better on the same labels
    # the same rater on both sides: every draw's difference is 0
    same = kappa_difference([(h, f, f) for h, f, _ in triples], seed=7, resamples=500)
    assert same.interval.low == pytest.approx(0.0, abs=1e-12)
    assert same.interval.high == pytest.approx(0.0, abs=1e-12)
