"""Which process holds a claim (``host:pid:start``) and whether it still runs: read from
this machine's process table, not from the database."""

from __future__ import annotations

import os
import socket


def process_owner() -> str:
    """``host:pid:start``: the start time tells a live owner from a later process that was
    given the same pid."""
    status = _start_time(os.getpid())
    return f"{socket.gethostname()}:{os.getpid()}:{status[1] if status else 0}"


def _start_time(pid: int) -> tuple[str, int] | None:
    """(state, start time in clock ticks since boot) of a process, from Linux's /proc;
    ``None`` where there is no /proc or no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rpartition(b")")[2].split()
    except OSError:
        return None
    return fields[0].decode(), int(fields[19])


def owner_alive(owner: str) -> bool:
    """Whether the process named by ``owner`` (``host:pid:start``) still runs. An owner on
    another host is taken to be alive: its process table cannot be read from here."""
    host, pid_text, start = [*owner.rsplit(":", 2), "0"][:3]
    if host != socket.gethostname():
        return True
    try:
        pid = int(pid_text)
        os.kill(pid, 0)
    except (ProcessLookupError, ValueError):
        return False
    except PermissionError:
        return True
    status = _start_time(pid)
    if status is None:
        return True
    state, started = status
    # A zombie (killed, not yet reaped) holds its pid but will never finish the call.
    return state != "Z" and (start in ("", "0") or int(start) == started)
