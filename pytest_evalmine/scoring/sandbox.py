"""Running a command on an answer's code, isolated (spec: "Execution checks", M18).

Two sandboxes; which one runs is decided per check and recorded with every run:

- **bubblewrap** (``bwrap`` on PATH, able to create namespaces here): new user, PID, network,
  IPC and UTS namespaces; a read-only view of ``/usr``, ``/bin``, ``/lib*`` and a few ``/etc``
  files; the check's directory as the only writable place besides a small fresh ``/tmp`` and
  ``/dev/shm``; nothing of the project, the home directories or the suite visible; everything
  in the PID namespace dies with the command or at the timeout. The process limit is counted
  inside the check's own user namespace, so one check's fork bomb cannot starve another.
- **resource limits only** (no usable bwrap): the launcher alone. As root each check runs as a
  user id of its own from a small pool, so the process limit is the check's alone and every
  process of that user is killed after each run, whatever session it started; files it left at
  the top of ``/tmp``, ``/var/tmp`` and ``/dev/shm`` are removed. It cannot hide what is
  world-readable, and without root it can only kill the command's process group.

Either way: a fresh directory as the working directory, an allow-listed environment without
secrets, no stdin, resource limits set by a small launcher before the command starts, output
captured and capped, and a run whose output is still open at its timeout counts as timed out.
Nothing here is cached.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

ALLOWED_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")
# A variable whose name looks like it holds a credential never reaches the command.
SECRET_NAME = re.compile(
    r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE", re.IGNORECASE
)
NOBODY = 65534
POLL_S = 0.01
KILL_GRACE_S = 2.0  # for the output to close once every process of a run is killed
PROBE_TIMEOUT_S = 20.0

BUBBLEWRAP = "bubblewrap"
RESOURCE_LIMITS = "resource_limits"
SANDBOX_LINES = {
    BUBBLEWRAP: "exec checks: isolated by bubblewrap",
    RESOURCE_LIMITS: "exec checks: resource limits only; install bubblewrap for isolation",
}

# What the sandbox sees of the system, read-only (a symlink is recreated as one: merged /usr).
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_ENTRIES = (
    "alternatives",  # Debian's /usr/bin/awk, /usr/bin/node, ... point through here
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "nsswitch.conf",
)
ETC_GLOBS = ("/etc/python3*",)  # Debian's sitecustomize lives there

# Without bubblewrap, as root: each check runs as its own user id from this pool (above
# systemd's dynamic users, below nobody; a uid with an account is skipped). A pool entry is
# held, across processes, by binding an abstract socket named after it: released when the
# holder closes it or dies, and out of reach of a command that has a network namespace.
SLOT_UIDS = range(65520, 65534)
SLOT_LOCK_NAME = "\0pytest-evalmine-exec-uid-{uid}"
SLOT_WAIT_S = 0.05
# Where any user may create files; what a check's user left at their top is removed.
SHARED_TMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm")

# Runs in the child before the command: limits, an unprivileged user when started as root
# (root is exempt from RLIMIT_NPROC), then exec. Kept to the standard library and -S, and to
# what any Python 3 has: under bubblewrap it runs on the system's interpreter.
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

# Started as root, becomes the check's user and signals every process of that user (kill -1
# reaches every process whose real user id is the sender's, in any session or group) until
# /proc shows none alive. kill -1 itself cannot tell: it succeeds while any process exists.
KILL_ALL = """\
import os, signal, sys, time
uid = sys.argv[1]
os.setgroups([])
os.setgid(int(uid))
os.setuid(int(uid))
def alive():
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open("/proc/" + pid + "/status") as status:
                fields = dict(line.split(":", 1) for line in status if ":" in line)
        except OSError:
            continue
        state, uids = fields.get("State", "Z").split(), fields.get("Uid", "").split()
        if state[0] not in ("Z", "X") and uids[:1] == [uid]:
            return True
    return False
for _ in range(1000):
    os.kill(-1, signal.SIGKILL)
    if not alive():
        break
    time.sleep(0.005)
