"""Built-in suites (spec: "Built-in suites"): built offline from the shared data through
EVALMINE_DATA, downloads verified by sha256, nothing cached on a mismatch."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pytest_evalmine.suite.builtin import (
    DATA_ENV,
    E2E,
    GSM8K,
    BuiltinSuiteError,
    data_bytes,
    materialize,
    parse_mr,
)
from pytest_evalmine.suite.loader import load_suite

from .conftest import latest_report, shared_data


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(DATA_ENV, str(shared_data()))
    return shared_data()


def no_network(url: str) -> bytes:
    raise AssertionError(f"no download expected, got {url}")


def test_gsm8k_160_offline(offline: Path, tmp_path: Path) -> None:
    suite = load_suite(materialize("gsm8k-160", tmp_path, fetch=no_network))
    task = suite.tasks[0]
    assert suite.name == "gsm8k-160" and [c.name for c in task.checks] == ["number"]
    assert len(task.cases) == 160 and not task.judge
    assert [c.id for c in task.cases[:3]] == ["q0001", "q0002", "q0003"]
    assert [c.gold for c in task.cases[:4]] == [18, 3, 70000, 540]
    assert task.cases[0].vars["question"].startswith("Janet\u2019s ducks lay 16 eggs")
    assert "Answer: <number>" in task.prompt
    assert not (tmp_path / "data").exists()  # the offline copy is read in place


def test_e2e_extract_150_offline(offline: Path, tmp_path: Path) -> None:
    suite = load_suite(materialize("e2e-extract-150", tmp_path, fetch=no_network))
    task = suite.tasks[0]
    assert len(task.cases) == 150 and [c.name for c in task.checks] == ["json_fields"]
    first = task.cases[0]
    assert first.vars["text"] == "A coffee shop in the city centre area called Blue Spice."
    assert first.gold == {
        "name": "Blue Spice", "eatType": "coffee shop", "food": None, "priceRange": None,
        "customerRating": None, "area": "city centre", "familyFriendly": None, "near": None,
    }  # fmt: skip
    assert task.schema is not None
    assert task.schema["properties"]["eatType"]["enum"] == [
        "coffee shop",
        "pub",
        "restaurant",
        None,
    ]


def test_meaning_representations() -> None:
    assert parse_mr("name[The Eagle], customer rating[5 out of 5], near[Burger King]") == {
        "name": "The Eagle", "eatType": None, "food": None, "priceRange": None,
        "customerRating": "5 out of 5", "area": None, "familyFriendly": None,
        "near": "Burger King",
    }  # fmt: skip


def test_a_download_is_verified_then_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DATA_ENV, raising=False)
    real = (shared_data() / "gsm8k" / "test.jsonl").read_bytes()
    fetched: list[str] = []

    def fetch(url: str) -> bytes:
        fetched.append(url)
        return real

    assert data_bytes(GSM8K, tmp_path, fetch) == real
    assert fetched == [GSM8K.url]
    assert GSM8K.url.startswith(
        "https://raw.githubusercontent.com/openai/grade-school-math/3101c7d"
    )
    assert (tmp_path / "data" / "gsm8k" / "test.jsonl").read_bytes() == real
    assert data_bytes(GSM8K, tmp_path, no_network) == real  # from the home now


def test_a_checksum_mismatch_is_an_error_and_nothing_is_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(DATA_ENV, raising=False)
    tampered = (shared_data() / "e2e" / "testset_w_refs.csv").read_bytes() + b"\n"
    with pytest.raises(BuiltinSuiteError, match="checksum mismatch") as info:
        data_bytes(E2E, tmp_path, lambda url: tampered)
    assert "nothing was cached" in str(info.value) and E2E.sha256 in str(info.value)
    assert not (tmp_path / "data" / "e2e").exists() or not any(
        (tmp_path / "data" / "e2e").iterdir()
    )


def test_a_tampered_offline_copy_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(shared_data() / "gsm8k", copy / "gsm8k")
    target = copy / "gsm8k" / "test.jsonl"
    target.chmod(0o644)
    target.write_bytes(target.read_bytes().replace(b"#### 18", b"#### 19", 1))
    monkeypatch.setenv(DATA_ENV, str(copy))
    with pytest.raises(BuiltinSuiteError, match=r"test.jsonl: checksum mismatch"):
        materialize("gsm8k-160", tmp_path / "home", fetch=no_network)


def test_an_unknown_builtin_suite() -> None:
    with pytest.raises(BuiltinSuiteError, match="no built-in suite of that name"):
        materialize("mmlu", Path("/nonexistent"))


def test_run_by_name_with_a_limit(
    pytester: pytest.Pytester, offline: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALMINE_HOME", str(pytester.path / "home"))
    args = ["--evalmine-suite=gsm8k-160", "--evalmine-fake", "--evalmine-models=fake/a,fake/b"]
    result = pytester.runpytest(*args, "--evalmine-limit=3", "-v")
    result.assert_outcomes(failed=6)
    result.stdout.fnmatch_lines(
        [
            f"*gsm8k-160.eval.yaml::gsm8k::{case}?{model}? FAILED*"
            for case in ("q0001", "q0002", "q0003")
            for model in ("fake/a", "fake/b")
        ]
    )
    report = latest_report(pytester.path, "gsm8k-160")
    assert report["items"] == 6 and report["score_only"] is True
    result.stdout.fnmatch_lines(["-- Scores *", "*fake/a  gsm8k        3 *"])


def test_a_checksum_mismatch_stops_the_run_with_one_line(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = tmp_path / "copy" / "gsm8k"
    copy.mkdir(parents=True)
    (copy / "test.jsonl").write_text('{"question": "q", "answer": "#### 1"}\n')
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "copy"))
    result = pytester.runpytest("--evalmine-suite=gsm8k-160", "--evalmine-fake")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: *test.jsonl: checksum mismatch (sha256 *nothing was cached"]
    )
    assert "Traceback" not in result.stderr.str()
