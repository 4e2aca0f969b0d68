"""Binary judges' numbers (spec: "Binary judges"): pass rates per criterion and all-pass per
model, each criterion's judge calibrated on the held-out test split of human labels, and the
Rogan-Gladen corrected pass rate. Pure core: verdicts and the suite in, one result out."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..stats.misclassification import CorrectedRate, rogan_gladen
from ..stats.ppi import PPIEstimate, ppi_mean
from ..stats.proportions import Proportion
from ..stats.sampling import in_hash_sample
from ..suite.model import CriterionLabel, Suite
from .criteria import FAIL, PASS, CriterionVerdict, criteria_record, criterion_texts

# The share of cases whose labels measure the judge; the rest (the dev split) are for a
# person tuning the criterion's wording, and never enter these numbers.
TEST_FRACTION = 0.5
SPLIT_HASH = "sha256(task \\x1f case), first 8 hex digits as an integer < 0.5 x 2^32"
UNCALIBRATED = "UNCALIBRATED"
# The fewest test-split labels of one model for its PPI pass rate to be a headline, as for the
# preference judge's audit sample (judging/audit.py).
PPI_MIN_LABELS = 20


def in_test_split(task: str, case: str) -> bool:
    """A case's labels are test labels when the hash of its id falls in the lower half: the
    split never depends on the labels, the judge or the run, so it cannot be tuned."""
    return in_hash_sample(TEST_FRACTION, task, case)


@dataclass
class CriterionCalibration:
    """One criterion's judge against the test-split human labels (pooled over models: the
    judge sees one answer alone, never which model wrote it)."""

    task: str
    criterion: str
    labels: int  # every label of this criterion
    test_labels: int  # matched to a usable verdict, in the test split
    dev_labels: int  # matched, in the dev split (not used)
    unmatched: int  # no usable verdict for the labelled answer in this run
    labels_by_model: dict[str, int]
    pass_recall: Proportion  # judge PASS among human PASS (TPR)
    fail_recall: Proportion  # judge FAIL among human FAIL (TNR)
    reasons: list[str] = field(default_factory=list)

    @property
    def eligible(self) -> bool:
        return not self.reasons

    @property
    def youden(self) -> float | None:
        tpr, tnr = self.pass_recall.value, self.fail_recall.value
        return None if tpr is None or tnr is None else tpr + tnr - 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "criterion": self.criterion,
            "labels": self.labels,
            "test_labels": self.test_labels,
            "dev_labels": self.dev_labels,
            "unmatched_labels": self.unmatched,
            "labels_by_model": self.labels_by_model,
            "pass_recall": self.pass_recall.to_dict(),
            "fail_recall": self.fail_recall.to_dict(),
            "youden": self.youden,
            "eligible": self.eligible,
            "ineligible_reasons": self.reasons,
        }


@dataclass
class CriterionRate:
    """One model's pass rate on one criterion, raw and corrected for the judge's errors."""

    model: str
    task: str
    criterion: str
    pass_rate: Proportion
    no_verdict: dict[str, int]  # status -> answers without a usable verdict
    corrected: CorrectedRate | None
    eligible: bool
    # Prediction-powered pass rate (spec: "Prediction-powered estimates"): the judge's verdict
    # on every answer with one, corrected by this model's test-split human labels (the test
    # split is a hash sample of cases, so those labels are a random sample of them).
    ppi: PPIEstimate | None = None

    @property
    def ppi_eligible(self) -> bool:
        return self.ppi is not None and self.ppi.labels >= PPI_MIN_LABELS

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "task": self.task,
            "criterion": self.criterion,
            "pass_rate": self.pass_rate.to_dict(),
            "no_verdict": self.no_verdict,
            "corrected": self.corrected.to_dict() if self.corrected else None,
            "eligible": self.eligible,
            "flag": None if self.eligible else UNCALIBRATED,
            "ppi": self.ppi.to_dict() if self.ppi else None,
            "ppi_eligible": self.ppi_eligible,
        }


@dataclass
class AllPassRate:
    """One model's answers that passed every criterion of their task, over the answers with
    a usable verdict on each."""

    model: str
    rate: Proportion
    incomplete: int  # answers some criterion has no usable verdict for
    eligible: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "all_pass": self.rate.to_dict(),
            "incomplete_answers": self.incomplete,
            "eligible": self.eligible,
            "flag": None if self.eligible else UNCALIBRATED,
        }


@dataclass
class BinaryJudging:
    judge: dict[str, str]
    verdicts: list[CriterionVerdict]
    calibrations: list[CriterionCalibration]
    rates: list[CriterionRate]
    all_pass: list[AllPassRate]
    min_labels_per_class: int
    min_recall: float
    # task -> criterion name -> its text, and the suite's criterion labels, for report.html's
    # criterion labelling (which shows a labelled answer's label and never offers a second).
    criterion_texts: dict[str, dict[str, str]] = field(default_factory=dict)
    human_labels: list[CriterionLabel] = field(default_factory=list)

    def calls_made(self) -> int:
        return sum(1 for v in self.verdicts if v.reached_server)

    def calls_cached(self) -> int:
        return sum(1 for v in self.verdicts if v.cached)

    def with_status(self, status: str) -> int:
        return sum(1 for v in self.verdicts if v.status == status)

    @property
    def cost_usd(self) -> float:
        return sum(v.cost_usd for v in self.verdicts)

    @property
    def cost_if_uncached_usd(self) -> float:
        return sum(v.cost_if_uncached_usd for v in self.verdicts)

    @property
    def possibly_billed_usd(self) -> float:
        return sum(v.possibly_billed_usd for v in self.verdicts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "judge": self.judge,
            "verdicts": {
                "total": len(self.verdicts),
                "by_status": dict(sorted(Counter(v.status for v in self.verdicts).items())),
            },
            "calls": {"made": self.calls_made(), "cached": self.calls_cached()},
            "cost": {
                "spent_usd": self.cost_usd,
                "if_uncached_usd": self.cost_if_uncached_usd,
                "possibly_billed_usd": self.possibly_billed_usd,
            },
            "test_split": {
                "fraction": TEST_FRACTION,
                "hash": SPLIT_HASH,
                "reads_this_run": 1,
            },
            "min_labels_per_class": self.min_labels_per_class,
            "min_recall": self.min_recall,
            "all_pass": [row.to_dict() for row in self.all_pass],
            "criteria": [row.to_dict() for row in self.rates],
            "calibration": [row.to_dict() for row in self.calibrations],
            "criterion_texts": self.criterion_texts,
            "criterion_labels": [
                {
                    "task": x.task,
                    "case": x.case,
                    "model": x.model,
                    "criterion": x.criterion,
                    "label": x.label,
                }
                for x in self.human_labels
            ],
        }


def binary_from_verdicts(
    suite: Suite, verdicts: Sequence[CriterionVerdict], models: Sequence[str], judge_model: str
) -> BinaryJudging:
    """Every number of the binary judges from their verdicts: after judging, and when a
    stored run is rendered again from its verdicts.jsonl. The test split's labels are read
    here, once."""
    usable = {(v.task, v.case, v.model, v.criterion): v.label for v in verdicts if v.label}
    by_criterion: dict[tuple[str, str, str], list[CriterionVerdict]] = {}
    for verdict in verdicts:
        by_criterion.setdefault((verdict.model, verdict.task, verdict.criterion), []).append(
            verdict
        )
    labels: dict[tuple[str, str], list[CriterionLabel]] = {}
    for label in suite.criterion_labels:
        labels.setdefault((label.task, label.criterion), []).append(label)
    calibrations = {
        (task.id, judge.name): calibrate_criterion(
            task.id,
            judge.name,
            labels.get((task.id, judge.name), []),
            usable,
            suite.judge.min_labels_per_class,
            suite.judge.min_recall,
        )
        for task in suite.tasks
        for judge in task.judges
    }  # fmt: skip
    rates = [
        _criterion_rate(
            model,
            task,
            criterion,
            by_criterion.get((model, task, criterion), []),
            calibrations[(task, criterion)],
        )
        for model in models
        for (task, criterion) in calibrations
    ]
    for rate in rates:
        rate.ppi = _ppi_pass_rate(
            by_criterion.get((rate.model, rate.task, rate.criterion), []),
            labels.get((rate.task, rate.criterion), []),
        )
    return BinaryJudging(
        judge=criteria_record(suite, judge_model),
        verdicts=list(verdicts),
        calibrations=list(calibrations.values()),
        rates=rates,
        all_pass=[_all_pass(model, verdicts, calibrations) for model in models],
        min_labels_per_class=suite.judge.min_labels_per_class,
        min_recall=suite.judge.min_recall,
        criterion_texts=criterion_texts(suite),
        human_labels=list(suite.criterion_labels),
    )


def calibrate_criterion(
    task: str,
    criterion: str,
    labels: Sequence[CriterionLabel],
    usable: dict[tuple[str, str, str, str], str],
    min_labels_per_class: int,
    min_recall: float,
) -> CriterionCalibration:
    matched = [
        (label, usable[(label.task, label.case, label.model, label.criterion)])
        for label in labels
        if (label.task, label.case, label.model, label.criterion) in usable
    ]
    test = [(label, judge) for label, judge in matched if in_test_split(label.task, label.case)]
    human_pass = [judge for label, judge in test if label.label == PASS]
    human_fail = [judge for label, judge in test if label.label == FAIL]
    calibration = CriterionCalibration(
        task=task,
        criterion=criterion,
        labels=len(labels),
        test_labels=len(test),
        dev_labels=len(matched) - len(test),
        unmatched=len(labels) - len(matched),
        labels_by_model=dict(sorted(Counter(label.model for label in labels).items())),
        pass_recall=Proportion(human_pass.count(PASS), len(human_pass)),
        fail_recall=Proportion(human_fail.count(FAIL), len(human_fail)),
    )
    for name, recall in (("PASS", calibration.pass_recall), ("FAIL", calibration.fail_recall)):
        interval = recall.interval
        if recall.n < min_labels_per_class:
            calibration.reasons.append(
                f"{recall.n} test-split human {name} label(s), fewer than {min_labels_per_class}"
            )
        elif interval is not None and interval.low < min_recall:
            calibration.reasons.append(
                f"{name} recall's lower bound {interval.low:.2f} is below {min_recall:.2f}"
            )
    return calibration


def _criterion_rate(
    model: str,
    task: str,
    criterion: str,
    own: Sequence[CriterionVerdict],
    calibration: CriterionCalibration,
) -> CriterionRate:
    """``own``: the model's verdicts on this criterion."""
    labels = [v.label for v in own if v.label]
    passed = labels.count(PASS)
    tpr, tnr = calibration.pass_recall, calibration.fail_recall
    return CriterionRate(
        model=model,
        task=task,
        criterion=criterion,
        pass_rate=Proportion(passed, len(labels)),
        no_verdict=dict(sorted(Counter(v.status for v in own if not v.label).items())),
        corrected=rogan_gladen(passed, len(labels), tpr.successes, tpr.n, tnr.successes, tnr.n),
        eligible=calibration.eligible,
    )


