"""Execution checks and their sandbox (spec: "Execution checks"): every isolation property
proven by running a real command on this machine, under bubblewrap and under the fallback
(bwrap hidden from PATH)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import stat
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_evalmine.scoring.execution import ExecJob, code_blocks, execute, run_exec_checks
from pytest_evalmine.scoring.sandbox import (
    BUBBLEWRAP,
    RESOURCE_LIMITS,
    CheckSandbox,
    Limits,
    RunResult,
    bwrap_refusal,
    check_sandbox,
    network_prefix,
    sandbox_env,
    sandbox_kind,
    sandbox_line,
)
from pytest_evalmine.suite.loader import NO_GOLD

from .conftest import unavailable

WAIT_FOR_DEATH = 500  # polls of 10 ms: a killed process needs a moment to be gone
REPOSITORY = Path(__file__).resolve().parents[1]
INSTALL = "install bubblewrap (apt-get install bubblewrap) to test execution checks under it"


@pytest.fixture(scope="session")
def path_without_bwrap() -> Iterator[str]:
    """PATH as it is, except that each folder holding ``bwrap`` is replaced by a folder of
    links to everything else in it: the same commands, in the same order, and no bwrap. The
    folders are world-readable: the fallback's commands run as another user."""
    shims = world_readable_folder("evalmine-nobwrap-")
    entries: list[str] = []
    for number, folder in enumerate(os.environ.get("PATH", "").split(os.pathsep)):
        if not (Path(folder) / "bwrap").exists():
            entries.append(folder)
            continue
        shim = shims / str(number)
        shim.mkdir(mode=0o755)
        for program in Path(folder).iterdir():
            if program.name != "bwrap":
                (shim / program.name).symlink_to(program)
        entries.append(str(shim))
    yield os.pathsep.join(entries)
    shutil.rmtree(shims)


def world_readable_folder(prefix: str) -> Path:
    """A new 0755 folder every user can reach: under the temporary folder when each of its
    ancestors lets every user through, else under /tmp (a TMPDIR in a 0700 home is not)."""
    base = Path(tempfile.gettempdir()).resolve()
    if not all(os.stat(folder).st_mode & stat.S_IXOTH for folder in (base, *base.parents)):
        base = Path("/tmp")
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
    folder.chmod(0o755)
    return folder


def require_bubblewrap() -> None:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        unavailable(f"bwrap is not on PATH: {INSTALL}")
    refusal = bwrap_refusal(bwrap)
    if refusal is not None:
        unavailable(f"bwrap cannot create its sandbox here ({refusal}): {INSTALL}, as a user "
                    "allowed to create user namespaces")  # fmt: skip


@pytest.fixture(params=[BUBBLEWRAP, RESOURCE_LIMITS])
def kind(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, path_without_bwrap: str
) -> str:
    """The test runs under each sandbox: bubblewrap (skipped where unusable, a failure under
    CI=true) and the fallback, with bwrap hidden from PATH."""
    if request.param == BUBBLEWRAP:
        require_bubblewrap()
    else:
        monkeypatch.setenv("PATH", path_without_bwrap)
    assert sandbox_kind() == request.param
    return request.param


@pytest.fixture
def box(kind: str) -> Iterator[CheckSandbox]:
    with check_sandbox() as sandbox:
        yield sandbox


def run(command: str, box: CheckSandbox, **limits: object) -> RunResult:
    return box.run(command, Limits(**limits), sandbox_env({}, str(box.workdir)))  # type: ignore[arg-type]


def token() -> str:
    return f"evalmine-test-{uuid.uuid4().hex}"


