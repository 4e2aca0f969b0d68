"""The "Power" figures (spec: "Power and planning"): what a suite of this size can detect and
what a named question needs, from a run's own numbers (report.json ``power``, the report's
"Power" section) or before a run (``evalmine plan``, from the suite's previous run or stated
assumptions). The arithmetic is ``stats.power``; this module picks its inputs and words."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..stats import power as pw
from ..stats.estimators import CATEGORIES
from ..stats.resample import KAPPA_PSEUDO_COUNT_PER_CELL

# The section's title; ``sections`` and ``html_page`` build it from ``power_lines``.
TITLE = "Power"

ALL_PASS, SCORE = "all_pass", "score"
METRIC_WORDS = {ALL_PASS: "all checks pass", SCORE: "checker score"}


@dataclass(frozen=True)
class Assumptions:
    """What the figures assume where no run measured it; a field the user gave (``given``)
    wins over a measured one. Deltas and half-widths in points (x 100)."""

    discordance: float = 0.20  # share of cases passing for one model only
    agreement: float = 0.70  # share of labels where the judge agrees with people
    delta_points: float = 5.0  # the delta the user wants detected
    power: float = pw.POWER
    alpha: float = pw.ALPHA
    half_width_points: float = 10.0  # the PPI interval wanted, on a pass rate
    rho: float = 0.5  # correlation of the judge's verdict with the human label
    outcome_variance: float = 0.25  # Var(Y) of the audited outcome: p(1-p) at its widest
    floor_precision: float = 0.25  # the noise floor known to +-25 %
    given: frozenset[str] = frozenset()

    def wins(self, name: str) -> bool:
        return name in self.given


def _kappa_table(
    calibration: dict[str, Any] | None, shares: Sequence[float], assume: Assumptions
) -> tuple[list[list[float]], str]:
    """The judge-human table to plan with: the measured confusion plus the kappa
    interval's own pseudo-labels (1/9 per cell, so perfect agreement on a few labels does
    not plan on zero variance), else the assumed agreement at the labels' shares."""
    matrix = ((calibration or {}).get("confusion") or {}).get("matrix")
    if matrix and sum(map(sum, matrix)) > 0 and not assume.wins("agreement"):
        table = [[cell + KAPPA_PSEUDO_COUNT_PER_CELL for cell in row] for row in matrix]
        return table, "observed"
    return pw.agreement_table(assume.agreement, shares), "assumed"


def _paired_rows(
    paired: Sequence[dict[str, Any]],
    cases: int,
    candidates: Sequence[tuple[str, str]],
    assume: Assumptions,
) -> list[dict[str, Any]]:
    alpha, power = assume.alpha, assume.power
    delta = assume.delta_points / 100
    rows = []
    measured = {(c.get("baseline"), c.get("candidate"), c.get("metric")): c for c in paired}
    for baseline, candidate in candidates:
        for metric in (ALL_PASS, SCORE):
            entry = measured.get((baseline, candidate, metric))
            n = (entry or {}).get("cases") or cases
            row: dict[str, Any] = {
                "baseline": baseline,
                "candidate": candidate,
                "metric": metric,
                "cases": n,
                "delta_points": assume.delta_points,
            }
            if metric == ALL_PASS:
                if entry and entry.get("cases") and not assume.wins("discordance"):
                    p = (entry["worse"] + entry["better"]) / entry["cases"]
                    row.update(discordance=p, source="observed")
                else:
                    row.update(discordance=assume.discordance, source="assumed")
                # A run where no case changed measured no discordance: plan on the
                # assumption rather than on "nothing can be detected".
                if row["discordance"] == 0:
                    row.update(discordance=assume.discordance, source="assumed")
                p = row["discordance"]
                mde = pw.paired_binary_mde(n, p, alpha, power)
                needed = pw.paired_binary_cases(delta, p, alpha, power)
            else:
                interval = (entry or {}).get("interval")
                if not entry or not interval or not entry.get("cases"):
                    continue  # no assumption for a score's spread: only a run measures it
                sd = pw.sd_from_interval(
                    interval["low"], interval["high"], n, alpha, entry.get("delta")
                )
                row.update(sd=sd, source="observed")
                mde = pw.paired_continuous_mde(n, sd, alpha, power)
                needed = pw.paired_continuous_cases(delta, sd, alpha, power)
            row.update(mde_points=None if mde is None else 100 * mde, cases_for_delta=needed)
            rows.append(row)
    return rows


