"""The hub: one MCP client per server, namespaced tool names, outcomes, retries and time limits."""
