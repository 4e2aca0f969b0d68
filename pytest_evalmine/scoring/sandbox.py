"""Running a command on an answer's code, isolated (spec: "Execution checks", M18).

Each run gets a fresh temporary directory as its working directory, an environment reduced
to an allow-list, no stdin, its own process group (killed whole on timeout and after the
command ends, so a grandchild cannot outlive the check), resource limits set by a small
launcher before the command starts, a new network namespace where the OS allows one, and
captured output capped in size. Nothing here is cached.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

ALLOWED_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")
# A variable whose name looks like it holds a credential never reaches the command.
SECRET_NAME = re.compile(
    r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE", re.IGNORECASE
)
NOBODY = 65534
POLL_S = 0.01
READER_JOIN_S = 5.0

# Runs in the child before the command: limits, an unprivileged user when started as root
# (root is exempt from RLIMIT_NPROC), then exec. Kept to the standard library and -S.
LAUNCHER = """\
import json, os, resource, sys
limits = json.loads(sys.argv[1])
for name, (soft, hard) in limits["rlimits"].items():
    resource.setrlimit(getattr(resource, name), (soft, hard))
if limits["drop_to"] is not None:
    os.setgroups([])
    os.setgid(limits["drop_to"])
    os.setuid(limits["drop_to"])
os.execvp(sys.argv[2], sys.argv[2:])
"""


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 10.0
    cpu_s: int = 10
    memory_mb: int = 1024
    file_mb: int = 16
    max_procs: int = 64
    output_kb: int = 64


@dataclass(frozen=True)
class RunResult:
    exit_code: int | None  # None when the run was killed at its timeout
    timed_out: bool
    stdout: str
    stderr: str
    truncated: bool  # some output was beyond the cap and dropped
    duration_s: float
    network_isolated: bool

    @property
    def passed(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def summary(self) -> dict[str, object]:
        """What a record keeps of a run: status and the tails of its output."""
        return {
            "exit_code": self.exit_code,
            "timed_out": self.timed_out,
            "stdout_tail": self.stdout[-400:],
            "stderr_tail": self.stderr[-400:],
            "truncated": self.truncated,
            "duration_s": round(self.duration_s, 3),
        }


@functools.lru_cache(maxsize=1)
def network_prefix() -> tuple[str, ...] | None:
    """The command prefix that gives a run its own (empty) network namespace, or None when
    this machine allows none. Probed once per process."""
    if shutil.which("unshare") is None:
        return None
    candidates = [("unshare", "--net")] if os.geteuid() == 0 else []
    candidates.append(("unshare", "--user", "--map-root-user", "--net"))
    for prefix in candidates:
        try:
            probe = subprocess.run(
                [*prefix, "true"], stdin=subprocess.DEVNULL, capture_output=True, timeout=10
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if probe.returncode == 0:
            return prefix
    return None


def sandbox_env(extra: Mapping[str, str], home: str) -> dict[str, str]:
    """The allow-listed variables, never one whose name looks like a secret, plus ours."""
    env = {k: os.environ[k] for k in ALLOWED_ENV if k in os.environ}
    env.update(HOME=home, TMPDIR=home, PYTHONDONTWRITEBYTECODE="1")
    env.update(extra)
    return {k: v for k, v in env.items() if not SECRET_NAME.search(k)}


def _user_process_count(uid: int) -> int:
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdecimal():
            try:
                count += entry.stat().st_uid == uid
            except OSError:
                continue
    return count


def _launch_settings(limits: Limits, prefix: tuple[str, ...] | None) -> dict[str, object]:
    root = os.geteuid() == 0
    in_new_user_ns = prefix is not None and "--user" in prefix
    # RLIMIT_NPROC counts every process of the user: as nobody (or in a fresh user
    # namespace) that is only the run's own; otherwise the user's others count too.
    procs = limits.max_procs
    if not root and not in_new_user_ns:
        procs += _user_process_count(os.geteuid())
    mb = 1024 * 1024
    return {
        # (soft, hard). CPU: SIGXCPU at the soft limit, SIGKILL a second later.
        "rlimits": {
            "RLIMIT_CPU": (limits.cpu_s, limits.cpu_s + 1),
            "RLIMIT_AS": (limits.memory_mb * mb,) * 2,
            "RLIMIT_FSIZE": (limits.file_mb * mb,) * 2,
            "RLIMIT_NPROC": (procs, procs),
            "RLIMIT_CORE": (0, 0),
        },
        "drop_to": NOBODY if root else None,
    }


class _CappedReader(threading.Thread):
    """Reads a pipe to its end, keeping the first ``cap`` bytes (so a chatty command can
    neither block on a full pipe nor fill our memory)."""

    def __init__(self, stream: IO[bytes], cap: int) -> None:
        super().__init__(daemon=True)
        self.stream, self.cap = stream, cap
        self.kept = bytearray()
        self.dropped = 0

    def run(self) -> None:
        while chunk := self.stream.read(65536):
            room = self.cap - len(self.kept)
            self.kept += chunk[:room]
            self.dropped += max(0, len(chunk) - room)

    def text(self) -> str:
        return self.kept.decode("utf-8", errors="replace")


def run_sandboxed(
    command: str,
    workdir: Path,
    limits: Limits,
    env: Mapping[str, str],
) -> RunResult:
    """Run ``command`` with ``sh -c`` in ``workdir`` (which the caller made and owns)."""
    prefix = network_prefix()
    settings = _launch_settings(limits, prefix)
    argv = [
        *(prefix or ()),
        sys.executable,
        "-S",
        "-c",
        LAUNCHER,
        json.dumps(settings),
        "/bin/sh",
        "-c",
        command,
    ]
    started = time.monotonic()
    process = subprocess.Popen(
        argv,
        cwd=workdir,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group, killed whole below
        close_fds=True,
    )
    cap = limits.output_kb * 1024
    assert process.stdout is not None and process.stderr is not None
    readers = [_CappedReader(process.stdout, cap), _CappedReader(process.stderr, cap)]
    for reader in readers:
        reader.start()
    timed_out = not _wait_unreaped(process.pid, started + limits.timeout_s)
    # Whether it ended or timed out: every process left in its group dies now. The leader
    # is not reaped yet, so the group id cannot have been reused.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    code = process.wait()
    for reader in readers:
        reader.join(READER_JOIN_S)
    out, err = readers
    return RunResult(
        exit_code=None if timed_out else code,
        timed_out=timed_out,
        stdout=out.text(),
        stderr=err.text(),
        truncated=bool(out.dropped or err.dropped),
        duration_s=time.monotonic() - started,
        network_isolated=prefix is not None,
    )


def _wait_unreaped(pid: int, deadline: float) -> bool:
    """Wait until ``pid`` exits (leaving it unreaped) or the deadline passes; True if it
    exited."""
    while True:
        if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)


def make_workdir() -> Path:
    """A fresh private directory; the command's user (nobody, when we are root) owns it."""
    workdir = Path(tempfile.mkdtemp(prefix="evalmine-exec-"))
    if os.geteuid() == 0:
        os.chown(workdir, NOBODY, NOBODY)
    return workdir


def write_file(workdir: Path, name: str, text: str) -> Path:
    path = workdir / name
    path.write_text(text, encoding="utf-8")
    if os.geteuid() == 0:
        os.chown(path, NOBODY, NOBODY)
    return path
