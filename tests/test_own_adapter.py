"""Your own application as an adapter, first time right: a declared cost instead of a price
file, a one-line price file error at start-up, a cache fingerprint (and a warning without
one), and ``-n 2`` through the ``pytest_evalmine_adapters`` hook."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pytest_evalmine import code_fingerprint
from pytest_evalmine.errors import PriceError
from pytest_evalmine.run.prices import declared_row, load_prices

from .conftest import SMALL_SUITE

APP_SUITE = SMALL_SUITE.replace("models: [fake/alpha, fake/beta]", "models: [app/v1, app/v2]")

APP = """\
from pytest_evalmine import Response, Usage


class MyApp:
    name, version = "my-app", "1"
    {extra}

    def schema_mode(self, request):
        return None

    async def complete(self, request):
        text = '{{"category": "billing"}}' if "Classify" in request.prompt else "Sorry, no."
        return Response(text=text, usage=Usage(input_tokens=10, output_tokens=5), latency_s=0.0)

    async def aclose(self):
        pass
"""

FIXTURE = """
import pytest
from pytest_evalmine import AdapterRegistry


@pytest.fixture(scope="session")
def evalmine_adapters():
    registry = AdapterRegistry()
    registry.register("app", MyApp)
    return registry
"""

HOOK = """
def pytest_evalmine_adapters(registry, config):
    registry.register("app", MyApp)
"""


def own_app(pytester: pytest.Pytester, extra: str = "", registration: str = FIXTURE) -> None:
    pytester.makeconftest(APP.format(extra=extra) + registration)
    pytester.makefile(".eval.yaml", app=APP_SUITE)


def test_a_declared_free_cost_needs_no_price_file(pytester: pytest.Pytester) -> None:
    own_app(
        pytester,
        extra='cost = "free"\n    def key_extra(self, request):\n        return {"code": "abc"}',
    )
    result = pytester.runpytest("-W", "error::pytest_evalmine.errors.EvalmineWarning")
    result.assert_outcomes(passed=6)


def test_declared_prices_are_charged(pytester: pytest.Pytester) -> None:
    own_app(pytester, extra='cost = {"input": 1.0, "output": 2.0}')
    result = pytester.runpytest()
    result.assert_outcomes(passed=6)
    # 6 answers x (10 input x $1 + 5 output x $2) per million tokens.
    report = next(Path(pytester.path, "reports", "small").glob("*/report.json")).read_text()
    assert '"spent_usd": 0.00012' in report


def test_an_adapter_without_a_fingerprint_gets_a_warning(pytester: pytest.Pytester) -> None:
    own_app(pytester, extra='cost = "free"')
    result = pytester.runpytest()
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["*EvalmineWarning: adapter 'my-app' has no key_extra(request)*"])


def test_a_bad_declared_cost_is_one_line(pytester: pytest.Pytester) -> None:
    own_app(pytester, extra='cost = "cheap"')
    result = pytester.runpytest()
    assert result.ret == 10
    result.stdout.fnmatch_lines(["*adapter 'my-app': cost is 'free' or {input, output*"])
    assert "Traceback" not in result.stdout.str()


def test_own_adapter_from_the_hook_works_with_two_workers(pytester: pytest.Pytester) -> None:
    # A fingerprinted adapter: the warning for one without is tested above, and the
    # controller's warning would otherwise reach this test session's own summary.
    extra = 'cost = "free"\n    def key_extra(self, request):\n        return {"code": "abc"}'
    own_app(pytester, extra=extra, registration=HOOK)
    result = pytester.runpytest("-n", "2")
    result.assert_outcomes(passed=6)


def test_own_adapter_only_in_a_fixture_is_refused_under_xdist_with_the_way_out(
    pytester: pytest.Pytester,
) -> None:
    own_app(pytester, extra='cost = "free"')
    result = pytester.runpytest("-n", "2")
    assert result.ret == 10
    result.stdout.fnmatch_lines(
        ["*register your own adapter with the pytest_evalmine_adapters hook*"]
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("models: 3\n", "a price table is a mapping with a 'models' list"),
        ("models:\n  - {model: app/*, input: 1}\n", "models?0?: missing 'output'"),
        ("models:\n  - {model: app/*, input: -1, output: 1}\n", "a price is a finite number >= 0"),
        ("models: [\n", "not valid YAML"),
    ],
)
def test_a_bad_price_file_is_one_line_at_start_up(
    pytester: pytest.Pytester, content: str, message: str
) -> None:
    pytester.makefile(".yaml", myprices=content)
    own_app(pytester)
    result = pytester.runpytest("--evalmine-prices=myprices.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*myprices.yaml*{message}*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_a_user_price_file_needs_only_model_and_rates(tmp_path: Path) -> None:
    path = tmp_path / "prices.yaml"
    path.write_text("models:\n  - {model: app/*, input: 0.5, output: 1.5}\n", "utf-8")
    row = load_prices(path).lookup("app/v1")
    assert (row.input, row.output, row.source) == (0.5, 1.5, str(path))


@pytest.mark.parametrize(
    "cost",
    [
        "cheap",
        {"input": 1},
        {"input": 1, "output": float("nan")},
        {"input": 1, "output": 2, "extra": 1},
    ],
)
def test_declared_cost_shapes_are_checked(cost: object) -> None:
    with pytest.raises(PriceError):
        declared_row("app/*", cost, "adapter 'x'")


def test_code_fingerprint_follows_the_code(tmp_path: Path) -> None:
    source = tmp_path / "pipeline.py"
    source.write_text(textwrap.dedent("def answer(q):\n    return q\n"), "utf-8")
    before = code_fingerprint(source)
    assert code_fingerprint(source) == before
    source.write_text("def answer(q):\n    return q.upper()\n", "utf-8")
    assert code_fingerprint(source) != before
    assert len(before) == 16