def power_figures(
    *,
    cases: int,
    repeats: int,
    candidates: Sequence[tuple[str, str]],
    paired: Sequence[dict[str, Any]] = (),
    calibration: dict[str, Any] | None = None,
    judged: bool = False,
    min_kappa: float | None = None,
    labels: int = 0,
    label_shares: Sequence[float] = (),
    source: str = "assumed",
    assume: Assumptions = Assumptions(),
) -> dict[str, Any]:
    """report.json's ``power``: see the spec's "Power and planning" for every field."""
    alpha, power = assume.alpha, assume.power
    figures: dict[str, Any] = {
        "alpha": alpha,
        "power": power,
        "source": source,
        "cases": cases,
        "repeats": repeats,
        "paired": _paired_rows(paired, cases, candidates, assume),
        "kappa": None,
        "ppi": None,
    }
    if judged and min_kappa is not None:
        shares = label_shares if sum(label_shares) > 0 else [1.0] * len(CATEGORIES)
        if calibration and (calibration.get("confusion") or {}).get("matrix"):
            matrix = calibration["confusion"]["matrix"]
            shares = [sum(row) for row in matrix] if sum(map(sum, matrix)) else shares
        table, kappa_source = _kappa_table(calibration, shares, assume)
        found = pw.kappa_and_variance(table)
        have = (calibration or {}).get("n", labels)
        figures["kappa"] = {
            "min_kappa": min_kappa,
            "kappa": found[0] if found else None,
            "agreement": sum(table[i][i] for i in range(len(table))) / sum(map(sum, table)),
            "source": kappa_source,
            "labels": have,
            "labels_needed": pw.kappa_labels(table, min_kappa, alpha, power),
        }
        # Each candidate's estimate has its own pairs (one per case), not all candidates'.
        per_estimate = cases
        half_width = assume.half_width_points / 100
        needed = pw.ppi_labels_within(
            half_width, assume.outcome_variance, assume.rho, per_estimate, alpha
        )
        figures["ppi"] = {
            "half_width_points": assume.half_width_points,
            "outcome_variance": assume.outcome_variance,
            "rho": assume.rho,
            "judged": per_estimate,
            "labels_needed": needed,
            "labels_only": pw.ppi_labels_within(
                half_width, assume.outcome_variance, 0.0, per_estimate, alpha
            ),
            "half_width_all_labelled_points": 100
            * pw.ppi_half_width(per_estimate, assume.outcome_variance, 0.0, 0, alpha)
            if per_estimate >= pw.PPI_FEWEST_LABELS
            else None,
        }
    figures["noise_floor"] = {
        "precision": assume.floor_precision,
        "precision_now": pw.floor_precision(cases, repeats, alpha),
        "repeats_needed": pw.floor_repeats(cases, assume.floor_precision, alpha),
    }
    return figures


def power_from_report(
    report: dict[str, Any],
    *,
    models: Sequence[str] | None = None,
    label_shares: Sequence[float] = (),
    min_kappa: float | None = None,
    judged: bool | None = None,
    assume: Assumptions = Assumptions(),
    source: str | None = None,
) -> dict[str, Any]:
    """The figures from a report.json (this run's, or a previous run's for ``evalmine
    plan``): its cases, repeats, paired comparisons and calibration."""
    chosen = list(models or report.get("models") or [])
    candidates = [(chosen[0], m) for m in chosen[1:]]
    paired = report.get("paired") or []
    cases = max([c.get("cases") or 0 for c in paired] or [0]) or _cases(report)
    calibration = (report.get("headline") or {}).get("calibration")
    return power_figures(
        cases=cases,
        repeats=int(report.get("repeats") or 1),
        candidates=candidates,
        paired=paired,
        calibration=calibration,
        judged=calibration is not None if judged is None else judged,
        min_kappa=(calibration or {}).get("min_kappa", min_kappa),
        labels=sum((report.get("suite") or {}).get("label_counts", {}).values()),
        label_shares=label_shares,
        source=source or f"run {report.get('run_id')}",
        assume=assume,
    )


def _cases(report: dict[str, Any]) -> int:
    """Cases (task x case) of a run: its items over models and repeats."""
    models = len(report.get("models") or []) or 1
    return int(report.get("items") or 0) // (models * int(report.get("repeats") or 1))


