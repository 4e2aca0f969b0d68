"""Prompt variants (spec: "Variants"): the MODEL@VARIANT rule, loading and its refusals, and
contenders end to end on the fake adapter: ids, cache keys, prices, labels that match only
their own contender, judge pairs in both orders, the paired comparison, repeats, the gate."""

from __future__ import annotations

import asyncio
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_evalmine import exitcodes
from pytest_evalmine.adapters.anthropic import AnthropicAdapter
from pytest_evalmine.adapters.base import Request, cache_key
from pytest_evalmine.adapters.fake import FakeAdapter
from pytest_evalmine.adapters.gemini import GeminiAdapter
from pytest_evalmine.adapters.ollama import OllamaAdapter
from pytest_evalmine.adapters.openai import OpenAIAdapter
from pytest_evalmine.commands.cli import main
from pytest_evalmine.errors import SuiteError
from pytest_evalmine.judging.gate import BLOCK, SHIP
from pytest_evalmine.suite.loader import load_suite
from pytest_evalmine.suite.variants import split_contender, undeclared_suffix

from .conftest import SMALL_SUITE, latest_answers, latest_report, newest_run_dir, write_suite
from .test_gate import LARGER_SUITE
from .test_judge_run import JUDGES_CONFTEST

FAKE = "--evalmine-fake"
CONCISE = 'variants:\n  concise: {system: "Answer in at most two sentences."}\n'
# The suite's variant for every task, before its tasks (SMALL_SUITE: fake/alpha, fake/beta).
VARIANT_SUITE = SMALL_SUITE.replace("tasks:\n", CONCISE + "tasks:\n", 1)
WITH_VARIANT = "--evalmine-models=fake/alpha,fake/alpha@concise"

# Logs what each answer request asked (the adapter sees the model, never the contender).
LOGGING_CONFTEST = """\
import json, os
import pytest
from pytest_evalmine.adapters.fake import FakeAdapter
from pytest_evalmine.adapters.registry import AdapterRegistry

LOG = os.path.join(os.path.dirname(__file__), "requests.log")


class Logging(FakeAdapter):
    async def complete(self, request):
        with open(LOG, "a") as log:
            log.write(json.dumps({
                "model": request.model, "system": request.system, "prompt": request.prompt,
                "max_tokens": request.max_tokens, "schema_mode": request.schema_mode,
                "variant": request.context["variant"], "case": request.context["case"],
            }) + "\\n")
        return await super().complete(request)


@pytest.fixture(scope="session")
def evalmine_adapters():
    registry = AdapterRegistry()
    registry.register("fake", Logging)
    return registry
"""


def logged(root: Path) -> list[dict]:
    path = root / "requests.log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def collected(result: pytest.RunResult) -> list[str]:
    return [line.split("::")[-1] for line in result.outlines if "::" in line]


# --- the rule -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "declared", "expected"),
    [
        ("p/m@concise", {"concise"}, ("p/m", "concise")),
        ("p/m", {"concise"}, ("p/m", None)),
        ("p/m@concize", {"concise"}, ("p/m@concize", None)),  # not declared: part of the model
        ("gw/claude-sonnet-4@20250514", {"concise"}, ("gw/claude-sonnet-4@20250514", None)),
        (
            "gw/claude-sonnet-4@20250514@concise",
            {"concise"},
            ("gw/claude-sonnet-4@20250514", "concise"),
        ),
        ("p/m@concise", set(), ("p/m@concise", None)),
        ("@concise", {"concise"}, ("@concise", None)),  # no model before the '@'
    ],
)
def test_the_last_at_is_a_variant_only_when_declared(
    entry: str, declared: set[str], expected: tuple[str, str | None]
) -> None:
    assert split_contender(entry, declared) == expected


def test_an_undeclared_suffix_is_read_after_the_provider_only() -> None:
    assert undeclared_suffix("p/m@concize", ["concise"]) == "concize"
    assert undeclared_suffix("p/m@concise", ["concise"]) is None
    assert undeclared_suffix("p/m", ["concise"]) is None
    assert undeclared_suffix("team@x/m", ["concise"]) is None  # an '@' in the provider only


# --- loading --------------------------------------------------------------------------------

