"""A real PostgreSQL server for the tests (Debian's ``postgresql`` package): ``initdb`` in a
temporary folder, ``pg_ctl`` on a free loopback port, stopped at the end. PostgreSQL refuses
to run as root, so as root the folder is given to ``nobody`` and the server's commands run
as that user (``setpriv``).

Roles: ``postgres`` (trusted from loopback, for the tests' own set-up) and ``evalmine``, who
logs in with ``PASSWORD`` (the password tests). Each test gets a database of its own,
``fresh_database``, copied from an empty template (fast)."""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PASSWORD = "pw-Zq8Kx3Lm0Vt7Rb2N"
USER = "evalmine"
TEMPLATE = "evalmine_template"
INSTALL = "apt-get install postgresql (the tests start their own server with initdb/pg_ctl)"


def server_bin() -> Path | None:
    """The folder of ``initdb``/``pg_ctl``: on PATH, else Debian's /usr/lib/postgresql/N/bin."""
    found = shutil.which("pg_ctl")
    if found and shutil.which("initdb"):
        return Path(os.path.realpath(found)).parent
    for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if (Path(folder) / "pg_ctl").exists() and (Path(folder) / "initdb").exists():
            return Path(folder)
    return None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class PostgresServer:
    bin: Path
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="evalmine-pg-")))
    port: int = field(default_factory=free_port)
    _names: itertools.count = field(default_factory=lambda: itertools.count(1))

    @property
    def data(self) -> Path:
        return self.root / "data"

    def _as_server_user(self, *command: str) -> list[str]:
        if os.geteuid() != 0:
            return list(command)
        return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", *command]

    def _run(self, *command: str) -> None:
        done = subprocess.run(
            self._as_server_user(*command), capture_output=True, text=True, timeout=120
        )
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed: {done.stdout}{done.stderr}")

    def start(self) -> None:
        if os.geteuid() == 0:
            shutil.chown(self.root, "nobody", "nogroup")
        self._run(
            str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust",
            "--no-sync", "-E", "UTF8",
        )  # fmt: skip
        (self.data / "pg_hba.conf").write_text(
            "local all all trust\n"
            f"host all {USER} 127.0.0.1/32 scram-sha-256\n"
            "host all all 127.0.0.1/32 trust\n"
        )
        self.launch()
        admin = self.admin()
        with admin:
            admin.execute(f"CREATE ROLE {USER} LOGIN PASSWORD '{PASSWORD}'")
            admin.execute(f"CREATE DATABASE {TEMPLATE} OWNER {USER}")

    def launch(self) -> None:
        options = (
            f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root} -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        self._run(
            str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.root / "log"),
            "-w", "-t", "60", "-o", options, "start",
        )  # fmt: skip

    def restart(self) -> None:
        """Stop at once (every connection broken) and start again on the same port."""
        self.halt()
        self.launch()

    def halt(self) -> None:
        """Stop the server (every connection broken), keeping its data: ``launch`` brings it
        back on the same port."""
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")
        with contextlib.suppress(Exception):
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop")
        shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str, *, password: bool = False) -> str:
        user = f"{USER}:{PASSWORD}" if password else "postgres"
        return f"postgresql://{user}@127.0.0.1:{self.port}/{database}"

    def admin(self) -> Any:
        import psycopg

        return psycopg.connect(self.url("postgres"), autocommit=True)

    def fresh_database(self) -> str:
        """A new, empty database owned by the password user: its name."""
        name = f"t{os.getpid()}_{next(self._names)}"
        with self.admin() as admin:
            admin.execute(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE} OWNER {USER}")
        return name