def _ppi_pass_rate(
    own: Sequence[CriterionVerdict], labels: Sequence[CriterionLabel]
) -> PPIEstimate | None:
    """The model's pass rate from the judge's verdicts (1 PASS, 0 FAIL) on its answers and the
    test-split human labels of those answers; the dev split's labels, chosen to tune the
    wording, stay out."""
    verdict = {(v.task, v.case): v.label for v in own if v.label}
    labelled = [
        (
            1.0 if label.label == PASS else 0.0,
            1.0 if verdict[(label.task, label.case)] == PASS else 0.0,
        )
        for label in labels
        if (label.task, label.case) in verdict
        and own
        and label.model == own[0].model
        and in_test_split(label.task, label.case)
    ]
    return ppi_mean(labelled, [1.0 if v == PASS else 0.0 for v in verdict.values()])


def _all_pass(
    model: str,
    verdicts: Sequence[CriterionVerdict],
    calibrations: dict[tuple[str, str], CriterionCalibration],
) -> AllPassRate:
    by_answer: dict[tuple[str, str], list[str | None]] = {}
    for verdict in verdicts:
        if verdict.model == model:
            by_answer.setdefault((verdict.task, verdict.case), []).append(verdict.label)
    complete = [labels for labels in by_answer.values() if None not in labels]
    tasks = {task for task, _case in by_answer}
    return AllPassRate(
        model=model,
        rate=Proportion(sum(all(x == PASS for x in labels) for labels in complete), len(complete)),
        incomplete=len(by_answer) - len(complete),
        eligible=all(
            calibration.eligible
            for (task, _criterion), calibration in calibrations.items()
            if task in tasks
        ),
    )