LAYERED = """\
version: 1
suite: layered
defaults: {max_tokens: 64, temperature: 0.2, system: "Be kind."}
variants:
  concise: {system: "Be brief.", params: {max_tokens: 32}}
  cold: {params: {temperature: 0}}
tasks:
  - id: reply
    kind: rewrite
    prompt: "Reply to {{ text }}"
    params: {stop: ["END"]}
    variants:
      formal: {prompt: "Reply formally to {{ text }}", system: ""}
      concise: {params: {top_p: 0.5}}
    cases:
      - {id: c1, vars: {text: "hi"}}
  - id: other
    kind: rewrite
    prompt: "Other {{ text }}"
    cases:
      - {id: c1, vars: {text: "yo"}}
"""


def test_variants_override_what_they_name_and_keep_the_rest(tmp_path: Path) -> None:
    suite = load_suite(write_suite(tmp_path, LAYERED))
    assert suite.variant_names == ("concise", "cold", "formal")
    reply, other = suite.tasks
    assert list(reply.variants) == ["concise", "cold", "formal"]
    assert list(other.variants) == ["concise", "cold"]
    # The task's own 'concise' replaces the suite's for that task: not merged with it.
    concise = reply.variants["concise"]
    assert concise.where == "$.tasks[0].variants.concise"
    assert (concise.system, concise.params.max_tokens, concise.params.top_p) == (
        "Be kind.",
        64,
        0.5,
    )
    assert concise.params.stop == ("END",)  # the task's params stay under the variant's
    # ... while the other task has the suite's.
    assert other.variants["concise"].system == "Be brief."
    assert other.variants["concise"].params.max_tokens == 32
    assert other.variants["cold"].params.temperature == 0
    assert reply.params.temperature == 0.2  # the task itself is unchanged
    case = reply.cases[0]
    assert suite.render(reply, case).prompt == "Reply to hi"
    formal = suite.render(reply, case, "formal")
    assert (formal.prompt, formal.system) == ("Reply formally to hi", None)  # "" sends none
    assert suite.render(other, other.cases[0], "concise").system == "Be brief."
    assert suite.contender("fake/a@formal") == ("fake/a", "formal")
    assert suite.variant_problem("fake/a@formal") == (
        "'fake/a@formal': variant 'formal' is not declared for task 'other' (declare it under "
        "the task's variants, or under the suite's variants to apply it to every task)"
    )
    assert suite.variant_problem("fake/a@concise") is None


def test_variants_are_part_of_the_suite_hash(tmp_path: Path) -> None:
    plain = load_suite(write_suite(tmp_path, SMALL_SUITE, "a.eval.yaml"))
    varied = load_suite(write_suite(tmp_path, VARIANT_SUITE, "b.eval.yaml"))
    assert plain.hash != varied.hash


@pytest.mark.parametrize(
    ("edit", "where", "message"),
    [
        (
            ("concise: {system:", "concise: {temprature: 0, system:"),
            "$.variants.concise",
            "unknown key 'temprature' (allowed: description, params, prompt, schema_mode, system)",
        ),
        (
            ('concise: {system: "Answer in at most two sentences."}', "concise: {description: x}"),
            "$.variants.concise",
            "needs one of: prompt, system, params, schema_mode",
        ),
        (
            ("concise: {system:", "concise: {params: {temprature: 0}, system:"),
            "$.variants.concise.params",
            "unknown key 'temprature'",
        ),
        (
            ("concise: {system:", "concise: {schema_mode: native, system:"),
            "$.variants.concise.schema_mode",
            "'native' is not one of ['prompted']",
        ),
        (("  concise:", "  'con cise':"), "$.variants", "'con cise' does not match"),
        (
            ("concise: {system:", "concise: {params: {system: x}, system:"),
            "$.variants.concise.system",
            "set both here and in params.system; keep one",
        ),
        (
            ("concise: {system:", 'concise: {prompt: "Say {{ tone }}", system:'),
            "$.tasks[0].cases[0]",
            "placeholder {{ tone }} in the prompt of variant 'concise' has no variable 'tone' "
            "(task 'triage', case 'charged-twice')",
        ),
        (
            (
                "models: [fake/alpha, fake/beta]",
                "models: [fake/alpha, fake/alpha@concise, fake/alpha@formal]",
            ),
            "$.models[2]",
            "'fake/alpha@formal': variant 'formal' is not declared for task 'polite'",
        ),
    ],
)
def test_a_bad_variant_is_refused_with_its_path(
    tmp_path: Path, edit: tuple[str, str], where: str, message: str
) -> None:
    text = VARIANT_SUITE.replace(*edit)
    # 'formal' exists on the first task only, for the $.models case.
    text = text.replace(
        "    cases:\n", '    variants: {formal: {system: "Formal."}}\n    cases:\n', 1
    )
    assert text != VARIANT_SUITE
    with pytest.raises(SuiteError) as raised:
        load_suite(write_suite(tmp_path, text))
    assert any(p[1] == where and message in p[2] for p in raised.value.problems), str(raised.value)


