"""Execution checks and their sandbox (spec: "Execution checks"): every isolation property
proven by running a real command on this machine."""

from __future__ import annotations

import shutil
import socket
import stat
import tempfile
from pathlib import Path

import pytest

from pytest_evalmine.scoring.execution import ExecJob, code_blocks, execute, run_exec_checks
from pytest_evalmine.scoring.sandbox import (
    Limits,
    RunResult,
    make_workdir,
    network_prefix,
    run_sandboxed,
    sandbox_env,
)
from pytest_evalmine.suite.loader import NO_GOLD

WAIT_FOR_DEATH = 500  # polls of 10 ms: a killed process needs a moment to be gone


@pytest.fixture
def workdir():
    path = make_workdir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


def run(command: str, workdir: Path, **limits: object) -> RunResult:
    return run_sandboxed(command, workdir, Limits(**limits), sandbox_env({}, str(workdir)))  # type: ignore[arg-type]


def is_gone(pid: int) -> bool:
    """Dead: no such process, or a zombie nobody has reaped yet."""
    import time

    for _ in range(WAIT_FOR_DEATH):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.01)
    return False


def test_each_run_gets_a_fresh_private_working_directory() -> None:
    first = execute(
        ExecJob(1, "```sh\npwd; ls -A; touch left-behind\n```", {"run": "sh $ANSWER"}, NO_GOLD)
    )
    second = execute(ExecJob(2, "```sh\npwd; ls -A\n```", {"run": "sh $ANSWER"}, NO_GOLD))
    first_dir = first.runs[0]["stdout_tail"].splitlines()[0]
    second_out = second.runs[0]["stdout_tail"].splitlines()
    assert first_dir != second_out[0]
    assert Path(first_dir).name.startswith("evalmine-exec-")
    assert sorted(second_out[1:]) == ["answer.txt", "answer_1.sh"]  # nothing left behind
    assert not Path(first_dir).exists() and not Path(second_out[0]).exists()


def test_the_environment_is_an_allow_list_without_secrets(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real")
    monkeypatch.setenv("MY_SERVICE_TOKEN", "abc")
    monkeypatch.setenv("HARMLESS_SETTING", "1")
    env = sandbox_env({"ANSWER": "a.py", "LEAKED_PASSWORD": "x"}, str(workdir))
    result = run_sandboxed("env", workdir, Limits(), env)
    names = {line.split("=", 1)[0] for line in result.stdout.splitlines()}
    assert names.isdisjoint(
        {"OPENAI_API_KEY", "MY_SERVICE_TOKEN", "HARMLESS_SETTING", "LEAKED_PASSWORD"}
    )
    assert {"PATH", "HOME", "TMPDIR", "ANSWER"} <= names
    assert "sk-test-not-real" not in result.stdout


def test_stdin_is_closed(workdir: Path) -> None:
    result = run('read line; echo "read exit $?, line [$line]"', workdir, timeout_s=30)
    assert not result.timed_out
    assert result.stdout.strip() == "read exit 1, line []"


def test_timeout_kills_the_whole_process_group(workdir: Path) -> None:
    result = run("sleep 300 & echo $! > child.pid; sleep 300", workdir, timeout_s=1)
    assert result.timed_out and result.exit_code is None and not result.passed
    assert is_gone(int((workdir / "child.pid").read_text()))


def test_a_grandchild_that_outlives_its_parent_is_killed(workdir: Path) -> None:
    # The shell exits at once; its background child would live on for five minutes.
    result = run("(sleep 300 & echo $! > grandchild.pid) ; echo parent done", workdir, timeout_s=30)
    assert result.passed and result.stdout.strip() == "parent done"
    assert is_gone(int((workdir / "grandchild.pid").read_text()))


def test_cpu_seconds_are_limited(workdir: Path) -> None:
    result = run('python3 -c "while True: pass"', workdir, cpu_s=1, timeout_s=60)
    assert not result.timed_out
    assert result.exit_code == 128 + 24  # SIGXCPU, as the shell reports its child


def test_address_space_is_limited(workdir: Path) -> None:
    script = "python3 -c 'x = bytearray(400 * 1024 * 1024)' 2>&1 | tail -1"
    result = run(script, workdir, memory_mb=200, timeout_s=60)
    assert result.stdout.strip() == "MemoryError"


def test_file_size_is_limited(workdir: Path) -> None:
    result = run("head -c 3000000 /dev/zero > big; echo exit $?", workdir, file_mb=1, timeout_s=60)
    assert result.stdout.strip() != "exit 0"
    assert (workdir / "big").stat().st_size <= 1024 * 1024


def test_process_count_is_limited(workdir: Path) -> None:
    result = run(
        "for i in 1 2 3 4 5 6 7 8 9 10; do sleep 2 & done; wait", workdir, max_procs=4, timeout_s=60
    )
    assert "fork" in result.stderr.lower(), result.stderr


def test_output_is_captured_and_capped(workdir: Path) -> None:
    result = run("head -c 500000 /dev/zero | tr '\\0' x; echo oops >&2", workdir, output_kb=1)
    assert result.passed
    assert result.stdout == "x" * 1024
    assert result.stderr == "oops\n"
    assert result.truncated


def test_no_network_where_the_os_allows_it(workdir: Path) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5)"
        inside = run(f'python3 -c "{code}"', workdir, timeout_s=30)
        if network_prefix() is None:
            assert not inside.network_isolated
            check = execute(ExecJob(1, "true", {"run": "true"}, NO_GOLD))
            assert check.message.endswith("network: not isolated")
            pytest.skip("this machine allows no network namespace: reported as not isolated")
        assert inside.network_isolated
        assert inside.exit_code != 0, "the loopback server was reachable from the sandbox"
        assert "Error" in inside.stderr
        socket.create_connection(("127.0.0.1", port), timeout=5).close()  # reachable outside


