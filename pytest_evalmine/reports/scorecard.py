"""The per-model scorecard (spec: "Scorecard"): the one place these numbers are computed."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from ..run.records import ERROR, FAILED, NOT_RUN_BUDGET, PASSED, REPLAY_MISS, AnswerRecord
from ..stats.estimators import Interval, interval_dict, mean, percentile, seed_from
from ..stats.paired import noise_floor
from ..stats.proportions import Proportion
from ..stats.resample import Cluster, mean_interval


@dataclass(frozen=True)
class Rate:
    """passed / n with its Wilson interval (spec: "Statistics"); with repeats, the clustered
    Wilson interval over each case's answers."""

    passed: int
    n: int
    clusters: tuple[tuple[int, int], ...] = ()  # (passed, answers) per task x case

    @property
    def proportion(self) -> Proportion:
        return Proportion(self.passed, self.n, self.clusters)

    @property
    def value(self) -> float | None:
        return self.proportion.value

    def to_dict(self) -> dict[str, Any]:
        proportion = self.proportion.to_dict()
        return {
            "passed": self.passed,
            "n": self.n,
            "rate": self.value,
            "interval": proportion["interval"],
            **({"effective_n": proportion["effective_n"]} if "effective_n" in proportion else {}),
        }

    def __add__(self, other: Rate) -> Rate:
        return Rate(self.passed + other.passed, self.n + other.n, self.clusters + other.clusters)


def rate_over(
    records: Sequence[AnswerRecord], passed: Callable[[AnswerRecord], bool | None]
) -> Rate:
    """The rate of ``passed`` over the records where it is not None, the answers of one task
    x case (its repeats) grouped together."""
    groups: dict[tuple[str, str], list[int]] = {}
    for record in records:
        verdict = passed(record)
        if verdict is not None:
            group = groups.setdefault((record.task, record.case), [0, 0])
            group[0] += verdict
            group[1] += 1
    clusters = tuple((group[0], group[1]) for group in groups.values())
    return Rate(sum(c[0] for c in clusters), sum(c[1] for c in clusters), clusters)


@dataclass(frozen=True)
class ModelScore:
    model: str
    baseline: bool
    items: int
    passed: int
    failed: int
    errors: int
    not_run_budget: int
    replay_miss: int
    schema_native: Rate
    schema_prompted: Rate
    all_pass: Rate  # answers that arrived and passed every check
    checks: dict[str, Rate]  # per check name, over the answers it ran on
    latency_p50_s: float | None
    latency_p95_s: float | None
    latency_n: int
    cost_usd: float
    cost_if_uncached_usd: float
    cached: int
    cost_lower_bound: bool = False
    # The provider's capacity the latency was taken within: answers sent while it had more
    # calls out at once (its width probed past what it serves) measured its queue, not the
    # model. None: not known (latency over every answer).
    latency_width: int | None = None

    @property
    def schema_all(self) -> Rate:
        return self.schema_native + self.schema_prompted

    def to_dict(self) -> dict[str, Any]:
        # Field by field, not asdict: its deep copy walked every rate's clusters (one per
        # case) only for the rates to be replaced below: a quarter of building report.json.
        data = {field.name: getattr(self, field.name) for field in fields(self)}
        data["schema_native"] = self.schema_native.to_dict()
        data["schema_prompted"] = self.schema_prompted.to_dict()
        data["schema_all"] = self.schema_all.to_dict()
        data["all_pass"] = self.all_pass.to_dict()
        data["checks"] = {name: rate.to_dict() for name, rate in self.checks.items()}
        return data