def test_validate_renders_every_variants_prompts_and_names_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def validate(*args: str) -> tuple[int, str, str]:
        code = main(["validate", "--rootdir", str(tmp_path), *args])
        out, err = capsys.readouterr()
        return code, out, err

    write_suite(tmp_path, VARIANT_SUITE, "small.eval.yaml")
    code, out, err = validate("small.eval.yaml", "--models=fake/alpha,fake/alpha@concise")
    assert code == 0, err
    assert out.strip() == (
        "ok small.eval.yaml: suite small, 6 items, fake/alpha, fake/alpha@concise; no judge; "
        "variants concise"
    )
    write_suite(tmp_path, VARIANT_SUITE.replace("concise: {", "concise: {prompt: '{{ x }}', "))
    code, _out, err = validate("suite.eval.yaml")
    assert code == 2  # as a collection error
    assert "in the prompt of variant 'concise' has no variable 'x'" in err
    # An '@' suffix that is no variant and no priced model names the declared variants.
    code, _out, err = validate("small.eval.yaml", "--models=anthropic/claude-haiku-4-5@concize")
    assert code == exitcodes.REFUSED_BEFORE_SPENDING
    assert (
        "'anthropic/claude-haiku-4-5@concize': 'concize' after '@' is not a variant of this "
        "suite (its variants: concise), nor is the whole string a known model: no price for "
        "model 'anthropic/claude-haiku-4-5@concize'"
    ) in err


# --- the adapters' prompted mode ------------------------------------------------------------

SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}


def asked(model: str, schema_mode: str | None) -> Request:
    return Request(model=model, prompt="Classify it.", schema=SCHEMA, schema_mode=schema_mode)


@pytest.mark.parametrize(
    ("adapter", "body_of", "native_field"),
    [
        (AnthropicAdapter(), lambda a, r: a.build_body(r), ("output_config",)),
        (OpenAIAdapter(), lambda a, r: a.build_body(r), ("response_format",)),
        (OllamaAdapter(), lambda a, r: a.body(r), ("format",)),
        (GeminiAdapter(), lambda a, r: a.body(r), ("generationConfig", "responseSchema")),
    ],
    ids=["anthropic", "openai", "ollama", "gemini"],
)
def test_a_request_asking_for_a_prompted_schema_gets_one(adapter, body_of, native_field) -> None:  # type: ignore[no-untyped-def]
    native, prompted = asked("x/m", None), asked("x/m", "prompted")
    assert adapter.schema_mode(native) == "native"
    assert adapter.schema_mode(prompted) == "prompted"
    assert cache_key(adapter, native) != cache_key(adapter, prompted)

    def dig(body: dict, path: tuple[str, ...]) -> object:
        for part in path:
            body = body.get(part) if isinstance(body, dict) else None  # type: ignore[assignment]
        return body

    assert dig(body_of(adapter, native), native_field) is not None
    body = body_of(adapter, prompted)
    assert dig(body, native_field) is None
    text = json.dumps(body)
    assert "Classify it." in text and '\\"required\\": [\\"a\\"]' in text
    no_schema = Request(model="x/m", prompt="hi", schema_mode="prompted")
    assert adapter.schema_mode(no_schema) is None


# --- end to end on the fake adapter ---------------------------------------------------------