"""


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 10.0  # one run (setup, or one block)
    cpu_s: int = 10
    memory_mb: int = 1024
    file_mb: int = 16
    max_procs: int = 64
    output_kb: int = 64
    # What one answer may take in all: its runs' wall time, its blocks, and what its runs
    # leave in the check's directory (on the host's disk under either sandbox).
    answer_timeout_s: float = 30.0  # execution.limits_from: 3 x timeout_s unless set
    max_blocks: int = 8
    disk_mb: int = 64
    max_files: int = 1000


# How often a run's directory is measured while it runs (a run wrote 450 MB and 20,000 files
# in 2.2 s), and set when a Ctrl-C asks every run to stop now.
DISK_POLL_S = 0.05
STOPPING = threading.Event()


def directory_usage(folder: Path, max_files: int) -> tuple[int, int]:
    """(bytes, entries) under ``folder``, counting no further than ``max_files`` + 1
    entries; a folder or file that vanishes meanwhile is skipped."""
    size = entries = 0
    pending = [str(folder)]
    while pending and entries <= max_files:
        try:
            listing = list(os.scandir(pending.pop()))
        except OSError:
            continue
        for entry in listing:
            entries += 1
            try:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
                else:
                    size += entry.stat(follow_symlinks=False).st_blocks * 512
            except OSError:
                continue
    return size, entries


@dataclass(frozen=True)
class RunResult:
    exit_code: int | None  # None when the run was killed at its timeout
    timed_out: bool
    stdout: str
    stderr: str
    truncated: bool  # some output was beyond the cap and dropped
    duration_s: float
    network_isolated: bool
    sandbox: str = RESOURCE_LIMITS  # BUBBLEWRAP or RESOURCE_LIMITS
    # Why the run was stopped before it ended of itself, besides its timeout: the check's
    # directory over ``disk_mb``/``max_files``, or a Ctrl-C.
    stopped: str | None = None

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
            "sandbox": self.sandbox,
            "stopped": self.stopped,
        }


def sandbox_line(kind: str) -> str:
    """The one line the reports print for the sandbox that ran the execution checks."""
    return SANDBOX_LINES[kind]


def sandbox_kind() -> str:
    """BUBBLEWRAP when ``bwrap`` is on PATH and runs a command in its sandbox here (probed
    once per bwrap found), else RESOURCE_LIMITS."""
    return BUBBLEWRAP if _usable_bwrap() else RESOURCE_LIMITS


_PROBING = threading.Lock()


def _usable_bwrap() -> str | None:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return None
    with _PROBING:  # the pool's first checks arrive together: one probe, not one each
        refusal = bwrap_refusal(bwrap)
    return bwrap if refusal is None else None


@functools.cache
def bwrap_refusal(bwrap: str) -> str | None:
    """None when ``bwrap`` runs a command in the sandbox the checks use; else why not (its
    last line of stderr: no user namespaces, an option it lacks, ...)."""
    box = CheckSandbox(BUBBLEWRAP, bwrap, _make_workdir(_bwrap_user()), _bwrap_user())
    try:
        argv, fds = box.bwrap_argv("true", Limits())
        try:
            probe = subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=PROBE_TIMEOUT_S,
                env=sandbox_env({}, str(box.workdir)),
                pass_fds=fds,
                **_as_user(box.uid),
            )
        except (OSError, subprocess.SubprocessError) as error:
            return str(error)
        finally:
            for fd in fds:
                os.close(fd)
        if probe.returncode == 0:
            return None
        lines = probe.stderr.decode("utf-8", errors="replace").strip().splitlines()
        return lines[-1] if lines else f"exit {probe.returncode}"
    finally:
        shutil.rmtree(box.workdir, ignore_errors=True)


@functools.cache
def _bwrap_options(bwrap: str) -> frozenset[str]:
    """The optional flags this bwrap knows (from its --help): older ones lack some."""
    try:
        text = subprocess.run(
            [bwrap, "--help"], stdin=subprocess.DEVNULL, capture_output=True, timeout=10
        ).stdout.decode("utf-8", errors="replace")
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    return frozenset(re.findall(r"--[a-z-]+", text))


@functools.lru_cache(maxsize=1)
def network_prefix() -> tuple[str, ...] | None:
    """Without bubblewrap: the command prefix that gives a run its own (empty) network
    namespace, or None when this machine allows none. Probed once per process."""
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


@contextlib.contextmanager
def check_sandbox() -> Iterator[CheckSandbox]:
    """One check's sandbox: a fresh directory and the user its commands run as, for the
    check's setup and every block; afterwards nothing of it is left running or on disk."""
    bwrap = _usable_bwrap()
    if bwrap is not None:
        box = CheckSandbox(BUBBLEWRAP, bwrap, _make_workdir(_bwrap_user()), _bwrap_user())
        try:
            yield box
        finally:
            shutil.rmtree(box.workdir, ignore_errors=True)
        return
    if os.geteuid() != 0:
        box = CheckSandbox(RESOURCE_LIMITS, None, _make_workdir(None), None)
        try:
            yield box
        finally:
            shutil.rmtree(box.workdir, ignore_errors=True)
        return
    slot = _UidSlot.acquire()
    try:
        _kill_every_process_of(slot.uid)  # a crashed run's leftovers must not count against us
        box = CheckSandbox(RESOURCE_LIMITS, None, _make_workdir(slot.uid), slot.uid, True)
        try:
            yield box
        finally:
            _kill_every_process_of(slot.uid)
            _remove_files_of(slot.uid)  # the directory too, when it is at the top of /tmp
            shutil.rmtree(box.workdir, ignore_errors=True)
    finally:
        slot.release()


