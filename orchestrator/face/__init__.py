"""The MCP face: the tools through which every client (the CLI, the TUI, other agents) drives sessions."""