def processes_with(marker: str) -> list[int]:
    """Live (not zombie) processes whose command line holds ``marker``, any namespace."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdecimal():
            continue
        try:
            if marker.encode() not in (entry / "cmdline").read_bytes():
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def kill_all_with(marker: str) -> None:
    for pid in processes_with(marker):
        with contextlib.suppress(ProcessLookupError):  # it may have ended meanwhile
            os.kill(pid, signal.SIGKILL)


def all_gone(marker: str) -> bool:
    for _ in range(WAIT_FOR_DEATH):
        if not processes_with(marker):
            return True
        time.sleep(0.01)
    return False


def test_each_run_gets_a_fresh_private_working_directory(kind: str) -> None:
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
    assert first.runs[0]["sandbox"] == kind


def test_the_environment_is_an_allow_list_without_secrets(
    box: CheckSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real")
    monkeypatch.setenv("MY_SERVICE_TOKEN", "abc")
    monkeypatch.setenv("HARMLESS_SETTING", "1")
    env = sandbox_env({"ANSWER": "a.py", "LEAKED_PASSWORD": "x"}, str(box.workdir))
    result = box.run("env", Limits(), env)
    names = {line.split("=", 1)[0] for line in result.stdout.splitlines()}
    assert names.isdisjoint(
        {"OPENAI_API_KEY", "MY_SERVICE_TOKEN", "HARMLESS_SETTING", "LEAKED_PASSWORD"}
    )
    assert {"PATH", "HOME", "TMPDIR", "ANSWER"} <= names
    assert "sk-test-not-real" not in result.stdout


def test_stdin_is_closed(box: CheckSandbox) -> None:
    result = run('read line; echo "read exit $?, line [$line]"', box, timeout_s=30)
    assert not result.timed_out
    assert result.stdout.strip() == "read exit 1, line []"


def test_timeout_kills_the_whole_process_group(box: CheckSandbox) -> None:
    marker = token()
    command = f"python3 -c 'import time; time.sleep(300)' {marker} & sleep 300"
    result = run(command, box, timeout_s=1)
    assert result.timed_out and result.exit_code is None and not result.passed
    assert all_gone(marker)


def test_a_grandchild_that_outlives_its_parent_is_killed(box: CheckSandbox) -> None:
    # The shell exits at once; its background child would live on for five minutes.
    marker = token()
    command = f"(python3 -c 'import time; time.sleep(300)' {marker} &) ; echo parent done"
    result = run(command, box, timeout_s=30)
    assert result.passed and result.stdout.strip() == "parent done"
    assert all_gone(marker)


ESCAPE = """\
```python
import subprocess, sys
marker = sys.argv[1]
# Each in a session (and process group) of its own: a process-group kill misses them.
subprocess.Popen(["python3", "-c", "import time; time.sleep(40)", marker], start_new_session=True)
late = "import time; time.sleep(3); open('/tmp/' + __import__('sys').argv[1], 'w').write('late')"
subprocess.Popen(["python3", "-c", late, marker], start_new_session=True)
print("started")
```
"""


def test_a_process_in_a_session_of_its_own_does_not_outlive_the_check(kind: str) -> None:
    # Issue 20: `sleep 40` ran on after the run, a delayed write happened 8 s after it ended,
    # and the check said 10.1 s, not timed out, at timeout_s 5 (it waited for the output).
    marker = token()
    options = {"run": f"python3 $ANSWER {marker}", "timeout_s": 10}
    check = execute(ExecJob(1, ESCAPE, options, NO_GOLD))
    last = check.runs[-1]
    assert check.passed and last["stdout_tail"] == "started\n", check.runs
    assert not last["timed_out"] and last["duration_s"] <= options["timeout_s"]
    assert all_gone(marker), "a process the answer started outlived its check"
    assert not Path("/tmp", marker).exists()  # and so nothing happens later


EXHAUST = """\
```python
import os, sys, time
held = 0
while True:
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(120)
        os._exit(0)
    held += 1
print("holding", held, flush=True)
time.sleep(120)
```
"""
NEIGHBOUR = "```sh\nfor i in 1 2 3 4 5 6 7 8; do sleep 1 & done; wait; echo forked 8\n```"


def test_a_fork_bomb_leaves_other_checks_alone(kind: str) -> None:
    # Issue 20: the process limit counted every process of `nobody`, so one answer's fork
    # bomb made five unrelated checks fail with "Cannot fork". Here an answer takes every
    # process its limit allows and holds them while five others each start nine.
    marker = token()
    hold = {"run": f"python3 $ANSWER {marker}", "timeout_s": 300}
    bomb = ExecJob("bomb", EXHAUST, hold, NO_GOLD)
    verdict: dict[str, object] = {}
    thread = threading.Thread(target=lambda: verdict.update(bomb=execute(bomb)))
    thread.start()
    try:
        full = Limits().max_procs - 4  # its processes, less the shell, bwrap's init, slack
        for _ in range(6000):
            if len(processes_with(marker)) >= full or not thread.is_alive():
                break
            time.sleep(0.01)
        assert len(processes_with(marker)) >= full, "the bomb never took its processes"
        options = {"run": "sh $ANSWER", "timeout_s": 60}
        jobs = [ExecJob(i, NEIGHBOUR, options, NO_GOLD) for i in range(5)]
        results = run_exec_checks(jobs, workers=5)
        assert len(processes_with(marker)) >= full, "the bomb let go before the others ended"
    finally:
        kill_all_with(marker)  # the bomb's processes, started by this test
        thread.join(60)
    failed = {key: c.message for key, c in results.items() if not c.passed}
    assert not failed, failed
    assert all(c.runs[-1]["stdout_tail"] == "forked 8\n" for c in results.values())
    assert all_gone(marker) and "bomb" in verdict


def test_nothing_written_outside_the_check_stays(kind: str) -> None:
    # Issue 20: an answer wrote to /tmp, /dev/shm and /var/tmp and the files stayed.
    marker = token()
    places = [f"/tmp/{marker}", f"/dev/shm/{marker}", f"/var/tmp/{marker}", f"/tmp/{marker}-d"]
    places += [f"/{marker}", f"/etc/{marker}", f"/dev/{marker}"]  # nowhere else, either
    script = f"mkdir {places[3]} && echo x > {places[3]}/inside; " + "; ".join(
        f"echo x > {place} && echo wrote {place}" for place in places[:3] + places[4:]
    )
    check = execute(ExecJob(1, f"```sh\n{script}\n```", {"run": "sh $ANSWER"}, NO_GOLD))
    wrote = check.runs[-1]["stdout_tail"].splitlines()
    assert f"wrote /tmp/{marker}" in wrote, check.runs[-1]["stderr_tail"]  # it could write there
    if kind == BUBBLEWRAP:
        assert f"wrote /var/tmp/{marker}" not in wrote  # not even that: there is no /var/tmp
    left = [place for place in places if os.path.lexists(place)]
    assert not left, f"left behind: {left}"


def test_what_an_answer_can_read(box: CheckSandbox, kind: str) -> None:
    # Issue 20: an answer read every world-readable file, the cache database and the suite
    # file with its gold answers among them.
    # The world-readable files are the test's own, in a 0755 tree it makes: where the clone
    # lives (a 0700 home, a `mktemp -d`) must not decide what the fallback's user can see.
    project = world_readable_folder("evalmine-project-")
    try:
        suite, cache = project / "suite.eval.yaml", project / "evalmine-home" / "cache.sqlite"
        a_file_elsewhere = project / "elsewhere" / "notes.txt"
        for path in (suite, cache, a_file_elsewhere):
            path.parent.mkdir(mode=0o755, exist_ok=True)
            path.parent.chmod(0o755)  # whatever the umask
        suite.write_text("gold: the-secret-gold\n")
        cache.write_text("the-cached-answers\n")
        a_file_elsewhere.write_text("anything\n")
        for path in (suite, cache, a_file_elsewhere):
            path.chmod(0o644)
        elsewhere = [a_file_elsewhere, REPOSITORY / "pyproject.toml", "/home", "/root"]
        elsewhere += ["/etc/shadow", "/var", "/etc/hostname", "/opt", "/srv", "/sys"]
        script = f"cat {suite} {cache}; wc -l < /etc/passwd; " + "; ".join(
            f"test -e {path} && echo present {path}" for path in elsewhere
        )
        result = run(script, box)
    finally:
        shutil.rmtree(project)
    lines = result.stdout.splitlines()
    if kind == BUBBLEWRAP:
        # Nothing of them exists in there; /etc/passwd is its own: root, nobody and its user.
        assert lines == ["2"], result.stdout + result.stderr
        assert f"{suite}: No such file" in result.stderr
    else:
        # What the fallback cannot promise: every world-readable file is readable.
        assert lines[:2] == ["gold: the-secret-gold", "the-cached-answers"], result.stdout
        assert f"present {a_file_elsewhere}" in lines


def test_under_bubblewrap_its_tmpfs_hold_at_most_file_mb() -> None:
    # /tmp and /dev/shm are memory: unbounded, an answer could fill the machine's.
    require_bubblewrap()
    with check_sandbox() as sandbox:
        fill = "; ".join(
            f"head -c 700000 /dev/zero > {folder}/{n} && echo {folder}/{n}"
            for folder in ("/tmp", "/dev/shm")
            for n in (1, 2)
        )
        result = run(fill, sandbox, file_mb=1)
    assert result.stdout.split() == ["/tmp/1", "/dev/shm/1"], result.stderr
    assert "No space left on device" in result.stderr


def test_cpu_seconds_are_limited(box: CheckSandbox) -> None:
    result = run('python3 -c "while True: pass"', box, cpu_s=1, timeout_s=60)
    assert not result.timed_out
    assert result.exit_code == 128 + 24  # SIGXCPU, as the shell reports its child


def test_address_space_is_limited(box: CheckSandbox) -> None:
    script = "python3 -c 'x = bytearray(400 * 1024 * 1024)' 2>&1 | tail -1"
    result = run(script, box, memory_mb=200, timeout_s=60)
    assert result.stdout.strip() == "MemoryError"


def test_file_size_is_limited(box: CheckSandbox) -> None:
    result = run("head -c 3000000 /dev/zero > big; echo exit $?", box, file_mb=1, timeout_s=60)
    assert result.stdout.strip() != "exit 0"
    assert (box.workdir / "big").stat().st_size <= 1024 * 1024


def test_process_count_is_limited(box: CheckSandbox) -> None:
    result = run(
        "for i in 1 2 3 4 5 6 7 8 9 10; do sleep 2 & done; wait", box, max_procs=4, timeout_s=60
    )
    assert "fork" in result.stderr.lower(), result.stderr


def test_output_is_captured_and_capped(box: CheckSandbox) -> None:
    result = run("head -c 500000 /dev/zero | tr '\\0' x; echo oops >&2", box, output_kb=1)
    assert result.passed
    assert result.stdout == "x" * 1024
    assert result.stderr == "oops\n"
    assert result.truncated


def test_no_network_where_the_os_allows_it(box: CheckSandbox, kind: str) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5)"
        inside = run(f'python3 -c "{code}"', box, timeout_s=30)
        if kind == RESOURCE_LIMITS and network_prefix() is None:
            assert not inside.network_isolated
            check = execute(ExecJob(1, "true", {"run": "true"}, NO_GOLD))
            assert check.message.endswith("network: not isolated")
            pytest.skip("this machine allows no network namespace: reported as not isolated")
        assert inside.network_isolated
        assert inside.exit_code != 0, "the loopback server was reachable from the sandbox"
        assert "Error" in inside.stderr
        socket.create_connection(("127.0.0.1", port), timeout=5).close()  # reachable outside


def network_word() -> str:
    isolated = sandbox_kind() == BUBBLEWRAP or network_prefix() is not None
    return "isolated" if isolated else "not isolated"


def test_blocks_run_in_order_and_the_last_is_the_verdict(kind: str) -> None:
    text = (
        "First a helper:\n```python\nopen('helper.txt', 'w').write('42')\n"
        "raise SystemExit(3)\n```\n"
        "Then the check:\n```python\nassert open('helper.txt').read() == '42'\n```\n"
    )
    check = execute(ExecJob(1, text, {"run": "python3 $ANSWER"}, NO_GOLD))
    assert check.passed and check.score == 1.0
    assert [r["block"] for r in check.runs] == [1, 2]
    assert [r["exit_code"] for r in check.runs] == [3, 0]
    assert check.message == "exit 0 (block 2 of 2); network: " + network_word()
    failing = execute(
        ExecJob(2, text.replace("== '42'", "== '43'"), {"run": "python3 $ANSWER"}, NO_GOLD)
    )
    assert not failing.passed and failing.got == "exit 1"
    assert "AssertionError" in failing.message


def test_setup_gold_and_answer_text(kind: str) -> None:
    options = {"setup": "echo 7 > seed", "run": 'test "$(cat seed)" = 7 && python3 $ANSWER "$GOLD"'}
    code = "import json, sys\nassert json.load(open(sys.argv[1])) == {'n': 18}\n"
    assert execute(ExecJob(1, f"```py\n{code}```", options, {"n": 18})).passed
    assert not execute(ExecJob(2, f"```py\n{code}```", options, {"n": 17})).passed
    bad_setup = execute(ExecJob(3, "x", {"setup": "exit 9", "run": "true"}, NO_GOLD))
    assert not bad_setup.passed and bad_setup.message.startswith("exit 9 (setup)")
    assert code_blocks("no fences") == [("txt", "no fences")]


def test_the_pool_is_bounded(monkeypatch: pytest.MonkeyPatch, path_without_bwrap: str) -> None:
    # Counted in a folder every check can write to: only the fallback has one (the pool does
    # not depend on the sandbox).
    monkeypatch.setenv("PATH", path_without_bwrap)
    shared = world_readable_folder("evalmine-pool-")
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
        vars: {n: 1, reply: "```python\\nimport os\\nprint(os.getpid(), os.urandom(8).hex())\\n```"}
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
        result.stdout.fnmatch_lines(
            [
                "check 'exec' failed: exit 1 (block 1 of 1): ValueError: nope; network: *",
                f"execution checks: 2 run, 1 passed; network: {network_word()}",
                sandbox_line(sandbox_kind()),  # whichever this machine has
            ]
        )
        answers = {a["case"]: a for a in latest_answers(pytester.path, "executed")}
        outputs.append(answers["good"]["checks"][1]["runs"][0]["stdout_tail"])
    assert latest_report(pytester.path, "executed")["calls"] == {"made": 0, "cached": 2}
    assert outputs[0] != outputs[1], "the second run must execute again, not reuse a result"


# An adapter of its own whose answers are the attacks of issue 20, by the case's `attack`.
HOSTILE_CONFTEST = """\
import pytest
from pytest_evalmine import AdapterRegistry, Response, Usage

