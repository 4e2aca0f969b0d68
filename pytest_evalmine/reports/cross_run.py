"""One run against another, case by case (spec: "Compare"): each model of run A paired with a
model of run B over the cases (task, case) both runs answered, even when the suite changed in
between. The statistics are the in-run paired comparison's (``scoring.paired.compare_answers``
over ``stats.paired``), fed with one model's answers from each run; this module adds what only
two runs have: which tasks changed, which cases only one run has, how many parsed answers
changed, each run's own noise floor, the win rates side by side and, with ``--by``, each
metric per group of cases (``reports.case_groups``). Its words: ``reports.cross_run_text``.

Works on report.json documents and answer records, so any two stored runs compare without a
call; the dict it returns is report.json's ``changes.cases``."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import EvalmineError
from ..run.records import AnswerRecord
from ..scoring.checks import ANSWER_CHECKS
from ..scoring.paired import (
    ALL_PASS,
    EXAMPLE_CHARS,
    METRIC_SCORES,
    SCORE,
    Answers,
    PairedAnswers,
    all_pass_score,
    answers_by_case,
    compare_answers,
    pair_answers,
)
from ..stats.estimators import Interval, interval_dict, seed_from
from ..stats.paired import noise_floor
from ..stats.proportions import Proportion
from ..stats.resample import Cluster, mean_interval
from ..suite.content import TASK_CONTENT_FIELDS, VARIANT_FIELDS
from .case_groups import CaseGroups, grouped
from .cross_run_text import EXCLUDED, answers_verdict, verdict

EXAMPLES = 5  # worse and better cases shown per comparison, each


@dataclass(frozen=True)
class RunSide:
    """One stored (or finishing) run: its report.json and its answer records."""

    report: dict[str, Any]
    records: Sequence[AnswerRecord]
    # answers.jsonl's unreadable lines, each named by file and line (read around)
    damaged: tuple[str, ...] = ()

    @property
    def run_id(self) -> str:
        return str(self.report.get("run_id"))

    def missing(self) -> str | None:
        """Why this run's answers are fewer than its report.json counts (``items``, one per
        answer record): a run cut short or a file cut at a line boundary; None when whole."""
        counted = self.report.get("items")
        if not isinstance(counted, int) or len(self.records) >= counted:
            return None
        return (
            f"run {self.run_id} is incomplete: its answers.jsonl holds {len(self.records)} of "
            f"the {counted} answers its report.json counts, so its missing cases are not "
            "removed cases"
        )

    @property
    def models(self) -> list[str]:
        return list(self.report.get("models") or dict.fromkeys(r.model for r in self.records))


# what is compared ----------------------------------------------------------------------------
def parsed_answer(record: AnswerRecord) -> Any:
    """What the checks read from an answer: the first of the task's own checks that read a
    value (``got``: the number, the letter, the fields), else the schema's parsed JSON, else
    the text. Compared in full; shown clipped (``shown_answer``)."""
    for check in record.checks:
        if check.get("name") not in ANSWER_CHECKS and check.get("got") is not None:
            return check["got"]
    if record.parsed is not None:
        return record.parsed
    return record.text or ""


def shown_answer(record: AnswerRecord) -> Any:
    value = parsed_answer(record)
    if isinstance(value, str) and len(value) > EXAMPLE_CHARS:
        return value[:EXAMPLE_CHARS] + "..."
    return value


def model_pairs(
    models_a: Sequence[str], models_b: Sequence[str], requested: Sequence[str] = ()
) -> list[tuple[str, str]]:
    """Which model of run A is compared with which of run B: every model both runs have (in
    run A's order), or each ``--model`` entry: ``M`` (a model of both) or ``A=M1,B=M2`` (M1 of
    run A against M2 of run B: another build, another tag)."""
    if not requested:
        return [(m, m) for m in models_a if m in models_b]
    pairs = []
    for entry in requested:
        if "=" not in entry:
            pair = (entry, entry)
        else:
            sides = dict(_side(part, entry) for part in entry.split(","))
            if set(sides) != {"A", "B"}:
                raise EvalmineError(f"--model {entry}: give both sides, A=MODEL,B=MODEL")
            pair = (sides["A"], sides["B"])
        for model, run, models in ((pair[0], "A", models_a), (pair[1], "B", models_b)):
            if model not in models:
                raise EvalmineError(
                    f"--model {entry}: run {run} has no model {model!r} "
                    f"(it has {', '.join(models) or 'none'})"
                )
        pairs.append(pair)
    return list(dict.fromkeys(pairs))


def _side(part: str, entry: str) -> tuple[str, str]:
    side, _, model = part.partition("=")
    if side.strip().upper() not in ("A", "B") or not model.strip():
        raise EvalmineError(f"--model {entry}: {part!r} is not A=MODEL or B=MODEL")
    return side.strip().upper(), model.strip()


# the comparison ------------------------------------------------------------------------------
def cross_run(
    a: RunSide,
    b: RunSide,
    requested: Sequence[str] = (),
    allow_other_suite: bool = False,
    by: CaseGroups | None = None,
) -> dict[str, Any]:
    """Run B against run A, case by case (report.json ``changes.cases``, spec "Compare").
    Runs of two suites are paired by task and case ids only with ``allow_other_suite``;
    ``by`` adds each metric's paired comparison per group of cases (``--by FIELD``)."""
    suite_a, suite_b = _suite_name(a), _suite_name(b)
    if suite_a != suite_b and not allow_other_suite:
        raise EvalmineError(
            f"run A ({a.run_id}) is of suite {suite_a!r}, run B ({b.run_id}) of suite "
            f"{suite_b!r}: two suites are paired by task and case ids only with "
            "--allow-other-suite"
        )
    pairs = model_pairs(a.models, b.models, requested)
    cases_a = {(r.task, r.case) for r in a.records}
    cases_b = {(r.task, r.case) for r in b.records}
    result: dict[str, Any] = {
        "run_a": a.run_id,
        "run_b": b.run_id,
        "same_run": a.run_id == b.run_id,
        # A side read around damaged lines, or holding fewer answers than its report counts.
        "partial": [
            why for side in (a, b) for why in (*side.damaged, side.missing()) if why is not None
        ],
        "suites": {"a": suite_a, "b": suite_b, "same": suite_a == suite_b},
        "models_only_in_a": [m for m in a.models if m not in b.models],
        "models_only_in_b": [m for m in b.models if m not in a.models],
        "tasks": task_changes(a.report, b.report),
        "cases_only_in_a": [_case(c) for c in sorted(cases_a - cases_b)],
        "cases_only_in_b": [_case(c) for c in sorted(cases_b - cases_a)],
        "by": {"field": by.field, "source": by.source} if by else None,
        "models": [_compare_models(a, b, model_a, model_b, by) for model_a, model_b in pairs],
        "win_rates": _win_rates(a.report, b.report),
        "note": None,
    }
    if not pairs:
        result["note"] = (
            f"the runs share no model (A: {', '.join(a.models) or 'none'}; B: "
            f"{', '.join(b.models) or 'none'}): evalmine compare RUN_A RUN_B --model "
            "A=MODEL,B=MODEL pairs two"
        )
    return result


