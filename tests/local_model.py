"""A real llama.cpp ``llama-server`` on loopback, for tests that need a real local model.

``scripts/local_model.sh`` builds the server and fetches a small GGUF model once (cached) and
prints the two variables this module reads:

- ``EVALMINE_LLAMA_SERVER``: path of the ``llama-server`` binary;
- ``EVALMINE_LOCAL_MODEL``: path of the ``.gguf`` model file.

Without them the tests that use :func:`llama_server` are skipped, or fail when
``EVALMINE_REQUIRE_LOCAL_MODEL=1`` (CI sets it, so a broken set-up never passes as skipped).
A variable that is set but names a missing file always fails.

Optional: ``EVALMINE_LLAMA_THREADS`` (compute threads, default 1) and
``EVALMINE_LLAMA_STARTUP_TIMEOUT`` (seconds to wait for ``/health``, default 60).

Use it from a test module with ``from .local_model import llama_server  # noqa: F401``.
The fixture is session-scoped: one server per pytest process (so one per xdist worker).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

SERVER_ENV = "EVALMINE_LLAMA_SERVER"
MODEL_ENV = "EVALMINE_LOCAL_MODEL"
REQUIRE_ENV = "EVALMINE_REQUIRE_LOCAL_MODEL"
STARTUP_TIMEOUT_ENV = "EVALMINE_LLAMA_STARTUP_TIMEOUT"
THREADS_ENV = "EVALMINE_LLAMA_THREADS"

HOW_TO = (
    'run `set -a; eval "$(scripts/local_model.sh)"; set +a` (builds llama-server and fetches '
    f"the model once, then caches them), or set {SERVER_ENV} and {MODEL_ENV} yourself"
)

# One slot: with several, temperature-0 answers can differ between runs. 2048 tokens of context
# is plenty for test prompts and keeps memory small.
SERVER_ARGS = ("-c", "2048", "-np", "1")
# One compute thread by default. ggml's threads wait for each other at every operation, so when
# another process holds a core (the other xdist worker's server, or anything else on a 2-core CI
# machine) two threads get many times slower; one thread stays near 0.5 s per 32-token answer.
DEFAULT_THREADS = "1"
STARTUP_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
BIND_ATTEMPTS = 3
LOG_TAIL_LINES = 80


@dataclass(frozen=True)
class LlamaServer:
    """A running server. ``base_url`` ends in ``/v1`` (OpenAI-compatible); ``model`` is the name
    the server answers with (it accepts any ``model`` in requests: it serves only this one)."""

    base_url: str
    model: str
    port: int
    pid: int
    log_path: Path

    @property
    def root_url(self) -> str:
        return self.base_url.removesuffix("/v1")

    def log_tail(self, lines: int = LOG_TAIL_LINES, start: int = 0) -> str:
        """The last ``lines`` lines of the server's output, from byte offset ``start``."""
        return _tail(self.log_path, lines, start)


def _tail(path: Path, lines: int, start: int = 0) -> str:
    try:
        with path.open("rb") as f:
            f.seek(start)
            data = f.read()
    except OSError as exc:
        return f"<cannot read {path}: {exc}>"
    text = data.decode("utf-8", "replace").splitlines()
    dropped = len(text) - lines
    head = [f"... ({dropped} earlier lines in {path})"] if dropped > 0 else []
    return "\n".join(head + text[-lines:])


def _configured_paths() -> tuple[Path, Path]:
    server, model = os.environ.get(SERVER_ENV), os.environ.get(MODEL_ENV)
    if not server or not model:
        missing = " and ".join(n for n, v in ((SERVER_ENV, server), (MODEL_ENV, model)) if not v)
        message = f"no local model: {missing} not set; {HOW_TO}"
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{message} ({REQUIRE_ENV}=1)", pytrace=False)
        pytest.skip(message)
    for name, value in ((SERVER_ENV, server), (MODEL_ENV, model)):
        if not Path(value).is_file():
            pytest.fail(f"{name}={value} is not a file; {HOW_TO}", pytrace=False)
    return Path(server), Path(model)


def _free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent_hook() -> Callable[[], None] | None:
    """A preexec_fn that makes the child get SIGTERM when pytest dies, even by SIGKILL.

    Linux only. libc is loaded here, in the parent: loading libraries after fork is unsafe.
    """
    if sys.platform != "linux":
        return None
    try:
        prctl = ctypes.CDLL(None).prctl
    except (OSError, AttributeError):
        return None

    def hook() -> None:
        prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG

    return hook


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _wait_ready(proc: subprocess.Popen[bytes], root_url: str, deadline: float) -> str | None:
    """Poll /health until it answers 200, then return the model id the server reports.

    None if the process exited first; raises TimeoutError at the deadline.
    """
    delay = 0.02
    with httpx.Client(timeout=2.0) as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return None
            try:
                if client.get(f"{root_url}/health").status_code == 200:
                    models = client.get(f"{root_url}/v1/models").json()
                    return models["data"][0]["id"]
            except httpx.TransportError:
                pass  # not listening yet
            time.sleep(delay)
            delay = min(delay * 2, 0.25)
    raise TimeoutError