def test_a_contender_has_its_own_items_requests_and_cache_entries(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".eval.yaml", small=VARIANT_SUITE)
    pytester.makeconftest(LOGGING_CONFTEST)
    ids = collected(pytester.runpytest("--collect-only", "-q", WITH_VARIANT))
    assert ids == [
        "charged-twice[fake/alpha]",
        "charged-twice[fake/alpha@concise]",
        "login-loop[fake/alpha]",
        "login-loop[fake/alpha@concise]",
        "refund-no[fake/alpha]",
        "refund-no[fake/alpha@concise]",
    ]
    first = pytester.runpytest(WITH_VARIANT, "--junitxml=junit.xml")
    first.assert_outcomes(passed=6)
    requests = logged(pytester.path)
    assert len(requests) == 6
    assert {r["model"] for r in requests} == {"fake/alpha"}  # the adapter sees the model
    by_variant = {v: [r for r in requests if r["variant"] == v] for v in (None, "concise")}
    assert {r["system"] for r in by_variant["concise"]} == {"Answer in at most two sentences."}
    assert {r["system"] for r in by_variant[None]} == {None}
    report = latest_report(pytester.path)
    assert report["models"] == ["fake/alpha", "fake/alpha@concise"]
    assert report["baseline"] == "fake/alpha"
    assert [row["model"] for row in report["scorecard"]] == report["models"]
    answers = latest_answers(pytester.path)
    keys = {(a["model"], a["case"]): a["key"] for a in answers}
    assert len(set(keys.values())) == 6  # the variant's requests differ: keys of their own
    names = [
        prop.get("value")
        for prop in ET.parse(pytester.path / "junit.xml").iter("property")
        if prop.get("name") == "evalmine_model"
    ]
    assert sorted(names) == sorted(["fake/alpha", "fake/alpha@concise"] * 3)
    # A rerun replays every answer, the variant's too; -m selects a contender by its variant.
    second = pytester.runpytest(WITH_VARIANT, "-m", "evalmine(variant='concise')")
    second.assert_outcomes(passed=3)
    assert len(logged(pytester.path)) == 6
    assert {a["key"] for a in latest_answers(pytester.path)} == {
        key for (model, _case), key in keys.items() if model == "fake/alpha@concise"
    }


def test_a_contender_is_priced_as_its_model(pytester: pytest.Pytester) -> None:
    pytester.makefile(".eval.yaml", small=VARIANT_SUITE)
    # fake/* would price 'fake/alpha@concise' too: an exact row for fake/alpha tells them apart.
    pytester.makefile(".yaml", prices="models:\n  - {model: fake/alpha, input: 100, output: 200}\n")
    result = pytester.runpytest(FAKE, WITH_VARIANT, "--evalmine-prices=prices.yaml")
    result.assert_outcomes(passed=6)
    for answer in latest_answers(pytester.path):
        tokens = answer["tokens"]
        expected = (tokens["input_tokens"] * 100 + tokens["output_tokens"] * 200) / 1e6
        assert answer["cost_usd"] == pytest.approx(expected, rel=1e-9), answer["model"]


def test_an_undeclared_suffix_is_refused_naming_the_variants(pytester: pytest.Pytester) -> None:
    pytester.makefile(".eval.yaml", small=VARIANT_SUITE)
    result = pytester.runpytest(
        FAKE, "--evalmine-models=fake/alpha,anthropic/claude-haiku-4-5@concize"
    )
    assert result.ret == exitcodes.REFUSED_BEFORE_SPENDING
    out = result.stdout.str() + result.stderr.str()
    assert "'concize' after '@' is not a variant of this suite (its variants: concise)" in out


def test_a_model_string_with_its_own_at_is_a_model(pytester: pytest.Pytester) -> None:
    pytester.makefile(".eval.yaml", small=VARIANT_SUITE)
    pytester.makeconftest(LOGGING_CONFTEST.replace('register("fake"', 'register("gw"'))
    pytester.makefile(
        ".yaml", prices="models:\n  - {model: gw/claude-sonnet-4@20250514, input: 1, output: 1}\n"
    )
    models = "--evalmine-models=gw/claude-sonnet-4@20250514,gw/claude-sonnet-4@20250514@concise"
    result = pytester.runpytest(models, "--evalmine-prices=prices.yaml", "-k", "refund")
    result.assert_outcomes(passed=2)
    assert {(r["model"], r["variant"]) for r in logged(pytester.path)} == {
        ("gw/claude-sonnet-4@20250514", None),
        ("gw/claude-sonnet-4@20250514", "concise"),
    }


def test_a_task_variant_missing_on_a_task_is_refused_naming_it(
    pytester: pytest.Pytester,
) -> None:
    text = SMALL_SUITE.replace(
        "    cases:\n", "    variants: {formal: {system: F}}\n    cases:\n", 1
    )
    pytester.makefile(".eval.yaml", small=text)
    result = pytester.runpytest(FAKE, "--evalmine-models=fake/alpha,fake/alpha@formal")
    assert result.ret == pytest.ExitCode.INTERRUPTED  # a collection error
    result.stdout.fnmatch_lines(
        [
            "*--evalmine-models: 'fake/alpha@formal': variant 'formal' is not declared for task "
            "'polite' (declare it*"
        ]
    )


