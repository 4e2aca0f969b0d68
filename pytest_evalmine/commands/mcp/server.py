"""``evalmine-mcp``: an MCP server (stdio) for agents (spec: "MCP server").

Tools run a suite (pytest in a child process, so a crash, a hang or an import cached between
runs cannot reach the server), read and compare stored runs, and list suites. Every result is
a typed record: numbers, flags and node ids, never an answer's text, the numbers rounded as the
terminal prints them. A refusal (a path outside the suite root, a cap above the ceiling, a suite
that does not load, the plugin's own refusal before spending) is a result with
``status: "refused"``, not an exception, so the agent reads why.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from ...errors import EvalmineError
from .compare import CompareTool
from .limits import Limits
from .listing import ListingTools
from .merge import MergeTool
from .run_suite import RunSuiteTool


class Tools(RunSuiteTool, CompareTool, ListingTools, MergeTool):
    """The tools' logic, one class per tool or group of tools, each in its own module.
    ``build_server`` registers the methods ``TOOL_NAMES`` names as MCP tools: a method's
    docstring is the tool's description, its annotations the input and output schemas.

    A new tool: a ``ToolBase`` subclass in a module of its own (its method, its records in
    ``records``), added to these bases and its method's name to ``TOOL_NAMES``."""


# In the order the tool listing shows them.
TOOL_NAMES = (
    "run_suite",
    "compare",
    "last_report",
    "list_suites",
    "list_runs",
    "show_run",
    "merge_run",
)


def build_server(limits: Limits) -> Any:
    """The MCP server with its tools."""
    from mcp.server import MCPServer

    tools = Tools(limits)
    server = MCPServer(
        "evalmine",
        instructions=(
            "Run pytest-evalmine suites and read their results. Win rates flagged "
            "UNCALIBRATED (dagger) must not be reported as headline numbers."
        ),
    )

    for name in TOOL_NAMES:
        server.tool()(getattr(tools, name))
    return server


def main() -> None:
    """Entry point of ``evalmine-mcp``: serve on stdin/stdout until the client leaves."""
    try:
        limits = Limits.from_env(os.environ)
    except EvalmineError as exc:
        print(f"evalmine-mcp: {exc}", file=sys.stderr)
        raise SystemExit(4) from None
    try:
        server = build_server(limits)
    except ImportError:
        print(
            "evalmine-mcp: the MCP SDK is not installed: pip install 'pytest-evalmine[mcp]'",
            file=sys.stderr,
        )
        raise SystemExit(4) from None
    server.run("stdio")


if __name__ == "__main__":
    main()