class _LogOnFailure:
    """Adds the server output written during a failed test to that test's report."""

    def __init__(self, server: LlamaServer) -> None:
        self.server = server
        self.offsets: dict[str, int] = {}
        self.failed = False

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]):
        report = yield
        if "llama_server" not in getattr(item, "fixturenames", ()):
            return report
        if call.when == "setup":
            with contextlib.suppress(OSError):
                self.offsets[item.nodeid] = self.server.log_path.stat().st_size
        if report.failed:
            self.failed = True
            start = self.offsets.get(item.nodeid, 0)
            report.sections.append(
                (f"llama-server output ({self.server.log_path})", self.server.log_tail(start=start))
            )
        return report


@pytest.fixture(scope="session")
def llama_server(request: pytest.FixtureRequest) -> Iterator[LlamaServer]:
    """Start ``llama-server`` on a free 127.0.0.1 port; stop it at the end of the session."""
    server_bin, model_path = _configured_paths()
    timeout = float(os.environ.get(STARTUP_TIMEOUT_ENV, STARTUP_TIMEOUT_S))
    threads = os.environ.get(THREADS_ENV, DEFAULT_THREADS)
    # Without an alias the server names the model by its full path, which depends on the cache
    # location; the file's stem is stable ("SmolLM2-135M-Instruct.Q4_1").
    alias = model_path.name.removesuffix(".gguf")
    die_with_parent = _die_with_parent_hook()
    log_fd, log_name = tempfile.mkstemp(prefix="evalmine-llama-server-", suffix=".log")
    os.close(log_fd)
    log_path = Path(log_name)

    proc: subprocess.Popen[bytes] | None = None
    server: LlamaServer | None = None
    clean = False
    try:
        for attempt in range(1, BIND_ATTEMPTS + 1):
            port = _free_loopback_port()
            start_offset = log_path.stat().st_size
            cmd = [str(server_bin), "-m", str(model_path), "--alias", alias]
            cmd += ["--host", "127.0.0.1", "--port", str(port), "-t", threads, *SERVER_ARGS]
            with log_path.open("ab") as log:
                log.write(f"$ {' '.join(cmd)}\n".encode())
                log.flush()
                proc = subprocess.Popen(
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    preexec_fn=die_with_parent,
                )
            root_url = f"http://127.0.0.1:{port}"
            timed_out = False
            try:
                model = _wait_ready(proc, root_url, time.monotonic() + timeout)
            except TimeoutError:
                timed_out, model = True, None
            if timed_out:
                _stop(proc)
                pytest.fail(
                    f"llama-server not ready on {root_url} after {timeout:g} s "
                    f"(set {STARTUP_TIMEOUT_ENV} to wait longer); its output ({log_path}):\n"
                    + _tail(log_path, LOG_TAIL_LINES, start_offset),
                    pytrace=False,
                )
            if model is not None:
                server = LlamaServer(f"{root_url}/v1", model, port, proc.pid, log_path)
                break
            # Exited early. Another process may have taken the port between our probe and the
            # server's bind: try a new port; any other failure is final.
            output = _tail(log_path, LOG_TAIL_LINES, start_offset)
            if "couldn't bind" not in output or attempt == BIND_ATTEMPTS:
                pytest.fail(
                    f"llama-server exited with status {proc.returncode} during start-up; "
                    f"its output ({log_path}):\n{output}",
                    pytrace=False,
                )
        assert server is not None and proc is not None

        plugin = _LogOnFailure(server)
        request.config.pluginmanager.register(plugin, f"evalmine-llama-server-log-{port}")
        try:
            yield server
        finally:
            request.config.pluginmanager.unregister(plugin)
        if proc.poll() is not None:
            pytest.fail(
                f"llama-server exited with status {proc.returncode} during the session; "
                f"its output ({log_path}):\n{server.log_tail()}",
                pytrace=False,
            )
        _stop(proc)
        clean = proc.returncode in (0, -signal.SIGTERM) and not plugin.failed
    finally:
        if proc is not None:
            _stop(proc)
        # Kept (its path is in the failure messages and report sections) when something failed.
        if clean:
            with contextlib.suppress(OSError):
                log_path.unlink()
