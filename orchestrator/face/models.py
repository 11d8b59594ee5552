"""Which model a session the face creates runs on, checked before anything is recorded.

The rule ``loom run`` follows too: the caller's spec, ``$LOOM_MODEL``, the config's model, the default. A child
session asks for nothing by default: its agent definition's model, else its parent's. Either way the process
making the model calls is this one, so its environment decides: a missing key is refused before a session is
recorded, naming the variable, rather than failing the first run.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mcp.server.mcpserver.exceptions import ToolError

from orchestrator.models import DEMO_NOTICE, DEMO_SPEC, ModelSpecError, choose_model_spec, resolve_model
from orchestrator.models.base import Model
from orchestrator.models.credentials import missing_credentials
from orchestrator.runtime.host import HostError

if TYPE_CHECKING:
    from orchestrator.agents.definitions import AgentDefinition

__all__ = ["child_model", "top_level_model"]


def _checked(spec: str, cwd: Path) -> Model:
    chosen = resolve_model(spec, base_dir=cwd)
    problem = missing_credentials(chosen)
    if problem is not None:
        raise ToolError(f"{problem}; or choose another model")
    return chosen


def top_level_model(model: str | None, configured: str | None, cwd: Path) -> tuple[Model, str]:
    """A top-level session's model and the notice its session records (the demo model's, or none).

    Raises:
        ModelSpecError: the spec is malformed.
        ToolError: the model cannot be used from this process (a missing key).
    """
    spec = choose_model_spec(model, configured)
    return _checked(spec, cwd), DEMO_NOTICE if spec == DEMO_SPEC else ""


def child_model(model: str | None, parent: str, definition: AgentDefinition | None, cwd: Path) -> Model:
    """A child's model: the spec asked for, else its agent definition's, else its parent's.

    Raises:
        HostError: the spec is malformed or the model cannot be used (the message says why).
    """
    spec = model or (definition.model_spec(parent)[0] if definition is not None else parent)
    try:
        return _checked(spec, cwd)
    except (ModelSpecError, ValueError, ToolError) as exc:
        raise HostError(f"the child's model {spec!r} cannot be used: {exc}") from exc