class CheckSandbox:
    """Runs one check's commands: ``kind`` says which sandbox, ``uid`` is the user they run
    as (None: ours), ``own_uid`` that no other process uses it (so all of its processes are
    the check's)."""

    def __init__(
        self, kind: str, bwrap: str | None, workdir: Path, uid: int | None, own_uid: bool = False
    ) -> None:
        self.kind = kind
        self.bwrap = bwrap
        self.workdir = workdir
        self.uid = uid
        self.own_uid = own_uid

    def write_file(self, name: str, text: str) -> Path:
        path = self.workdir / name
        path.write_text(text, encoding="utf-8")
        if self.uid is not None:
            os.chown(path, self.uid, self.uid)
        return path

    def run(self, command: str, limits: Limits, env: Mapping[str, str]) -> RunResult:
        """Run ``command`` with ``sh -c`` in the check's directory."""
        fds: list[int] = []
        user: dict[str, Any] = {}
        if self.kind == BUBBLEWRAP:
            argv, fds = self.bwrap_argv(command, limits)
            user = _as_user(self.uid)
            network_isolated = True
        else:
            prefix = network_prefix()
            settings = _launch_settings(limits, self._fallback_nproc(limits, prefix), self.uid)
            argv = [*(prefix or ()), sys.executable, "-S", "-c", LAUNCHER, json.dumps(settings)]
            argv += ["/bin/sh", "-c", command]
            network_isolated = prefix is not None
        started = time.monotonic()
        deadline = started + limits.timeout_s
        try:
            process = subprocess.Popen(
                argv,
                cwd=self.workdir,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # its own process group, killed whole below
                close_fds=True,
                pass_fds=fds,
                **user,
            )
        finally:
            for fd in fds:
                os.close(fd)
        cap = limits.output_kb * 1024
        assert process.stdout is not None and process.stderr is not None
        readers = [_CappedReader(process.stdout, cap), _CappedReader(process.stderr, cap)]
        for reader in readers:
            reader.start()
        exited, stopped = _wait_unreaped(process.pid, deadline, self.workdir, limits)
        ended = time.monotonic()
        # Whether it ended or timed out: every process left in its group dies now (the leader
        # is not reaped yet, so the group id cannot have been reused). Under bubblewrap the
        # leader is bwrap: its death takes the whole PID namespace with it.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        code = process.wait()
        if self.own_uid:
            assert self.uid is not None
            _kill_every_process_of(self.uid)  # also those in a session of their own
        # The output closes when the last process holding it is gone. Still open at the
        # deadline: something the command started is running, so the run has not ended in
        # time (only the fallback without root has processes it cannot reach).
        until = deadline if exited else time.monotonic() + KILL_GRACE_S
        for reader in readers:
            reader.join(max(0.0, until - time.monotonic()))
        timed_out = stopped is None and (not exited or any(reader.is_alive() for reader in readers))
        if stopped is None:
            stopped = _disk_problem(self.workdir, limits)  # what the last moments wrote
        out, err = readers
        return RunResult(
            exit_code=None if timed_out or stopped else code,
            timed_out=timed_out,
            stdout=out.text(),
            stderr=err.text(),
            truncated=bool(out.dropped or err.dropped),
            # Ended in time: until the command exited; else until it was killed.
            duration_s=(time.monotonic() if timed_out else ended) - started,
            network_isolated=network_isolated,
            sandbox=self.kind,
            stopped=stopped,
        )

    def bwrap_argv(self, command: str, limits: Limits) -> tuple[list[str], list[int]]:
        """bwrap's command line for ``command`` and the descriptors it reads files from."""
        assert self.bwrap is not None
        known = _bwrap_options(self.bwrap)
        workdir = str(self.workdir)
        python, python_binds = _system_python()
        args = [self.bwrap, "--unshare-user", "--unshare-pid", "--unshare-net"]
        args += ["--unshare-ipc", "--unshare-uts", "--hostname", "sandbox"]
        args += [flag for flag in ("--unshare-cgroup-try", "--disable-userns") if flag in known]
        args += ["--die-with-parent", "--new-session"]
        args += _system_view() + python_binds
        passwd, group = _identity(self.uid if self.uid is not None else os.getuid(), workdir)
        fds = [_data_fd(passwd), _data_fd(group)]
        args += ["--ro-bind-data", str(fds[0]), "/etc/passwd"]
        args += ["--ro-bind-data", str(fds[1]), "/etc/group"]
        args += ["--proc", "/proc", "--dev", "/dev"]
        # Writable tmpfs holds memory nobody limits: /tmp and /dev/shm hold at most a file's
        # limit each, and the rest (/, /dev, /etc) is made read-only once everything is in
        # place.
        size = ["--size", str(limits.file_mb * 1024 * 1024)] if "--size" in known else []
        args += [*size, "--tmpfs", "/tmp", *size, "--tmpfs", "/dev/shm"]
        args += ["--bind", workdir, workdir, "--chdir", workdir]
        args += ["--remount-ro", "/dev", "--remount-ro", "/"]
        # RLIMIT_NPROC counts the processes of the user in the check's own user namespace:
        # bwrap's init there is one of them.
        settings = _launch_settings(limits, limits.max_procs + 1, None)
        args += ["--", python, "-I", "-S", "-c", LAUNCHER, json.dumps(settings)]
        return [*args, "/bin/sh", "-c", command], fds

    def _fallback_nproc(self, limits: Limits, prefix: tuple[str, ...] | None) -> int:
        # RLIMIT_NPROC counts every process of the user: as a check's own user id (or in a
        # fresh user namespace) that is only the run's; otherwise the user's others count too.
        if self.uid is not None or (prefix is not None and "--user" in prefix):
            return limits.max_procs
        return limits.max_procs + _user_process_count(os.geteuid())


