"""What the server allows (spec: "MCP server"): its settings from the environment, the suite
root every path an agent gives must resolve inside, and the ``Field`` the tools describe
their arguments with.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ...errors import EvalmineError

try:  # the tools' argument descriptions; pydantic comes with the SDK (the `mcp` extra)
    from pydantic import Field
except ImportError:  # pragma: no cover - main() says the SDK is missing
    Field = None  # only the SDK reads the annotations that name it

ROOT_ENV = "EVALMINE_MCP_SUITE_ROOT"
MAX_COST_ENV = "EVALMINE_MCP_MAX_COST"
CEILING_ENV = "EVALMINE_MCP_MAX_COST_CEILING"
TIMEOUT_ENV = "EVALMINE_MCP_TIMEOUT"
DEFAULT_MAX_COST_USD = 1.00
DEFAULT_CEILING_USD = 5.00
DEFAULT_TIMEOUT_S = 1800.0
REPORT_DIR = "reports"


@dataclass(frozen=True)
class Limits:
    """The server's settings, from its environment when it starts."""

    root: Path
    max_cost_usd: float = DEFAULT_MAX_COST_USD
    ceiling_usd: float = DEFAULT_CEILING_USD
    timeout_s: float = DEFAULT_TIMEOUT_S

    @classmethod
    def from_env(cls, environ: dict[str, str] | os._Environ[str]) -> Limits:
        def number(name: str, default: float) -> float:
            raw = environ.get(name)
            try:
                return float(raw) if raw else default
            except ValueError:
                raise EvalmineError(f"{name}={raw!r} is not a number") from None

        return cls(
            root=Path(environ.get(ROOT_ENV) or os.getcwd()).resolve(),
            max_cost_usd=number(MAX_COST_ENV, DEFAULT_MAX_COST_USD),
            ceiling_usd=number(CEILING_ENV, DEFAULT_CEILING_USD),
            timeout_s=number(TIMEOUT_ENV, DEFAULT_TIMEOUT_S),
        )

    @property
    def report_root(self) -> Path:
        return self.root / REPORT_DIR


class OutsideRoot(EvalmineError):
    pass


def confine(root: Path, given: str) -> Path:
    """``given`` (relative to the root, or absolute) with every symlink and ``..`` resolved;
    refused unless the result lies inside the root."""
    if "\x00" in given:
        raise OutsideRoot(f"{given!r}: not a path")
    resolved = (root / given).resolve()
    if resolved != root and root not in resolved.parents:
        raise OutsideRoot(f"{given}: resolves outside the suite root {root}")
    return resolved


def shown_path(path: Path, root: Path) -> str:
    return str(path.relative_to(root)) if path != root else "."
