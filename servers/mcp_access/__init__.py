"""Other MCP servers' resources and prompts for the model, as Loom's in-process ``mcp_access`` server.

It needs a session's hub to reach the other servers, so it is not one of the standalone ``loom server`` servers.
"""

from servers.mcp_access._server import NAME, AccessServer, Gate, Peers, prepare_server

__all__ = ["NAME", "AccessServer", "Gate", "Peers", "prepare_server"]
