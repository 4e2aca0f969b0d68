"""Errors the core raises for the plugin, CLI and MCP server to present as one line."""

from __future__ import annotations

from collections.abc import Sequence


class EvalmineError(Exception):
    """Base class: the message is complete and meant for the user as it is."""


class SuiteError(EvalmineError):
    """A suite file cannot be used. Formats as ``file: path: what is wrong``, one line per
    problem: the first is ``file``/``path``/``problem``, the others come in ``more`` (already
    sorted by the caller); ``hidden`` counts problems left out to keep the message short."""

    def __init__(
        self,
        file: str,
        path: str,
        problem: str,
        *,
        more: Sequence[tuple[str, str, str]] = (),
        hidden: int = 0,
    ) -> None:
        self.file = file
        self.path = path
        self.problem = problem
        self.problems = ((file, path, problem), *more)
        lines = [f"{f}: {p}: {what}" if p else f"{f}: {what}" for f, p, what in self.problems]
        if hidden:
            lines.append(f"{file}: {hidden} more problem(s) not shown")
        super().__init__("\n".join(lines))


class StoreUnavailable(EvalmineError):
    """The shared store (a PostgreSQL server) cannot be reached or refused the connection:
    at start-up, or mid-run once an operation's tries are spent (the run then stops)."""


class PriceError(EvalmineError):
    """A model has no price row, or a price table is malformed."""


class RefusedError(EvalmineError):
    """The run was refused before any money was spent (cap or unknown model)."""


class EvalmineWarning(UserWarning):
    """Something that works but is likely not what the user meant (pytest lists it)."""