def _suite_name(side: RunSide) -> str | None:
    return (side.report.get("suite") or {}).get("name")


def _case(key: tuple[str, str]) -> dict[str, str]:
    return {"task": key[0], "case": key[1]}


def task_changes(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Tasks whose content differs, with what changed: the fields of what the task asks and
    checks, ``cases`` (ids, vars, gold, expected) and, per variant the task can be asked with,
    the variant's fields (``variants``: name -> fields, ``added``/``removed`` for a variant on
    one side only). A run stored before per-field hashes existed is compared by its whole-task
    hashes (cases included), fields unknown (null); one stored before case and variant hashes,
    by its fields, with ``cases`` when the whole-task hash differs and no field explains it."""
    content_a = (a.get("suite") or {}).get("task_content") or {}
    content_b = (b.get("suite") or {}).get("task_content") or {}
    hashes_b = (b.get("suite") or {}).get("task_hashes") or {}
    hashes_a = (a.get("suite") or {}).get("task_hashes") or {}
    by_field = bool(content_a) and bool(content_b)
    now, before = (content_b, content_a) if by_field else (hashes_b, hashes_a)
    changed = []
    for task in sorted(set(now) & set(before)):
        if not by_field:
            if now[task] != before[task]:
                changed.append({"task": task, "fields": None, "variants": {}})
            continue
        new, old = now[task], before[task]
        fields = [f for f in TASK_CONTENT_FIELDS if new.get(f) != old.get(f)]
        if "cases" in new and "cases" in old:
            fields += ["cases"] if new["cases"] != old["cases"] else []
        elif not fields and hashes_a.get(task) != hashes_b.get(task):
            fields.append("cases")
        variants = variant_changes(old.get("variants"), new.get("variants"))
        if fields or variants:
            changed.append({"task": task, "fields": fields, "variants": variants})
    return {
        "compared_by": "task_content" if by_field else "task_hashes",
        "changed": changed,
        "only_in_a": sorted(set(before) - set(now)),
        "only_in_b": sorted(set(now) - set(before)),
    }


def variant_changes(
    before: dict[str, Any] | None, now: dict[str, Any] | None
) -> dict[str, list[str]]:
    """Per variant of one task, what changed in it; {} when either run predates variant
    hashes (nothing can be said, and nothing is claimed)."""
    if before is None or now is None:
        return {}
    changes = {}
    for name in sorted(set(before) | set(now)):
        if name not in before:
            changes[name] = ["added"]
        elif name not in now:
            changes[name] = ["removed"]
        elif before[name].get("hash") != now[name].get("hash"):
            changes[name] = [f for f in VARIANT_FIELDS if before[name].get(f) != now[name].get(f)]
    return changes


def _compare_models(
    a: RunSide, b: RunSide, model_a: str, model_b: str, by: CaseGroups | None
) -> dict[str, Any]:
    answers_a = answers_by_case(a.records, model_a)
    answers_b = answers_by_case(b.records, model_b)
    both = sorted(set(answers_a) & set(answers_b))
    scored = set(a.report.get("scored_tasks") or ()) & set(b.report.get("scored_tasks") or ())
    every_task = pair_answers(answers_a, answers_b, both, all_pass_score)
    metrics = []
    for metric, chosen in ((ALL_PASS, both), (SCORE, [c for c in both if c[0] in scored])):
        if metric == SCORE and not chosen:
            continue
        paired = (
            every_task
            if metric == ALL_PASS
            else pair_answers(answers_a, answers_b, chosen, METRIC_SCORES[metric])
        )
        # From what was compared, not the run ids (their tokens are random): two reruns of
        # the same pair of suites reproduce every interval, as in-run comparisons do.
        seed = seed_from(_suite_hash(a), _suite_hash(b), "cross_run", model_a, model_b, metric)
        metrics.append(_metric(paired, metric, seed, answers_a, answers_b, by))
    entry: dict[str, Any] = {
        "model_a": model_a,
        "model_b": model_b,
        "build_a": (a.report.get("model_builds") or {}).get(model_a),
        "build_b": (b.report.get("model_builds") or {}).get(model_b),
        "excluded": _excluded(answers_a, answers_b, every_task),
        "changed_answers": _changed(every_task).to_dict(),
        "changed_between_repeats": {
            "a": _churn(answers_a, every_task),
            "b": _churn(answers_b, every_task),
        },
        "changed_beyond_repeats": {
            side: _churn_excess(answers, every_task, seed_from(_suite_hash(a), side, model_a))
            for side, answers in (("a", answers_a), ("b", answers_b))
        },
        "metrics": metrics,
    }
    entry["answers_verdict"] = answers_verdict(entry)
    return entry


def _suite_hash(side: RunSide) -> str:
    return str((side.report.get("suite") or {}).get("hash"))


def _metric(
    paired: PairedAnswers,
    metric: str,
    seed: int,
    answers_a: Answers,
    answers_b: Answers,
    by: CaseGroups | None,
) -> dict[str, Any]:
    score = METRIC_SCORES[metric]
    keys = [(c.stratum, c.case) for c in paired.cases]
    # Each run's noise from its own repeats of the compared cases, paired or not.
    floors = (_floor(answers_a, keys, score), _floor(answers_b, keys, score))
    result = compare_answers(
        paired,
        metric,
        seed=seed,
        baseline="A",
        candidate="B",
        examples=EXAMPLES,
        shown=shown_answer,
        floors=floors,
    )
    c = result.comparison
    side_scores = {
        side: {
            "mean": c.mean_a if side == "a" else c.mean_b,
            "interval": interval_dict(_side_interval(paired, metric, seed, side)),
        }
        for side in ("a", "b")
    }
    stored = c.to_dict()
    entry: dict[str, Any] = {
        "metric": metric,
        "cases": stored["cases"],
        "observations": stored["observations"],
        **side_scores,
        "delta": c.delta,
        "interval": stored["interval"],
        "worse": stored["worse"],
        "better": stored["better"],
        "same": stored["same"],
        "mcnemar": stored["mcnemar"],
        "noise_floor": {"a": c.floor_a, "b": c.floor_b, "floor": c.noise_floor},
        "excess": c.excess.to_dict() if c.excess else None,
        "beyond_noise": c.beyond_noise,
        "excluded_cases": result.excluded,
        "worse_examples": [_example(e) for e in result.worse],
        "better_examples": [_example(e) for e in result.better],
        "groups": grouped(paired, metric, seed, by) if by else None,
    }
    entry["verdict"] = verdict(entry)
    return entry


def _example(example: Any) -> dict[str, Any]:
    return {
        "task": example.task,
        "case": example.case,
        "a_answer": example.baseline_answer,
        "b_answer": example.candidate_answer,
    }


def _floor(
    answers: Answers, keys: Sequence[tuple[str, str]], score: Callable[[AnswerRecord], Any]
) -> float | None:
    repeats = []
    for key in keys:
        scores = [s for r in answers[key].values() if (s := score(r)) is not None]
        repeats.append(scores)
    return noise_floor(repeats)


def _side_interval(paired: PairedAnswers, metric: str, seed: int, side: str) -> Interval | None:
    """A side's score over the paired repeats: the (clustered) Wilson interval of its all-pass
    rate, or the Bayesian bootstrap of its mean checker score (as the Scores section's)."""
    sides = [(c.stratum, c.a if side == "a" else c.b) for c in paired.cases]
    if metric == ALL_PASS:
        clusters = tuple((round(sum(scores)), len(scores)) for _, scores in sides)
        return Proportion(
            sum(p for p, _ in clusters), sum(n for _, n in clusters), clusters
        ).interval
    return mean_interval(
        [Cluster(stratum, sum(scores), len(scores)) for stratum, scores in sides],
        low_end=0.0,
        high_end=1.0,
        seed=seed_from(str(seed), side),
    )


def _changed(paired: PairedAnswers) -> Proportion:
    """Cases whose parsed answer differs between the runs (first paired repeat of each)."""
    changed = sum(
        1
        for c in paired.cases
        if _same(*(parsed_answer(r) for r in paired.first[(c.stratum, c.case)])) is False
    )
    return Proportion(changed, len(paired.cases))


def _churn(answers: Answers, paired: PairedAnswers) -> dict[str, Any] | None:
    """Within one run, the share of compared cases whose parsed answer differs between its
    first two answered repeats: how often the answer moves with no change at all. None when
    no compared case has two."""
    changed = n = 0
    for c in paired.cases:
        answered = [
            r
            for _, r in sorted(answers[(c.stratum, c.case)].items())
            if all_pass_score(r) is not None
        ]
        if len(answered) >= 2:
            n += 1
            changed += _same(parsed_answer(answered[0]), parsed_answer(answered[1])) is False
    return Proportion(changed, n).to_dict() if n else None


def _churn_excess(answers: Answers, paired: PairedAnswers, seed: int) -> dict[str, Any] | None:
    """Over the compared cases with two answered repeats in this run: the mean per case of
    (answer changed between the runs) - (answer changed between this run's first two
    repeats), with its interval (the paired delta's bootstrap over cases, ends -1 and 1), as
    evalpair's answer-change test. None without such a case."""
    clusters = []
    for c in paired.cases:
        answered = [
            r
            for _, r in sorted(answers[(c.stratum, c.case)].items())
            if all_pass_score(r) is not None
        ]
        if len(answered) >= 2:
            between = _same(*(parsed_answer(r) for r in paired.first[(c.stratum, c.case)]))
            within = _same(parsed_answer(answered[0]), parsed_answer(answered[1]))
            clusters.append(Cluster(c.stratum, float(not between) - float(not within), 1))
    if not clusters:
        return None
    interval = mean_interval(clusters, low_end=-1.0, high_end=1.0, seed=seed)
    value = math.fsum(cluster.total for cluster in clusters) / len(clusters)
    return {"value": value, "interval": interval_dict(interval), "cases": len(clusters)}


def _same(a: Any, b: Any) -> bool:
    if a.__class__ is str and b.__class__ is str:  # texts: equal exactly when their JSON is
        return a == b
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _excluded(answers_a: Answers, answers_b: Answers, paired: PairedAnswers) -> dict[str, int]:
    reasons: Counter[str] = Counter()
    reasons["only_in_run_a"] = len(set(answers_a) - set(answers_b))
    reasons["only_in_run_b"] = len(set(answers_b) - set(answers_a))
    for key in paired.excluded:
        answered_a = any(all_pass_score(r) is not None for r in answers_a[key].values())
        answered_b = any(all_pass_score(r) is not None for r in answers_b[key].values())
        if not answered_a and not answered_b:
            reasons["no_answer_in_either"] += 1
        elif not answered_a:
            reasons["no_answer_in_a"] += 1
        elif not answered_b:
            reasons["no_answer_in_b"] += 1
        else:
            reasons["no_common_repeat"] += 1
    return {reason: reasons[reason] for reason in EXCLUDED if reasons[reason]}


def _win_rates(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """The judge's overall win rates of each (baseline, candidate) both runs judged."""

    def rates(report: dict[str, Any]) -> dict[tuple[Any, str], dict[str, Any]]:
        rows = (report.get("headline") or {}).get("win_rates") or []
        return {(report.get("baseline"), row["candidate"]): row for row in rows}

    def kept(row: dict[str, Any]) -> dict[str, Any]:
        keys = ("win_rate", "interval", "n", "headline_eligible")
        return {key: row.get(key) for key in keys}

    before, now = rates(a), rates(b)
    return [
        {"baseline": key[0], "candidate": key[1], "a": kept(before[key]), "b": kept(now[key])}
        for key in before
        if key in now
    ]


def recorded_builds(
    models: Sequence[str],
    adapter_for: Callable[[str], Any],
    model_of: Callable[[str], str] = lambda model: model,
) -> dict[str, dict[str, str]]:
    """The weights behind each model string, where its adapter recorded them while preparing
    (the ``{"digests": {name: digest}}`` state an Ollama adapter keeps, spec "Cache database"):
    model -> ``{adapter, digest}``, so two builds (``llama3.1:8b`` and ``llama3.1:8b-q2_K``,
    or one tag pulled again) are told apart in the report. Models without one are left out.
    ``model_of`` gives the model a contender (``MODEL@VARIANT``) asks."""
    builds = {}
    for model in models:
        asked = model_of(model)
        try:
            adapter = adapter_for(asked)
        except EvalmineError:  # a provider only a user's own registry serves
            continue
        state = getattr(adapter, "prepared_state", lambda: None)() or {}
        digests = state.get("digests") if isinstance(state, dict) else None
        name = asked.split("/", 1)[1] if "/" in asked else asked
        if isinstance(digests, dict) and isinstance(digests.get(name), str):
            builds[model] = {"adapter": str(adapter.name), "digest": digests[name]}
    return builds