ANSWERS = {answers!r}


class Hostile:
    name = "hostile"
    version = "1"

    def schema_mode(self, request):
        return None

    async def complete(self, request):
        text = ANSWERS[request.context["vars"]["attack"]]
        return Response(text=text, usage=Usage(input_tokens=5, output_tokens=5), latency_s=0.0)

    async def aclose(self):
        pass


@pytest.fixture(scope="session")
def evalmine_adapters():
    registry = AdapterRegistry()
    registry.register("fake", Hostile)
    return registry
"""

HOSTILE_SUITE = """\
version: 1
suite: hostile
models: [fake/a]
tasks:
  - id: attacks
    kind: code
    prompt: "Attack: {{{{ attack }}}}"
    judge: false
    checks:
      - exec: {{run: "python3 $ANSWER {marker}", timeout_s: 6}}
    cases:
      - {{id: escape, vars: {{attack: escape}}, gold: another-case-gold-{marker}}}
      - {{id: bomb, vars: {{attack: bomb}}}}
      - {{id: neighbour-1, vars: {{attack: neighbour}}}}
      - {{id: neighbour-2, vars: {{attack: neighbour}}}}
      - {{id: neighbour-3, vars: {{attack: neighbour}}}}
      - {{id: leak, vars: {{attack: leak}}}}
      - {{id: peek, vars: {{attack: peek}}}}
