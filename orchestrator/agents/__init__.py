"""Agent definitions: named roles (prompt, tools, model, mode) a child session can be started as.

:mod:`orchestrator.agents.definitions` parses one file (Claude Code's ``.claude/agents/*.md`` format),
:mod:`orchestrator.agents.loading` finds them in ``$LOOM_HOME/agents`` and ``<project>/.loom/agents`` and lists
them for the model, and :mod:`orchestrator.agents.claude` maps Claude Code's tool, mode and model names.
"""

from __future__ import annotations

from orchestrator.agents.definitions import AgentDefinition, AgentError, parse_definition
from orchestrator.agents.loading import AgentCatalog, find_agents, render_agents

__all__ = ["AgentCatalog", "AgentDefinition", "AgentError", "find_agents", "parse_definition", "render_agents"]
