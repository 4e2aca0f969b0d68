"""The ``compare`` tool: run B against run A (spec: "Compare"), rounded as ``evalmine compare``
prints it, case by case without answers.
"""

from __future__ import annotations

from typing import Annotated, Any

from ...errors import EvalmineError
from .base import ToolBase
from .limits import Field, OutsideRoot
from .records import (
    CaseGroupDigest,
    Comparison,
    CrossRunDigest,
    CrossRunMetricDigest,
    CrossRunModelDigest,
    Refusal,
    TaskChange,
    WinRatesSideBySide,
    refusal,
)
from .rounding import dollars, kappa, low_high, points, seconds, share


class CompareTool(ToolBase):
    """What changed from one stored run to another."""

    def compare(
        self,
        run_a: Annotated[
            str,
            Field(
                description="the earlier run: a run id, a run name (NAME, NAME~K), a run "
                "folder or its report.json"
            ),
        ],
        run_b: Annotated[
            str,
            Field(
                description="the later run: a run id, a run name (NAME, NAME~K), a run "
                "folder or its report.json"
            ),
        ],
        models: Annotated[
            list[str] | None,
            Field(
                description="which models to compare case by case: 'M' (a model of both runs) "
                "or 'A=M1,B=M2' (M1 of run_a against M2 of run_b, e.g. another build); "
                "default every model both runs have"
            ),
        ] = None,
        allow_other_suite: Annotated[
            bool,
            Field(
                description="pair runs of two different suites by their task and case ids "
                "(refused otherwise)"
            ),
        ] = False,
        by: Annotated[
            str | None,
            Field(
                description="also each metric's paired delta per group of cases by this "
                "field: a key of the cases' vars, task or gold (read from the runs' suite "
                "file); a field no case has is bad_request naming the fields there are"
            ),
        ] = None,
    ) -> Comparison | Refusal:
        """What changed from run_a to run_b (run ids, run folders or report.json paths):
        cost, latency, calibration, win-rate movements (same suite) or task changes, and each
        model case by case over the cases both runs answered, even when the suite changed:
        each run's score, the paired delta with its interval, worse and better cases, the
        share of changed answers, the noise floor and the verdict in words."""
        from ...engine.stored import cases_between
        from ...reports.compare import compare

        try:
            before, after = self._find(run_a), self._find(run_b)
            changes = compare(after.report(), before.report())
        except OutsideRoot as exc:
            return refusal("path_outside_root", str(exc))
        except EvalmineError as exc:
            return refusal("not_found", str(exc))
        try:
            cases = cases_between(
                before, after, models or (), allow_other_suite, by, self.limits.root
            )
        except EvalmineError as exc:
            return refusal("bad_request", str(exc))
        return Comparison(
            "ok", before.run_id, after.run_id, _rounded_changes(changes), _cross_run_digest(cases)
        )


def _rounded_changes(changes: dict[str, Any]) -> dict[str, Any]:
    """Compare's numbers (spec: "Compare") as its "What changed" section prints them."""
    cal = changes["calibration"]
    rounded = {
        **changes,
        "cost": {
            name: {key: dollars(value) for key, value in delta.items()}
            for name, delta in changes["cost"].items()
        },
        "latency": [
            {
                **row,
                "p50_change_s": seconds(row["p50_change_s"]),
                "p95_change_s": seconds(row["p95_change_s"]),
            }
            for row in changes["latency"]
        ],
        "calibration": {
            **cal,
            **{key: kappa(cal[key]) for key in ("kappa_now", "kappa_before", "kappa_change")},
        },
    }
    for moves in ("win_rate_movements", "movers"):
        if moves in changes:
            rounded[moves] = [
                {**m, **{key: share(m[key]) for key in ("now", "before", "change")}}
                for m in changes[moves]
            ]
    return rounded


def _cross_run_digest(cases: dict[str, Any]) -> CrossRunDigest:
    tasks = cases["tasks"]
    return CrossRunDigest(
        run_a=cases["run_a"],
        run_b=cases["run_b"],
        tasks_changed=[TaskChange(t["task"], t["fields"]) for t in tasks["changed"]],
        tasks_only_in_a=list(tasks["only_in_a"]),
        tasks_only_in_b=list(tasks["only_in_b"]),
        cases_only_in_a=len(cases["cases_only_in_a"]),
        cases_only_in_b=len(cases["cases_only_in_b"]),
        models=[_cross_run_model(pair) for pair in cases["models"]],
        win_rates=[
            WinRatesSideBySide(
                baseline=row["baseline"],
                candidate=row["candidate"],
                a_win_rate=share(row["a"]["win_rate"]),
                a_interval=low_high(row["a"]["interval"], share),
                a_headline_eligible=bool(row["a"]["headline_eligible"]),
                b_win_rate=share(row["b"]["win_rate"]),
                b_interval=low_high(row["b"]["interval"], share),
                b_headline_eligible=bool(row["b"]["headline_eligible"]),
            )
            for row in cases["win_rates"]
        ],
        note=cases["note"],
    )


def _cross_run_model(pair: dict[str, Any]) -> CrossRunModelDigest:
    changed = pair["changed_answers"]
    return CrossRunModelDigest(
        model_a=pair["model_a"],
        model_b=pair["model_b"],
        digest_a=(pair["build_a"] or {}).get("digest"),
        digest_b=(pair["build_b"] or {}).get("digest"),
        changed_answers=changed["successes"],
        changed_answers_of=changed["n"],
        changed_answers_share=share(changed["rate"]),
        changed_answers_interval=low_high(changed["interval"], share),
        excluded=dict(pair["excluded"]),
        metrics=[_cross_run_metric(m) for m in pair["metrics"]],
    )


def _cross_run_metric(m: dict[str, Any]) -> CrossRunMetricDigest:
    # A share prints as a percent, a mean checker score with two decimals.
    side = share if m["metric"] == "all_pass" else kappa
    floor, excess = m["noise_floor"], m["excess"] or {}
    return CrossRunMetricDigest(
        metric=m["metric"],
        verdict=m["verdict"],
        cases=m["cases"],
        observations=m["observations"],
        a_mean=side(m["a"]["mean"]),
        a_interval=low_high(m["a"]["interval"], side),
        b_mean=side(m["b"]["mean"]),
        b_interval=low_high(m["b"]["interval"], side),
        delta_points=points(m["delta"]),
        interval_points=low_high(m["interval"], points),
        worse=m["worse"],
        better=m["better"],
        same=m["same"],
        noise_floor_points=points(floor["floor"]),
        noise_floor_a_points=points(floor["a"]),
        noise_floor_b_points=points(floor["b"]),
        excess_points=points(excess.get("value")),
        excess_interval_points=low_high(excess.get("interval"), points),
        beyond_noise=m["beyond_noise"],
        excluded_cases=m["excluded_cases"],
        worse_cases=[f"{e['task']}/{e['case']}" for e in m["worse_examples"]],
        better_cases=[f"{e['task']}/{e['case']}" for e in m["better_examples"]],
        groups=None
        if m.get("groups") is None
        else [
            CaseGroupDigest(
                value=g["value"],
                cases=g["cases"],
                a_mean=side(g["a_mean"]),
                b_mean=side(g["b_mean"]),
                delta_points=points(g["delta"]),
                interval_points=low_high(g["interval"], points),
                worse=g["worse"],
                better=g["better"],
                same=g["same"],
            )
            for g in m["groups"]
        ],
    )