def _launch_settings(limits: Limits, procs: int, drop_to: int | None) -> dict[str, object]:
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
        "drop_to": drop_to,
    }


def _bwrap_user() -> int | None:
    # As root, bwrap runs as nobody: root's processes are exempt from RLIMIT_NPROC, and
    # root owns files a read-only view would then let it read.
    return NOBODY if os.geteuid() == 0 else None


def _as_user(uid: int | None) -> dict[str, Any]:
    return {} if uid is None else {"user": uid, "group": uid, "extra_groups": []}


def _system_view() -> list[str]:
    args: list[str] = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    entries = [f"/etc/{name}" for name in ETC_ENTRIES]
    entries += sorted(p for pattern in ETC_GLOBS for p in glob.glob(pattern))
    for path in entries:
        if os.path.lexists(path):
            args += ["--ro-bind-try", path, path]
    return args


def _system_python() -> tuple[str, list[str]]:
    """An interpreter the sandbox sees for the launcher (ours when it lives under /usr, else
    the system's), and the binds it needs (the installation of ours, when there is no other)."""
    own = os.path.realpath(sys.executable)
    for candidate in (own, "/usr/bin/python3", "/usr/local/bin/python3"):
        if candidate.startswith("/usr/") and os.access(candidate, os.X_OK):
            return candidate, []
    prefix = os.path.realpath(sys.base_prefix)
    return own, ["--ro-bind", prefix, prefix]


def _identity(uid: int, home: str) -> tuple[str, str]:
    """/etc/passwd and /etc/group of the sandbox: root, nobody and the user it runs as."""
    users = {0: ("root", "/"), NOBODY: ("nobody", "/nonexistent")}
    users[uid] = (users.get(uid, ("sandbox", ""))[0], home)
    passwd = "".join(f"{name}:x:{u}:{u}:{name}:{h}:/bin/sh\n" for u, (name, h) in users.items())
    group = "".join(f"{name}:x:{u}:\n" for u, (name, _) in users.items())
    return passwd, group


