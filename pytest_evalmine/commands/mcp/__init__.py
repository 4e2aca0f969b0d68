"""``evalmine-mcp``: the Model Context Protocol server for agents (spec: "MCP server"), one
module per tool or group of tools. ``server`` wires the tools into the SDK's server and is
the console script's entry point; the tools import the engine, reports and foundations below
them, never the pytest glue, and only ``server`` imports the ``mcp`` SDK.
"""
