"""Cached answers after a price change (spec: "Scorecard", cost if uncached): "if uncached"
is what the calls would cost made now, their tokens at today's price table, not the cost
recorded when they were paid; when the two differ the report says which it prints and gives
the recorded one."""

from __future__ import annotations

import json

import pytest

from pytest_evalmine.adapters.base import Usage
from pytest_evalmine.reports.render import money
from pytest_evalmine.run.prices import load_prices

from .conftest import SMALL_SUITE

# A user's price table that makes the fake models free: the first run is recorded at $0.
FREE = "models:\n  - {model: fake/*, input: 0, output: 0}\n"


def run(pytester: pytest.Pytester, *flags: str) -> tuple[str, dict, list[dict]]:
    result = pytester.runpytest("--evalmine-fake", "-p", "no:cacheprovider", *flags)
    result.assert_outcomes(passed=6)
    [run_dir] = sorted((pytester.path / "reports" / "small").glob("2*"))[-1:]
    report = json.loads((run_dir / "report.json").read_text())
    rows = [json.loads(line) for line in (run_dir / "answers.jsonl").read_text().splitlines()]
    # The summary's lines joined as one text: a wrapped line reads as it was written.
    return " ".join(" ".join(result.outlines).split()), report, rows


def cost_now(row: dict) -> float:
    """The answer's tokens at the shipped table's price, computed here from answers.jsonl."""
    price = load_prices(None).lookup(row["model"])
    return price.cost(Usage(**row["tokens"]))


def test_cached_answers_are_priced_at_todays_table(pytester: pytest.Pytester) -> None:
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    pytester.makefile(".yaml", free=FREE)
    _, first, _ = run(pytester, "--evalmine-prices=free.yaml")
    assert first["cost"]["spent_usd"] == 0 and first["cost"]["if_uncached_usd"] == 0

    # The table changed (the user's free rows gone): the same answers, all from the cache.
    text, warm, rows = run(pytester)
    assert warm["calls"] == {"made": 0, "cached": 6}
    expected = sum(cost_now(row) for row in rows)
    assert expected > 0
    for row in rows:
        assert row["cached"] and row["recorded_cost_usd"] == 0
        assert row["cost_if_uncached_usd"] == pytest.approx(cost_now(row), rel=1e-9)
    cost = warm["cost"]
    assert cost["spent_usd"] == 0
    assert cost["if_uncached_usd"] == pytest.approx(expected, rel=1e-9)
    assert cost["if_uncached_recorded_usd"] == 0
    assert f"{money(expected)} if uncached at today's prices (recorded $0.0000)" in text
    page = pytester.path / "reports" / "small" / warm["run_id"] / "report.md"
    assert "if uncached at today's prices (recorded $0.0000)" in page.read_text()


def test_answers_paid_this_run_have_one_figure(pytester: pytest.Pytester) -> None:
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    text, report, rows = run(pytester)
    cost = report["cost"]
    assert cost["if_uncached_usd"] > 0
    assert cost["if_uncached_usd"] == pytest.approx(cost["if_uncached_recorded_usd"], rel=1e-9)
    assert cost["if_uncached_usd"] == pytest.approx(sum(cost_now(row) for row in rows), rel=1e-9)
    assert all(row["recorded_cost_usd"] is None for row in rows)
    assert "at today's prices" not in text
    assert f"{money(cost['if_uncached_usd'])} if uncached (answers and judge)" in text