"""


def test_a_run_of_hostile_answers(
    kind: str, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 20's attacks as a model's answers in a real run, and which sandbox ran them in
    the terminal, report.md, report.json and report.html. The suite, the cache and the
    reports sit in a world-readable folder, as a project's would."""
    from .conftest import latest_answers, latest_report, newest_run_dir

    marker = token()
    project = world_readable_folder("evalmine-project-")
    home = project / "evalmine-home"
    monkeypatch.setenv("EVALMINE_HOME", str(home))
    places = [f"/tmp/{marker}", f"/dev/shm/{marker}", f"/var/tmp/{marker}"]
    leak = (
        f"for place in {places!r}:\n"
        "    try:\n        open(place, 'w').write('x')\n"
        "    except OSError as error:\n        print(error)\n"
    )
    peek = (
        "import os\n"
        f"try:\n    print(*(line for line in open({str(project / 'hostile.eval.yaml')!r})\n"
        "                if 'gold' in line))\n"
        "except OSError as error:\n    print(type(error).__name__)\n"
        f"try:\n    print(os.listdir({str(home)!r}))\n"
        "except OSError as error:\n    print(type(error).__name__)\n"
    )
    answers = {
        "escape": ESCAPE,
        "bomb": EXHAUST,
        "neighbour": "```python\nimport subprocess\n"
        "children = [subprocess.Popen(['sleep', '1']) for _ in range(8)]\n"
        "assert all(child.wait() == 0 for child in children)\n```",
        "leak": f"```python\n{leak}```",
        "peek": f"```python\n{peek}```",
    }
    (project / "conftest.py").write_text(HOSTILE_CONFTEST.format(answers=answers))
    (project / "hostile.eval.yaml").write_text(HOSTILE_SUITE.format(marker=marker))
    try:
        result = pytester.runpytest(str(project), f"--rootdir={project}")
        records = {a["case"]: a for a in latest_answers(project, "hostile")}
        report = latest_report(project, "hostile")
        run_dir = newest_run_dir(project, "hostile")
        markdown = (run_dir / "report.md").read_text()
        html = (run_dir / "report.html").read_text()
        assert all_gone(marker), "a process an answer started outlived the run"
        left = [place for place in places if os.path.lexists(place)]
    finally:
        kill_all_with(marker)  # only if the run left some: started by this test
        shutil.rmtree(project)
    outcomes = {case: r["outcome"] for case, r in records.items()}
    assert outcomes == {
        "escape": "passed",
        "bomb": "failed",  # held every process it could until its timeout
        "neighbour-1": "passed",
        "neighbour-2": "passed",
        "neighbour-3": "passed",
        "leak": "passed",
        "peek": "passed",
    }, result.stdout.str()
    bomb = records["bomb"]["checks"][-1]
    assert bomb["runs"][-1]["timed_out"] and bomb["runs"][-1]["sandbox"] == kind
    escape = records["escape"]["checks"][-1]["runs"][-1]
    assert not escape["timed_out"] and escape["duration_s"] <= 6
    assert not left, f"left behind: {left}"
    peeked = records["peek"]["checks"][-1]["runs"][-1]["stdout_tail"]
    if kind == BUBBLEWRAP:
        # Neither the suite nor EVALMINE_HOME exists in there.
        assert peeked == "FileNotFoundError\nFileNotFoundError\n", peeked
    else:  # what the fallback cannot promise
        assert f"another-case-gold-{marker}" in peeked and "cache.sqlite" in peeked
    line = sandbox_line(kind)
    result.stdout.fnmatch_lines([line])
    assert line in markdown and line in html
    assert report["exec_sandbox"] == kind
