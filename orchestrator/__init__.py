"""Loom's orchestrator: the runtime that owns sessions and runs the agent loop.

Nothing in this package is imported by ``servers/`` or ``clients/``: the servers are standalone MCP
servers and the clients talk to the orchestrator only through MCP (or, for the headless CLI, through
the runtime's public surface).
"""