# Labels naming the variant and labels naming the plain model, for the same cases and with
# opposite preferences. The scripted judge follows the first label of a case: the variant's.
# No schema: the fake's prose differs for every model and system prompt, so no two judge
# requests are the same (equal answers would share one cached verdict).
UNSCHEMATIC = re.sub(r"    schema:\n(      .*\n)+", "", VARIANT_SUITE)
LABELLED = (
    UNSCHEMATIC.replace(
        "tasks:\n",
        "judge:\n  model: fake/judge\n"
        "  calibration: {min_kappa: 0.4, min_labels: 3, min_pairs: 3}\n"
        "tasks:\n",
    ).replace(
        "models: [fake/alpha, fake/beta]", "models: [fake/beta, fake/alpha, fake/alpha@concise]"
    )
    + "labels:\n"
    + "".join(
        f"  - {{task: {task}, case: {case}, baseline: fake/beta, candidate: {candidate}, "
        f"prefer: {prefer}}}\n"
        for candidate, prefers in (
            ("fake/alpha@concise", ("candidate", "candidate", "baseline")),
            ("fake/alpha", ("baseline", "baseline", "candidate")),
        )
        for (task, case), prefer in zip(
            (("triage", "charged-twice"), ("triage", "login-loop"), ("polite", "refund-no")),
            prefers,
            strict=True,
        )
    )
)


def test_labels_judge_pairs_and_calibration_are_per_contender(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".eval.yaml", judged=LABELLED)
    pytester.makeconftest(JUDGES_CONFTEST)
    result = pytester.runpytest(FAKE)
    assert result.ret == 0, result.stdout.str()
    calls = [
        json.loads(line) for line in (pytester.path / "judge_calls.log").read_text().splitlines()
    ]
    # Both candidates, every case, both orders: 2 x 3 x 2 judge calls.
    assert sorted((c["candidate"], c["order"]) for c in calls) == sorted(
        (candidate, order)
        for candidate in ("fake/alpha", "fake/alpha@concise")
        for order in ("baseline_first", "candidate_first")
        for _case in range(3)
    )
    assert {c["baseline"] for c in calls} == {"fake/beta"}
    report = latest_report(pytester.path)
    per_candidate = report["headline"]["calibration_per_candidate"]
    concise, plain = per_candidate["fake/alpha@concise"], per_candidate["fake/alpha"]
    # Each contender's calibration reads its own three labels only, never the other's.
    assert (concise["n"], concise["labels_total"]) == (3, 3)
    assert (plain["n"], plain["labels_total"]) == (3, 3)
    assert report["headline"]["calibration"]["n"] == 6  # pooled: each label matched once
    assert concise["kappa"] == pytest.approx(1.0) and concise["status"] == "ok"
    assert plain["kappa"] < 0  # the judge followed the variant's labels, the opposite of these
    pairs = [
        json.loads(line)
        for line in (newest_run_dir(pytester.path) / "pairs.jsonl").read_text().splitlines()
    ]
    assert sorted(p["candidate"] for p in pairs) == ["fake/alpha"] * 3 + ["fake/alpha@concise"] * 3
    # Every pair judged in both orders.
    assert {tuple(v["order"] for v in p["passes"]) for p in pairs} == {
        ("baseline_first", "candidate_first")
    }
    concise_pairs = {p["case"]: p["label"] for p in pairs if p["candidate"] == "fake/alpha@concise"}
    assert concise_pairs == {
        "charged-twice": "candidate",
        "login-loop": "candidate",
        "refund-no": "baseline",
    }
    assert [p["candidate"] for p in report["paired"]] == ["fake/alpha", "fake/alpha@concise"]
    rates = {r["candidate"]: r for r in report["headline"]["win_rates"]}
    assert rates["fake/alpha@concise"]["win_rate"] == pytest.approx(2 / 3)


# Every task's answers cut at 3 tokens: the schema task's JSON no longer parses.
TINY = LARGER_SUITE.replace("tasks:\n", "variants:\n  tiny: {params: {max_tokens: 3}}\ntasks:\n", 1)


