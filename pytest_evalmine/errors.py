"""Errors the core raises for the plugin, CLI and MCP server to present as one line."""

from __future__ import annotations


class EvalmineError(Exception):
    """Base class: the message is complete and meant for the user as it is."""


class SuiteError(EvalmineError):
    """A suite file cannot be used. Formats as ``file: path: what is wrong``."""

    def __init__(self, file: str, path: str, problem: str) -> None:
        self.file = file
        self.path = path
        self.problem = problem
        super().__init__(f"{file}: {path}: {problem}" if path else f"{file}: {problem}")


class PriceError(EvalmineError):
    """A model has no price row, or a price table is malformed."""


class RefusedError(EvalmineError):
    """The run was refused before any money was spent (cap or unknown model)."""