def test_blocks_run_in_order_and_the_last_is_the_verdict() -> None:
    text = (
        "First a helper:\n```python\nopen('helper.txt', 'w').write('42')\n"
        "raise SystemExit(3)\n```\n"
        "Then the check:\n```python\nassert open('helper.txt').read() == '42'\n```\n"
    )
    check = execute(ExecJob(1, text, {"run": "python3 $ANSWER"}, NO_GOLD))
    assert check.passed and check.score == 1.0
    assert [r["block"] for r in check.runs] == [1, 2]
    assert [r["exit_code"] for r in check.runs] == [3, 0]
    assert check.message == "exit 0 (block 2 of 2); network: " + (
        "isolated" if network_prefix() else "not isolated"
    )
    failing = execute(
        ExecJob(2, text.replace("== '42'", "== '43'"), {"run": "python3 $ANSWER"}, NO_GOLD)
    )
    assert not failing.passed and failing.got == "exit 1"
    assert "AssertionError" in failing.message


def test_setup_gold_and_answer_text() -> None:
    options = {"setup": "echo 7 > seed", "run": 'test "$(cat seed)" = 7 && python3 $ANSWER "$GOLD"'}
    code = "import json, sys\nassert json.load(open(sys.argv[1])) == {'n': 18}\n"
    assert execute(ExecJob(1, f"```py\n{code}```", options, {"n": 18})).passed
    assert not execute(ExecJob(2, f"```py\n{code}```", options, {"n": 17})).passed
    bad_setup = execute(ExecJob(3, "x", {"setup": "exit 9", "run": "true"}, NO_GOLD))
    assert not bad_setup.passed and bad_setup.message.startswith("exit 9 (setup)")
    assert code_blocks("no fences") == [("txt", "no fences")]


def test_the_pool_is_bounded() -> None:
    shared = Path(tempfile.mkdtemp(prefix="evalmine-pool-"))
    shared.chmod(stat.S_IRWXU | stat.S_IRWXG | stat.S_IRWXO | stat.S_ISVTX)
    try:
        command = (
            f"touch {shared}/$$.run; ls {shared} | grep -c run > {shared}/$$.seen; "
            f"sleep 0.3; rm {shared}/$$.run"
        )
        jobs = [ExecJob(i, "x", {"run": command}, NO_GOLD) for i in range(6)]
        results = run_exec_checks(jobs, workers=2)
        assert sorted(results) == list(range(6)) and all(c.passed for c in results.values())
        seen = [int(p.read_text()) for p in shared.glob("*.seen")]
        assert len(seen) == 6 and max(seen) <= 2
    finally:
        shutil.rmtree(shared)


SUITE = """\
version: 1
suite: executed
models: [fake/a]
tasks:
  - id: code
    kind: code
    prompt: "Write it {{ n }}"
    judge: false
    checks:
      - exec: {run: "python3 $ANSWER", timeout_s: 30}
    cases:
      - id: good
        vars: {n: 1, reply: "```python\\nimport os\\nprint(os.getpid())\\n```"}
      - id: bad
        vars: {n: 2, reply: "```python\\nraise ValueError('nope')\\n```"}
"""


def test_execution_checks_in_a_run_are_never_cached(pytester: pytest.Pytester) -> None:
    from .conftest import SCRIPTED_CONFTEST, latest_answers, latest_report

    pytester.makeconftest(SCRIPTED_CONFTEST)
    pytester.makefile(".eval.yaml", executed=SUITE)
    outputs = []
    for _ in range(2):
        result = pytester.runpytest()
        result.assert_outcomes(passed=1, failed=1)
        network = "isolated" if network_prefix() else "not isolated"
        result.stdout.fnmatch_lines(
            [
                "check 'exec' failed: exit 1 (block 1 of 1): ValueError: nope; network: *",
                f"execution checks: 2 run, 1 passed; network: {network}",
            ]
        )
        answers = {a["case"]: a for a in latest_answers(pytester.path, "executed")}
        outputs.append(answers["good"]["checks"][1]["runs"][0]["stdout_tail"])
    assert latest_report(pytester.path, "executed")["calls"] == {"made": 0, "cached": 2}
    assert outputs[0] != outputs[1], "the second run must execute again, not reuse a result"