def score_models(
    records: Sequence[AnswerRecord],
    models: Sequence[str],
    latency_widths: Mapping[str, int] | None = None,
) -> list[ModelScore]:
    """One row per model, baseline first. Schema rates count answers that arrived for tasks
    with a schema; a schema answer that fails to parse counts as a schema failure. Latency is
    over the answers sent at no more than the model's ``latency_widths`` (its provider's
    capacity; an answer of unknown width counts)."""
    scores = []
    for index, model in enumerate(models):
        mine = [r for r in records if r.model == model]
        answered = [r for r in mine if r.outcome in (PASSED, FAILED)]
        width = (latency_widths or {}).get(model)
        latencies = [
            r.latency_s
            for r in answered
            if r.latency_s is not None and (width is None or r.width is None or r.width <= width)
        ]
        scores.append(
            ModelScore(
                model=model,
                baseline=index == 0,
                items=len(mine),
                passed=sum(r.outcome == PASSED for r in mine),
                failed=sum(r.outcome == FAILED for r in mine),
                errors=sum(r.outcome == ERROR for r in mine),
                not_run_budget=sum(r.outcome == NOT_RUN_BUDGET for r in mine),
                replay_miss=sum(r.outcome == REPLAY_MISS for r in mine),
                schema_native=_schema_rate(answered, "native"),
                schema_prompted=_schema_rate(answered, "prompted"),
                all_pass=rate_over(answered, lambda r: r.outcome == PASSED),
                checks=_check_rates(answered),
                latency_p50_s=percentile(latencies, 0.50),
                latency_p95_s=percentile(latencies, 0.95),
                latency_n=len(latencies),
                cost_usd=sum(r.cost_usd for r in mine),
                cost_if_uncached_usd=sum(r.cost_if_uncached_usd for r in mine),
                cached=sum(r.cached for r in mine),
                cost_lower_bound=any(not r.usage_reported for r in answered),
                latency_width=width,
            )
        )
    return scores


def _schema_rate(answered: Sequence[AnswerRecord], mode: str) -> Rate:
    relevant = [r for r in answered if r.schema_mode == mode]
    return rate_over(relevant, lambda r: r.check_passed("schema") is True)


def _check_rates(answered: Sequence[AnswerRecord]) -> dict[str, Rate]:
    names = sorted({check["name"] for r in answered for check in r.checks})
    return {name: rate_over(answered, lambda r, name=name: r.check_passed(name)) for name in names}


@dataclass(frozen=True)
class TaskScore:
    """One model's checks on one task (``task`` None: over every task): pass rate with a
    Wilson interval, mean item score with a Bayesian bootstrap interval, both 95 %, over the
    items whose answer arrived and was scored (n)."""

    model: str
    task: str | None
    n: int
    passed: int
    pass_interval: Interval | None
    mean_score: float | None
    score_interval: Interval | None
    not_scored: int
    # How far two runs of the model drift apart on the mean score by chance (from repeats).
    noise_floor: float | None = None

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.n if self.n else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "task": self.task,
            "n": self.n,
            "passed": self.passed,
            "pass_rate": self.pass_rate,
            "pass_interval": interval_dict(self.pass_interval),
            "mean_score": self.mean_score,
            "score_interval": interval_dict(self.score_interval),
            "not_scored": self.not_scored,
            "noise_floor": self.noise_floor,
        }


def scores_by_case(scored: Sequence[AnswerRecord]) -> dict[tuple[str, str], list[float]]:
    """Each task x case's scores over its repeats."""
    by_case: dict[tuple[str, str], list[float]] = {}
    for r in scored:
        if r.score is not None:
            by_case.setdefault((r.task, r.case), []).append(r.score)
    return by_case


def task_scores(
    records: Sequence[AnswerRecord], models: Sequence[str], seed_text: str
) -> list[TaskScore]:
    """Per model (in order): each task in first-seen order, then the overall row. The score
    bootstrap is seeded from ``seed_text`` (the suite hash), model and task, so reruns
    reproduce it."""
    tasks = list(dict.fromkeys(r.task for r in records))
    rows = []
    for model in models:
        mine = [r for r in records if r.model == model]
        for task in [*tasks, None]:
            chosen = [r for r in mine if task is None or r.task == task]
            scored = [r for r in chosen if r.score is not None]
            scores = [r.score for r in scored if r.score is not None]
            passes = rate_over(scored, lambda r: r.outcome == PASSED)
            # Cases are the clusters (a case's repeats together); the overall row keeps each
            # task's share (strata). The seed names the tasks covered, so with one task both
            # rows are the same draw.
            covered = sorted({r.task for r in scored})
            by_case = scores_by_case(scored)
            interval = mean_interval(
                [Cluster(task, sum(s), len(s)) for (task, _), s in by_case.items()],
                low_end=0.0,
                high_end=1.0,
                seed=seed_from(seed_text, "score", model, *covered),
            )
            rows.append(
                TaskScore(
                    model=model,
                    task=task,
                    n=len(scored),
                    passed=passes.passed,
                    pass_interval=passes.proportion.interval,
                    mean_score=mean(scores),
                    score_interval=interval,
                    not_scored=len(chosen) - len(scored),
                    noise_floor=noise_floor(list(by_case.values())),
                )
            )
    return rows