def summary_power(summary: Any) -> dict[str, Any]:
    """This run's own figures, as report.json's ``power``, from its ``RunSummary`` (not
    imported: the summary imports this module)."""
    headline = summary.headline
    calibration = headline.calibration.to_dict() if headline else None
    return power_figures(
        cases=len({(r.task, r.case) for r in summary.records}),
        repeats=summary.repeats,
        candidates=[(summary.models[0], m) for m in summary.models[1:]],
        paired=[c.to_dict() for c in summary.paired],
        calibration=calibration,
        judged=calibration is not None,
        min_kappa=(calibration or {}).get("min_kappa"),
        source=f"run {summary.run_id}",
    )


def with_assumptions(assume: Assumptions, **given: Any) -> Assumptions:
    """``assume`` with the values the user gave (None: not given) marked as winning."""
    chosen = {name: value for name, value in given.items() if value is not None}
    return dataclasses.replace(assume, **chosen, given=frozenset(chosen))


# words ------------------------------------------------------------------------------------
def _pts(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} pts"


def _pct(value: float) -> str:
    return f"{100 * value:.0f} %"


def power_lines(power: dict[str, Any]) -> list[str]:
    """The section's lines, from report.json's ``power`` (a stored run says the same)."""
    lines = [
        f"at {_pct(power['power'])} power and {_pct(1 - power['alpha'])} confidence, from "
        f"{power['source']}; {power['cases']} cases x {power['repeats']} repeat(s)"
    ]
    for row in power.get("paired") or []:
        what = METRIC_WORDS.get(row["metric"], row["metric"])
        if row["metric"] == ALL_PASS:
            spread = f"discordance {_pct(row['discordance'])} ({row['source']})"
        else:
            spread = f"per-case sd {row['sd']:.3f} ({row['source']})"
        needed = row["cases_for_delta"]
        wanted = (
            f"{row['delta_points']:.1f} pts needs {needed} cases"
            if needed is not None
            else f"{row['delta_points']:.1f} pts cannot be reached at this discordance"
        )
        smallest = (
            f"smallest detectable delta {_pts(row['mde_points'])}"
            if row["mde_points"] is not None
            else "no delta is detectable at this discordance and size"
        )
        lines.append(
            f"{row['candidate']} vs {row['baseline']}, {what}: {row['cases']} cases, {spread}: "
            f"{smallest}; {wanted}"
        )
    if not power.get("paired"):
        lines.append("one model: no paired delta to detect")
    kappa = power.get("kappa")
    if kappa:
        needed = kappa["labels_needed"]
        value = "-" if kappa["kappa"] is None else f"{kappa['kappa']:.2f}"
        clears = (
            f"{needed} labels for the kappa interval's lower end to clear {kappa['min_kappa']:.2f}"
            if needed is not None
            else f"no number of labels clears {kappa['min_kappa']:.2f} at this agreement"
        )
        lines.append(
            f"calibration: agreement {_pct(kappa['agreement'])}, kappa {value} "
            f"({kappa['source']}): {clears} (the suite has {kappa['labels']})"
        )
    ppi = power.get("ppi")
    if ppi:
        lines.append(_ppi_line(ppi))
    floor = power["noise_floor"]
    now = floor["precision_now"]
    measured = "unknown now (one repeat)" if now is None else f"+-{_pct(now)} now"
    lines.append(
        f"noise floor: {measured}; +-{_pct(floor['precision'])} needs "
        f"{floor['repeats_needed']} repeats (--evalmine-repeat)"
    )
    return lines


def _ppi_line(ppi: dict[str, Any]) -> str:
    wanted = (
        f"audit labels for a +-{ppi['half_width_points']:.1f} pts PPI interval on a pass rate, "
        f"{ppi['judged']} judged items per estimate (correlation {ppi['rho']:.2f}, variance "
        f"{ppi['outcome_variance']:.2f}, assumed): "
    )
    if ppi["labels_needed"] is None:
        best = ppi["half_width_all_labelled_points"]
        reach = "" if best is None else f"; labelling all of them gives +-{best:.1f} pts"
        return wanted + f"unreachable with this suite (more cases are needed){reach}"
    alone = ppi["labels_only"]
    alone_words = "labels alone cannot" if alone is None else f"{alone} from labels alone"
    return wanted + f"{ppi['labels_needed']} with the judge, {alone_words}"
