"""The run session: composes the core for one run (load suites, plan and dispatch calls, check
answers, judge, calibrate, write reports, choose the exit code). The only core package that
may import all the others; the pytest plugin, the CLI and the MCP server drive it."""
