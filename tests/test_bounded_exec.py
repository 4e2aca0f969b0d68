"""Bounded work per answer, execution checks (issue 28 section 4), under both sandboxes.

Before: ``timeout_s`` held per block, so an answer of n blocks ran n x its timeout, with no
bound on n; a check wrote 450 MB and 20,000 files in 2.2 s on the host's disk; and a Ctrl-C
waited for every check in flight and then ran the queued ones.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from pytest_evalmine.scoring.execution import ExecJob, execute, run_exec_checks
from pytest_evalmine.suite.loader import NO_GOLD

from .conftest import latest_report
from .test_sandbox import all_gone, kind, path_without_bwrap, token

__all__ = ["kind", "path_without_bwrap"]  # fixtures


def blocks(*codes: str) -> str:
    return "".join(f"```sh\n{code}\n```\n" for code in codes)


def test_the_answers_blocks_share_one_time_budget(kind: str) -> None:
    """Four blocks that each run into their 1 s timeout; the answer has 1.5 s in all, so the
    second run is cut short and no later one starts (before: four runs, 4 s)."""
    options = {"run": "sh $ANSWER", "timeout_s": 1, "answer_timeout_s": 1.5}
    check = execute(ExecJob(1, blocks(*["sleep 30"] * 4), options, NO_GOLD))
    assert not check.passed and check.score == 0.0
    assert 1 <= len(check.runs) < 4, check.runs
    assert "the answer's 1.5 s" in check.message, check.message


def test_an_answer_of_too_many_blocks_runs_none(kind: str) -> None:
    check = execute(ExecJob(1, blocks(*["true"] * 9), {"run": "sh $ANSWER"}, NO_GOLD))
    assert not check.passed and check.runs == ()
    assert check.message == "9 code blocks, more than max_blocks 8: none run"
    assert check.got == "not run"
    assert execute(ExecJob(2, blocks(*["true"] * 8), {"run": "sh $ANSWER"}, NO_GOLD)).passed


def test_a_run_that_fills_the_disk_is_stopped(kind: str) -> None:
    """100 files of 4 MB (400 MB, as fast as the disk takes them) against ``disk_mb: 8``:
    stopped while it writes, long before the last file."""
    script = "for i in $(seq 100); do head -c 4000000 /dev/zero > f$i && echo $i; done"
    options = {"run": "sh $ANSWER", "disk_mb": 8, "timeout_s": 120}
    check = execute(ExecJob(1, blocks(script), options, NO_GOLD))
    assert not check.passed and check.got == "stopped"
    assert check.message.startswith("stopped: wrote over 8 MB (disk_mb) (block 1 of 1)")
    written = check.runs[-1]["stdout_tail"].split()
    assert len(written) < 100 and check.runs[-1]["stopped"] == "wrote over 8 MB (disk_mb)"
    assert check.runs[-1]["exit_code"] is None and not check.runs[-1]["timed_out"]


def test_a_run_that_creates_too_many_files_is_stopped_and_later_blocks_do_not_run(
    kind: str,
) -> None:
    many = "mkdir d && cd d && for i in $(seq 20000); do : > f$i; done; echo done"
    options = {"run": "sh $ANSWER", "max_files": 50, "timeout_s": 120}
    check = execute(ExecJob(1, blocks(many, "echo second"), options, NO_GOLD))
    assert check.message.startswith("stopped: wrote over 50 files (max_files) (block 1 of 2)")
    assert [run["block"] for run in check.runs] == [1]
    assert "done" not in check.runs[0]["stdout_tail"]


def test_what_a_quick_run_wrote_is_measured_when_it_ends(kind: str) -> None:
    options = {"run": "sh $ANSWER", "max_files": 5}
    check = execute(ExecJob(1, blocks("touch a b c d e f g"), options, NO_GOLD))
    assert check.message.startswith("stopped: wrote over 5 files (max_files)"), check.message


def test_a_ctrl_c_stops_the_checks_in_flight_and_runs_no_queued_one(
    monkeypatch: pytest.MonkeyPatch, path_without_bwrap: str
) -> None:
    """Counted in a folder every check can write to (the fallback's: the pool and its stop do
    not depend on the sandbox): two of four checks had started when the Ctrl-C came, and are
    killed at once; before, the Ctrl-C waited for both to end of themselves."""
    monkeypatch.setenv("PATH", path_without_bwrap)
    shared = Path(tempfile.mkdtemp(prefix="evalmine-stop-"))
    shared.chmod(stat.S_IRWXU | stat.S_IRWXG | stat.S_IRWXO | stat.S_ISVTX)
    marker = token()
    command = f"touch {shared}/$$.start; sleep 20; touch {shared}/$$.end; : {marker}"
    jobs = [ExecJob(i, "x", {"run": command, "timeout_s": 60}, NO_GOLD) for i in range(4)]

    def interrupt_when_two_run() -> None:
        for _ in range(3000):
            if len(list(shared.glob("*.start"))) >= 2:
                break
            threading.Event().wait(0.01)
        os.kill(os.getpid(), signal.SIGINT)

    sender = threading.Thread(target=interrupt_when_two_run)
    sender.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_exec_checks(jobs, workers=2)
        sender.join()
        assert all_gone(marker)
        assert len(list(shared.glob("*.start"))) == 2
        assert not list(shared.glob("*.end"))  # before: the two in flight ran to their end
    finally:
        shutil.rmtree(shared)


RUN_SUITE = """\
version: 1
suite: slow
models: [fake/a]
tasks:
  - id: code
    kind: code
    prompt: "Write it {{{{ n }}}}"
    judge: false
    checks:
      - exec: {{run: "touch {shared}/$$.start; sleep 20; touch {shared}/$$.end", timeout_s: 60}}
    cases:
      - {{id: c1, vars: {{n: 1}}}}
      - {{id: c2, vars: {{n: 2}}}}
"""


def test_a_ctrl_c_while_execution_checks_run_stops_the_run_with_its_partial_report(
    pytester: pytest.Pytester, path_without_bwrap: str
) -> None:
    """The whole plugin, in a process of its own given SIGINT once both checks run (the
    fallback, so that a folder both the checks and this test see counts them): it exits as
    interrupted with its partial report, and the checks in flight were killed, not waited
    for (before, both ran their 20 s to the end)."""
    shared = Path(tempfile.mkdtemp(prefix="evalmine-stop-"))
    shared.chmod(stat.S_IRWXU | stat.S_IRWXG | stat.S_IRWXO | stat.S_ISVTX)
    pytester.makefile(".eval.yaml", slow=RUN_SUITE.format(shared=shared))
    log = open(pytester.path / "run.log", "w")  # noqa: SIM115 (closed below)
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", "--evalmine-fake", "-p", "no:cacheprovider"],
        cwd=pytester.path,
        env={**os.environ, "PATH": path_without_bwrap},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        for _ in range(6000):
            if len(list(shared.glob("*.start"))) >= 2 or process.poll() is not None:
                break
            threading.Event().wait(0.01)
        os.kill(process.pid, signal.SIGINT)
        # a generous bound, only so that a broken stop cannot hang the suite
        assert process.wait(timeout=120) == pytest.ExitCode.INTERRUPTED
        assert not list(shared.glob("*.end")), (pytester.path / "run.log").read_text()[-2000:]
        assert len(list(shared.glob("*.start"))) == 2
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()
        shutil.rmtree(shared)
    output = (pytester.path / "run.log").read_text()
    assert list(pytester.path.glob("reports/slow/*/report.json")), output[-3000:]
    report = latest_report(pytester.path, "slow")
    assert report["partial"] is True, output[-2000:]
    assert "Traceback" not in output
