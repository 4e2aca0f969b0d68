"""Built-in suites (spec: "Built-in suites"): a download from the pinned URL, verified by
sha256 and kept; nothing cached on a mismatch; a copy named by EVALMINE_DATA read in place and
checked the same way; ``--evalmine-limit``.

The logic runs on small files the tests write (tests/written_data.py), pinned by their own
sha256 and served from a loopback HTTP server, so a fresh clone exercises it. The tests of the
real pins read a copy of the public data sets (``shared_data``): without one they skip, naming
EVALMINE_DATA; under CI=true they fail."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_evalmine.suite import builtin
from pytest_evalmine.suite.builtin import (
    DATA_ENV,
    E2E,
    GSM8K,
    BuiltinSuiteError,
    DataFile,
    data_bytes,
    materialize,
    parse_mr,
    sha256_of,
)
from pytest_evalmine.suite.loader import load_suite

from .conftest import latest_report, shared_data
from .http_server import LoopbackServer, Received, Reply, running_server
from .written_data import E2E_LAST_ROW, GSM8K_STYLE, GSM8K_STYLE_GOLDS, e2e_bytes, gsm8k_bytes

# One more row than each suite takes: the last one must be left out of the cases.
SMALL_GSM8K = gsm8k_bytes(161)
SMALL_E2E = e2e_bytes(151)


def no_network(url: str) -> bytes:
    raise AssertionError(f"no download expected, got {url}")


@dataclasses.dataclass
class Pinned:
    """The built-in suites pinned to the small files, which ``server`` serves at their URLs."""

    server: LoopbackServer
    gsm8k: DataFile
    e2e: DataFile
    files: dict[str, bytes]  # URL path -> the bytes served there

    def requested(self) -> list[str]:
        return [request.path for request in self.server.requests]


@pytest.fixture
def pinned(monkeypatch: pytest.MonkeyPatch) -> Iterator[Pinned]:
    """``gsm8k-160`` and ``e2e-extract-150`` with their data file's URL and sha256 replaced by
    a loopback URL and the small file's sha256: everything else is the real code."""
    with running_server() as server:
        files = {
            "/pinned/gsm8k/test.jsonl": SMALL_GSM8K,
            "/pinned/e2e/testset_w_refs.csv": SMALL_E2E,
        }

        def serve(received: Received) -> Reply:
            body = files.get(received.path)
            if body is None:
                return Reply(status=404, body=b"not found")
            return Reply(body=body, headers={"Content-Type": "application/octet-stream"})

        server.respond = serve
        pins = {}
        for name, file, path in (
            ("gsm8k-160", GSM8K, "/pinned/gsm8k/test.jsonl"),
            ("e2e-extract-150", E2E, "/pinned/e2e/testset_w_refs.csv"),
        ):
            pins[name] = dataclasses.replace(
                file, url=server.url + path, sha256=sha256_of(files[path])
            )
            suite = dataclasses.replace(builtin.BUILTIN_SUITES[name], data=pins[name])
            monkeypatch.setitem(builtin.BUILTIN_SUITES, name, suite)
        yield Pinned(server, pins["gsm8k-160"], pins["e2e-extract-150"], files)


