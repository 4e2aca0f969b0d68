"""The two commands beside the pytest glue (spec: "Command line", "MCP server"): ``evalmine``
(``cli``), and ``evalmine-mcp`` (the ``mcp`` subpackage, one module per tool), a Model Context
Protocol server for agents. Both sit on top of the engine and read stored runs through
``engine.stored``; a run is always a pytest run (the MCP server starts it as a child process).
Nothing below imports this package, and it never imports the pytest glue; only ``mcp.server``
imports the ``mcp`` SDK.
"""
