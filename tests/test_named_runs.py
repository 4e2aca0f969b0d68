"""Named runs (spec: "Report files", named runs): ``--evalmine-run-name`` writes report.json's
``run_name``; ``NAME`` and ``NAME~K`` are read wherever a run id is: ``evalmine compare``,
``report``, ``--evalmine-compare``, the MCP tools; ``evalmine runs`` lists the names."""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path

import pytest

from pytest_evalmine.commands.cli import main
from pytest_evalmine.reports.render import money

from .conftest import SMALL_SUITE

# Imported with the module: the stdio client binds sys.stderr when it is imported.
with contextlib.suppress(ImportError):
    import mcp.client.stdio  # noqa: F401


def cli(capsys: pytest.CaptureFixture[str], root: Path, *args: str) -> tuple[int, str, str]:
    code = main([args[0], "--rootdir", str(root), *args[1:]])
    out, err = capsys.readouterr()
    return code, out, err


def run_dirs(root: Path) -> list[Path]:
    return sorted((root / "reports" / "small").glob("2*"))


@pytest.fixture
def named(pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> Path:
    """Four runs of one suite: llama, qwen3, llama again, and one without a name."""
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    for name in ("llama", "qwen3", "llama", None):
        flags = [f"--evalmine-run-name={name}"] if name else []
        result = pytester.runpytest("--evalmine-fake", "-p", "no:cacheprovider", *flags)
        result.assert_outcomes(passed=6)
    capsys.readouterr()
    return pytester.path


def test_a_name_is_its_latest_run_and_name_tilde_k_an_earlier_one(
    capsys: pytest.CaptureFixture[str], named: Path
) -> None:
    names = [json.loads((d / "report.json").read_text())["run_name"] for d in run_dirs(named)]
    assert names == ["llama", "qwen3", "llama", None]
    first, qwen, second, _ = (d.name for d in run_dirs(named))
    code, out, err = cli(capsys, named, "compare", "llama", "qwen3")
    assert code == 0, err
    assert out.splitlines()[0] == f"{second} -> {qwen}"
    code, out, err = cli(capsys, named, "compare", "llama~1", "llama~0")
    assert code == 0, err
    assert out.splitlines()[0] == f"{first} -> {second}"
    code, out, err = cli(capsys, named, "compare", "llama~2", "qwen3", "--json")
    assert code == 4 and out == ""
    # The error names every run of that name, newest first, as each can be given.
    assert "2 run(s) are named 'llama'" in err
    assert f"llama ({second}), llama~1 ({first})" in err
    code, _, err = cli(capsys, named, "report", "nosuchname")
    assert code == 4 and "a run name (NAME, NAME~K)" in err
    listing(capsys, named)
    shard_skipped(capsys, named)


def listing(capsys: pytest.CaptureFixture[str], named: Path) -> None:
    """`evalmine runs`: id, name, date, models, cases, pass rate, spend, verdict."""
    code, out, err = cli(capsys, named, "runs", "small")
    assert code == 0, err
    header, _, *rows = out.splitlines()
    assert header.split() == [
        "run", "name", "date", "models", "cases", "passed", "spent", "verdict"
    ]  # fmt: skip
    assert [row.split()[1] for row in rows] == ["llama", "qwen3", "llama", "-"]
    report = json.loads((run_dirs(named)[0] / "report.json").read_text())
    day = report["created_utc"][:10]
    for row in rows:
        # 3 cases x 2 models: 6 items, every one passed against the fake.
        assert day in row and "fake/alpha, fake/beta" in row
        assert "  3  " in row and "6/6 100.0%" in row
    spent = [
        json.loads((d / "report.json").read_text())["cost"]["spent_usd"] for d in run_dirs(named)
    ]
    for row, dollars in zip(rows, spent, strict=True):
        assert f"  {money(dollars)}  " in row


def test_evalmine_compare_and_the_mcp_tools_take_a_name(
    pytester: pytest.Pytester, named: Path
) -> None:
    pytest.importorskip("mcp", reason="the MCP tests need the mcp extra (pip install .[mcp])")
    mcp_tools_take_a_name(named)
    qwen = run_dirs(named)[1]
    result = pytester.runpytest(
        "--evalmine-fake", "-p", "no:cacheprovider", "--evalmine-compare=qwen3"
    )
    result.assert_outcomes(passed=6)
    latest = run_dirs(named)[-1]
    changes = json.loads((latest / "report.json").read_text())["changes"]
    assert changes["previous_run_id"] == qwen.name
    result = pytester.runpytest(
        "--evalmine-fake", "-p", "no:cacheprovider", "--evalmine-compare=qwen3~1"
    )
    assert result.ret == 4
    result.stderr.fnmatch_lines(
        ["*--evalmine-compare=qwen3~1: no run 'qwen3~1': 1 run(s) are named 'qwen3'*"]
    )


def shard_skipped(capsys: pytest.CaptureFixture[str], named: Path) -> None:
    # A partial run of a sharded run (report.json's "shard") carries the run's name too, and
    # is newer than every run of that name: NAME still names the whole run.
    _, qwen, second, _ = (d.name for d in run_dirs(named))
    shard = run_dirs(named)[-1].parent / "29991231T000000.000Z_ffffff-shard"
    shutil.copytree(run_dirs(named)[2], shard)
    report = json.loads((shard / "report.json").read_text())
    report |= {"run_id": shard.name, "shard": {"index": 1, "of": 2}}
    (shard / "report.json").write_text(json.dumps(report))
    code, out, err = cli(capsys, named, "compare", "llama", "qwen3")
    assert code == 0, err
    assert out.splitlines()[0] == f"{second} -> {qwen}"


@pytest.mark.parametrize("name", ["has space", "a~1", "../up", "-dash", "x" * 65])
def test_a_bad_name_is_a_usage_error_at_start(pytester: pytest.Pytester, name: str) -> None:
    pytester.makefile(".eval.yaml", small=SMALL_SUITE)
    result = pytester.runpytest(
        "--evalmine-fake", "-p", "no:cacheprovider", f"--evalmine-run-name={name}"
    )
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--evalmine-run-name: * is not a run name*"])
    assert not (pytester.path / "reports").exists()


def mcp_tools_take_a_name(named: Path) -> None:
    """Over the real stdio server, with the SDK's client."""
    from .test_mcp_server import over_stdio

    first, qwen, second, _ = (d.name for d in run_dirs(named))
    _, (shown, compared, listed, refused) = over_stdio(
        named,
        [
            ("show_run", {"run": "llama~1"}),
            ("compare", {"run_a": "llama", "run_b": "qwen3"}),
            ("list_runs", {"suite": "small"}),
            ("show_run", {"run": "llama~5"}),
        ],
    )
    assert shown["status"] == "ok" and shown["run"]["run_id"] == first
    assert (compared["run_a"], compared["run_b"]) == (second, qwen)
    assert [run["run_name"] for run in listed["runs"]] == ["llama", "qwen3", "llama", None]
    assert refused["status"] == "refused" and "2 run(s) are named 'llama'" in refused["reason"]