def test_the_paired_comparison_and_the_gate_take_a_contender(pytester: pytest.Pytester) -> None:
    pytester.makefile(".eval.yaml", small=TINY)
    models = "--evalmine-models=fake/alpha,fake/alpha@tiny"
    result = pytester.runpytest(FAKE, models, "--evalmine-gate=all_pass")
    assert result.ret == exitcodes.RELEASE_GATE_BLOCKED
    report = latest_report(pytester.path)
    paired = report["paired"][0]
    assert (paired["baseline"], paired["candidate"]) == ("fake/alpha", "fake/alpha@tiny")
    assert (paired["worse"], paired["better"], paired["same"]) == (14, 0, 1)
    assert report["gate"]["verdict"] == BLOCK
    assert report["gate"]["candidates"][0]["candidate"] == "fake/alpha@tiny"
    assert "Release gate: BLOCK" in result.stdout.str()
    # The baseline may be a contender too: the plain model is then the better candidate.
    flipped = pytester.runpytest(
        FAKE, models, "--evalmine-gate=all_pass", "--evalmine-baseline=fake/alpha@tiny"
    )
    assert flipped.ret == pytest.ExitCode.TESTS_FAILED  # the tiny answers fail; Ship keeps it
    report = latest_report(pytester.path)
    assert report["baseline"] == "fake/alpha@tiny"
    assert report["paired"][0]["better"] == 14
    assert report["gate"]["verdict"] == SHIP


def test_repeats_of_a_contender_measure_its_noise_floor(pytester: pytest.Pytester) -> None:
    pytester.makefile(".eval.yaml", small=VARIANT_SUITE)
    result = pytester.runpytest(FAKE, WITH_VARIANT, "--evalmine-repeat=2", "-k", "refund")
    result.assert_outcomes(passed=4)
    names = {a["model"] + f"#{a['repeat']}" for a in latest_answers(pytester.path)}
    assert names == {"fake/alpha#0", "fake/alpha#1", "fake/alpha@concise#0", "fake/alpha@concise#1"}
    ids = collected(pytester.runpytest("--collect-only", "-q", WITH_VARIANT, "--evalmine-repeat=2"))
    assert "refund-no[fake/alpha@concise#r1]" in ids
    floor = latest_report(pytester.path)["paired"][0]["noise_floor"]
    assert floor["candidate"] is not None and floor["baseline"] is not None


PROMPTED = SMALL_SUITE.replace(
    "tasks:\n", "variants:\n  in-prompt: {schema_mode: prompted}\ntasks:\n", 1
)


def test_a_prompted_schema_variant_is_filed_as_prompted(pytester: pytest.Pytester) -> None:
    pytester.makefile(".eval.yaml", small=PROMPTED)
    pytester.makeconftest(LOGGING_CONFTEST)
    result = pytester.runpytest("--evalmine-models=fake/alpha,fake/alpha@in-prompt")
    result.assert_outcomes(passed=6)
    modes = {(a["model"], a["task"]): a["schema_mode"] for a in latest_answers(pytester.path)}
    assert modes == {
        ("fake/alpha", "triage"): "native",
        ("fake/alpha@in-prompt", "triage"): "prompted",
        ("fake/alpha", "polite"): None,
        ("fake/alpha@in-prompt", "polite"): None,
    }
    card = {row["model"]: row for row in latest_report(pytester.path)["scorecard"]}
    assert card["fake/alpha@in-prompt"]["schema_prompted"]["n"] == 2
    assert card["fake/alpha@in-prompt"]["schema_native"]["n"] == 0
    # The polite task has no schema: the variant asks it the same request, sent once.
    assert len(logged(pytester.path)) == 5


def test_an_adapter_that_ignores_a_prompted_schema_is_refused(pytester: pytest.Pytester) -> None:
    pytester.makefile(".eval.yaml", small=PROMPTED)
    pytester.makeconftest(
        LOGGING_CONFTEST.replace(
            "class Logging(FakeAdapter):\n",
            "class Logging(FakeAdapter):\n"
            "    def schema_mode(self, request):\n"
            "        return 'native' if request.schema is not None else None\n\n",
        )
    )
    result = pytester.runpytest("--evalmine-models=fake/alpha,fake/alpha@in-prompt")
    assert result.ret == exitcodes.REFUSED_BEFORE_SPENDING
    assert "does not put the schema in the prompt" in result.stdout.str() + result.stderr.str()
    assert logged(pytester.path) == []


def test_the_fake_answers_a_prompted_request_with_the_same_json() -> None:
    fake = FakeAdapter()
    native = asyncio.run(fake.complete(asked("fake/a", None)))
    prompted = asyncio.run(fake.complete(asked("fake/a", "prompted")))
    assert (native.schema_mode, prompted.schema_mode) == ("native", "prompted")
    assert native.text == prompted.text