def _data_fd(text: str) -> int:
    """A descriptor bwrap reads ``text`` from (a pipe: the text is far below its buffer)."""
    read, write = os.pipe()
    with os.fdopen(write, "w", encoding="utf-8") as stream:
        stream.write(text)
    return read


def _make_workdir(uid: int | None) -> Path:
    """A fresh private directory owned by the user the commands run as."""
    workdir = Path(tempfile.mkdtemp(prefix="evalmine-exec-"))
    if uid is not None:
        os.chown(workdir, uid, uid)
    return workdir


class _UidSlot:
    """A user id from ``SLOT_UIDS`` that no other check (of any process here) runs as."""

    def __init__(self, uid: int, lock: socket.socket) -> None:
        self.uid, self._lock = uid, lock

    @classmethod
    def acquire(cls) -> _UidSlot:
        while True:
            # One whose killed processes are all reaped first (a zombie still counts toward
            # the process limit); else any free one.
            busy = _process_counts(SLOT_UIDS)
            for uid in sorted(SLOT_UIDS, key=lambda uid: busy.get(uid, 0) > 0):
                if _has_account(uid):
                    continue
                lock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    lock.bind(SLOT_LOCK_NAME.format(uid=uid))
                except OSError:
                    lock.close()
                    continue
                return cls(uid, lock)
            time.sleep(SLOT_WAIT_S)  # every slot busy: a check ends within its timeout

    def release(self) -> None:
        self._lock.close()


def _has_account(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


def _kill_every_process_of(uid: int) -> None:
    if not _process_counts((uid,)):
        return  # the usual case, and a scan of /proc is far cheaper than starting Python
    subprocess.run(
        [sys.executable, "-S", "-c", KILL_ALL, str(uid)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={},
        cwd="/",
        timeout=30,
        check=False,
    )


def _remove_files_of(uid: int) -> None:
    """Remove what ``uid`` created at the top of the shared temporary folders (its processes
    are gone, so nothing is added meanwhile)."""
    for folder in SHARED_TMP_DIRS:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
            except OSError:
                continue


def _user_process_count(uid: int) -> int:
    return _process_counts((uid,)).get(uid, 0)


def _process_counts(uids: range | tuple[int, ...]) -> dict[int, int]:
    """How many processes (zombies too) each of ``uids`` owns now."""
    counts: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdecimal():
            try:
                uid = entry.stat().st_uid
            except OSError:
                continue
            if uid in uids:
                counts[uid] = counts.get(uid, 0) + 1
    return counts


class _CappedReader(threading.Thread):
    """Reads a pipe to its end, keeping the first ``cap`` bytes (so a chatty command can
    neither block on a full pipe nor fill our memory)."""

    def __init__(self, stream: IO[bytes], cap: int) -> None:
        super().__init__(daemon=True)
        self.stream, self.cap = stream, cap
        self.kept = bytearray()
        self.dropped = 0

    def run(self) -> None:
        # read1: what has arrived, so the output so far is kept even if the pipe never closes
        while chunk := self.stream.read1(65536):
            room = self.cap - len(self.kept)
            self.kept += chunk[:room]
            self.dropped += max(0, len(chunk) - room)

    def text(self) -> str:
        return self.kept.decode("utf-8", errors="replace")


def _wait_unreaped(
    pid: int, deadline: float, workdir: Path, limits: Limits
) -> tuple[bool, str | None]:
    """Wait until ``pid`` exits (leaving it unreaped), the deadline passes, the check's
    directory outgrows its limits or a Ctrl-C asks every run to stop: (exited, why it was
    stopped)."""
    measured = time.monotonic()
    while True:
        if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
            return True, None
        now = time.monotonic()
        if STOPPING.is_set():
            return False, "interrupted"
        if now - measured >= DISK_POLL_S:
            measured = now
            problem = _disk_problem(workdir, limits)
            if problem is not None:
                return False, problem
        if now >= deadline:
            return False, None
        time.sleep(POLL_S)


def _disk_problem(workdir: Path, limits: Limits) -> str | None:
    size, entries = directory_usage(workdir, limits.max_files)
    if entries > limits.max_files:
        return f"wrote over {limits.max_files} files (max_files)"
    if size > limits.disk_mb * 1024 * 1024:
        return f"wrote over {limits.disk_mb} MB (disk_mb)"
    return None
