"""Loom's own MCP servers.

Each subpackage is an ordinary, standalone MCP server: it imports nothing from ``orchestrator`` and
runs over stdio (``loom server NAME``) or in-process over the SDK's in-memory transport.
"""