def offline_copy(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The small files laid out as an EVALMINE_DATA folder, which is set to it."""
    (folder / "gsm8k").mkdir(parents=True)
    (folder / "gsm8k" / "test.jsonl").write_bytes(SMALL_GSM8K)
    (folder / "e2e").mkdir()
    (folder / "e2e" / "testset_w_refs.csv").write_bytes(SMALL_E2E)
    monkeypatch.setenv(DATA_ENV, str(folder))
    return folder


def kept_files(home: Path) -> list[Path]:
    """Every file under the home's data folder, temporary ones included."""
    return sorted(path for path in (home / "data").rglob("*") if path.is_file())


# --- the logic, on small files ----------------------------------------------------------------


def test_a_pinned_download_is_verified_then_kept(pinned: Pinned, tmp_path: Path) -> None:
    assert data_bytes(pinned.gsm8k, tmp_path) == SMALL_GSM8K  # urllib, over loopback
    assert pinned.requested() == ["/pinned/gsm8k/test.jsonl"]
    assert kept_files(tmp_path) == [tmp_path / "data" / "gsm8k" / "test.jsonl"]
    assert kept_files(tmp_path)[0].read_bytes() == SMALL_GSM8K
    assert data_bytes(pinned.gsm8k, tmp_path, no_network) == SMALL_GSM8K  # from the home now
    assert pinned.requested() == ["/pinned/gsm8k/test.jsonl"]


def test_a_downloaded_checksum_mismatch_is_an_error_and_nothing_is_cached(
    pinned: Pinned, tmp_path: Path
) -> None:
    pinned.files["/pinned/e2e/testset_w_refs.csv"] = SMALL_E2E + b"\n"
    with pytest.raises(BuiltinSuiteError, match="checksum mismatch") as info:
        materialize("e2e-extract-150", tmp_path)
    message = str(info.value)
    assert message.startswith(pinned.e2e.url + ": checksum mismatch (sha256 ")
    assert f"expected {pinned.e2e.sha256}); nothing was cached" in message
    assert sha256_of(SMALL_E2E + b"\n") in message
    assert pinned.requested() == ["/pinned/e2e/testset_w_refs.csv"]
    assert kept_files(tmp_path) == [] and not (tmp_path / "suites").exists()


def test_a_failed_download_names_the_override(pinned: Pinned, tmp_path: Path) -> None:
    missing = dataclasses.replace(pinned.gsm8k, url=pinned.server.url + "/gone/test.jsonl")
    with pytest.raises(BuiltinSuiteError, match="HTTP Error 404") as info:
        data_bytes(missing, tmp_path)
    assert str(info.value).startswith(f"cannot download {missing.url}: ")
    assert str(info.value).endswith(
        f"set {DATA_ENV} to a folder holding gsm8k/test.jsonl to run offline"
    )
    assert kept_files(tmp_path) == []


def test_a_tampered_home_copy_is_refused(pinned: Pinned, tmp_path: Path) -> None:
    materialize("gsm8k-160", tmp_path)
    kept = tmp_path / "data" / "gsm8k" / "test.jsonl"
    kept.write_bytes(SMALL_GSM8K.replace(b"#### 14", b"#### 15", 1))
    with pytest.raises(BuiltinSuiteError, match="checksum mismatch") as info:
        materialize("gsm8k-160", tmp_path)
    assert str(info.value).startswith(f"{kept}: checksum mismatch")
    assert pinned.requested() == ["/pinned/gsm8k/test.jsonl"]  # no second download


def test_gsm8k_160_from_a_small_copy(
    pinned: Pinned, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    offline_copy(tmp_path / "copy", monkeypatch)
    suite = load_suite(materialize("gsm8k-160", tmp_path / "home", fetch=no_network))
    task = suite.tasks[0]
    assert suite.name == "gsm8k-160" and [c.name for c in task.checks] == ["number"]
    assert len(task.cases) == 160 and not task.judge
    assert [c.id for c in task.cases[:3]] == ["q0001", "q0002", "q0003"]
    assert task.cases[-1].id == "q0160"
    assert [c.gold for c in task.cases[: len(GSM8K_STYLE)]] == GSM8K_STYLE_GOLDS
    assert isinstance(task.cases[1].gold, int) and isinstance(task.cases[3].gold, float)
    assert task.cases[-1].gold == 154 * 12  # the 161st problem (155 crates) is left out
    assert task.cases[0].vars["question"] == GSM8K_STYLE[0]["question"]
    assert "Answer: <number>" in task.prompt
    assert not (tmp_path / "home" / "data").exists()  # the offline copy is read in place
    assert pinned.requested() == []


def test_e2e_extract_150_from_a_small_copy(
    pinned: Pinned, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    offline_copy(tmp_path / "copy", monkeypatch)
    suite = load_suite(materialize("e2e-extract-150", tmp_path / "home", fetch=no_network))
    task = suite.tasks[0]
    assert len(task.cases) == 150 and [c.name for c in task.checks] == ["json_fields"]
    assert (task.cases[0].id, task.cases[-1].id) == ("r0001", "r0150")
    second = task.cases[1]
    assert second.vars["text"].startswith("The Green Door, a family-friendly pub")
    assert second.gold == {
        "name": "The Green Door", "eatType": "pub", "food": "Italian", "priceRange": "£20-25",
        "customerRating": "5 out of 5", "area": "riverside", "familyFriendly": "yes",
        "near": "The Mill",
    }  # fmt: skip
    assert task.schema is not None
    properties = task.schema["properties"]
    # The enums list the values of the whole file: "restaurant" is only in row 151, no case.
    assert properties["eatType"]["enum"] == ["coffee shop", "pub", "restaurant", None]
    assert properties["food"]["enum"] == [
        "Chinese", "English", "French", "Indian", "Italian", "Japanese", None
    ]  # fmt: skip
    assert properties["name"] == {"type": ["string", "null"]}
    assert all(case.gold["eatType"] != "restaurant" for case in task.cases)
    assert E2E_LAST_ROW[1] not in {case.vars["text"] for case in task.cases}


def test_a_tampered_offline_copy_is_refused(
    pinned: Pinned, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = offline_copy(tmp_path / "copy", monkeypatch)
    materialize("gsm8k-160", tmp_path / "home", fetch=no_network)  # untouched: accepted
    target = copy / "gsm8k" / "test.jsonl"
    target.write_bytes(SMALL_GSM8K.replace(b"#### 14", b"#### 15", 1))
    with pytest.raises(BuiltinSuiteError, match=r"test.jsonl: checksum mismatch"):
        materialize("gsm8k-160", tmp_path / "home", fetch=no_network)
    assert not (tmp_path / "home" / "data").exists()


def test_a_missing_offline_copy_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "empty"))
    with pytest.raises(BuiltinSuiteError, match=f"{DATA_ENV}: cannot read .*test.jsonl"):
        materialize("gsm8k-160", tmp_path / "home", fetch=no_network)


def test_run_by_name_with_a_limit_downloads_once(
    pinned: Pinned, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = pytester.path / "home"
    monkeypatch.setenv("EVALMINE_HOME", str(home))
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
    assert pinned.requested() == ["/pinned/gsm8k/test.jsonl"]
    assert (home / "data" / "gsm8k" / "test.jsonl").read_bytes() == SMALL_GSM8K


def test_meaning_representations() -> None:
    assert parse_mr("name[The Eagle], customer rating[5 out of 5], near[Burger King]") == {
        "name": "The Eagle", "eatType": None, "food": None, "priceRange": None,
        "customerRating": "5 out of 5", "area": None, "familyFriendly": None,
        "near": "Burger King",
    }  # fmt: skip


def test_an_unknown_builtin_suite() -> None:
    with pytest.raises(BuiltinSuiteError, match="no built-in suite of that name"):
        materialize("mmlu", Path("/nonexistent"))


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


# --- the real pins, on a copy of the public data sets (skip without one) ----------------------


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> Path:
    data = shared_data()
    monkeypatch.setenv(DATA_ENV, str(data))
    return data


def test_gsm8k_160_from_the_public_copy(offline: Path, tmp_path: Path) -> None:
    suite = load_suite(materialize("gsm8k-160", tmp_path, fetch=no_network))
    task = suite.tasks[0]
    assert suite.name == "gsm8k-160" and [c.name for c in task.checks] == ["number"]
    assert len(task.cases) == 160 and not task.judge
    assert [c.id for c in task.cases[:3]] == ["q0001", "q0002", "q0003"]
    assert [c.gold for c in task.cases[:4]] == [18, 3, 70000, 540]
    assert task.cases[0].vars["question"].startswith("Janet\u2019s ducks lay 16 eggs")
    assert "Answer: <number>" in task.prompt
    assert not (tmp_path / "data").exists()  # the offline copy is read in place


def test_e2e_extract_150_from_the_public_copy(offline: Path, tmp_path: Path) -> None:
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


def test_the_public_file_matches_its_pin_and_is_kept(tmp_path: Path) -> None:
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


def test_a_public_file_one_byte_longer_is_refused(tmp_path: Path) -> None:
    tampered = (shared_data() / "e2e" / "testset_w_refs.csv").read_bytes() + b"\n"
    with pytest.raises(BuiltinSuiteError, match="checksum mismatch") as info:
        data_bytes(E2E, tmp_path, lambda url: tampered)
    assert "nothing was cached" in str(info.value) and E2E.sha256 in str(info.value)
    assert not (tmp_path / "data" / "e2e").exists() or not any(
        (tmp_path / "data" / "e2e").iterdir()
    )


def test_a_tampered_public_copy_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(shared_data() / "gsm8k", copy / "gsm8k")
    target = copy / "gsm8k" / "test.jsonl"
    target.chmod(0o644)
    target.write_bytes(target.read_bytes().replace(b"#### 18", b"#### 19", 1))
    monkeypatch.setenv(DATA_ENV, str(copy))
    with pytest.raises(BuiltinSuiteError, match=r"test.jsonl: checksum mismatch"):
        materialize("gsm8k-160", tmp_path / "home", fetch=no_network)


def test_run_by_name_with_a_limit_on_the_public_copy(
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
