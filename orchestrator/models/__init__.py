"""Model providers behind one interface, selected by a ``provider:name`` spec.

``anthropic:claude-sonnet-4-5``, ``openai:deepseek-chat`` (any OpenAI-compatible endpoint; set
``OPENAI_BASE_URL``), ``scripted:PATH`` (a JSON script) and ``scripted:demo`` (the bundled demo).
Providers are imported only when selected, so that ``loom --help`` stays fast.
"""

from __future__ import annotations

import os
from pathlib import Path

from orchestrator.models.base import (
    Model,
    ModelError,
    ModelEvent,
    ModelRequest,
    ModelResponse,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
)

__all__ = [
    "DEFAULT_ANTHROPIC_MODEL",
    "DEMO_SCRIPT",
    "Model",
    "ModelError",
    "ModelEvent",
    "ModelRequest",
    "ModelResponse",
    "ModelSpecError",
    "TextDelta",
    "ToolCallDelta",
    "ToolSpec",
    "choose_model_spec",
    "default_model_spec",
    "resolve_model",
]

DEFAULT_ANTHROPIC_MODEL = "anthropic:claude-sonnet-4-5"
DEMO_SCRIPT = Path(__file__).resolve().parent.parent / "demo" / "explore.json"
PROVIDERS = ("anthropic", "openai", "scripted")
DEMO_SPEC = "scripted:demo"
DEMO_NOTICE = (
    "this run uses Loom's bundled scripted demo model: its words are pre-written, but every tool call "
    "is real and runs through Loom's fs and shell MCP servers. To use a real model, set ANTHROPIC_API_KEY "
    "(or pass --model anthropic:claude-sonnet-4-5), or pass --model openai:MODEL with OPENAI_BASE_URL and "
    "OPENAI_API_KEY for any OpenAI-compatible endpoint (DeepSeek, Kimi, Ollama, vLLM)."
)
"""Recorded as the first notice of a session on the demo model, whichever client created it."""


class ModelSpecError(ValueError):
    """A ``--model`` value Loom cannot use; the message says what would work."""


def default_model_spec() -> str:
    """What to use when nothing is configured: Anthropic if a key is set, else the scripted demo."""
    if os.environ.get("ANTHROPIC_API_KEY"):
        return DEFAULT_ANTHROPIC_MODEL
    return "scripted:demo"


def choose_model_spec(requested: str | None = None, configured: str | None = None) -> str:
    """The one rule for which model a new session uses, wherever it is started (``loom run``, the face).

    Args:
        requested: what the caller asked for (``--model``, ``create_session``'s ``model``).
        configured: the config's ``model``.

    Returns:
        ``requested``, else ``$LOOM_MODEL``, else ``configured``, else :func:`default_model_spec`.
    """
    return requested or os.environ.get("LOOM_MODEL") or configured or default_model_spec()


def resolve_model(spec: str, *, base_dir: Path | None = None) -> Model:
    """Build the model a spec names.

    Args:
        spec: ``provider:name``.
        base_dir: where relative script paths are resolved (default: the current directory).

    Raises:
        ModelSpecError: unknown provider, missing name, or an unreadable script.
    """
    provider, sep, name = spec.partition(":")
    if not sep or not name:
        raise ModelSpecError(
            f"model {spec!r} must look like PROVIDER:NAME, with PROVIDER one of {', '.join(PROVIDERS)}"
        )
    if provider == "anthropic":
        from orchestrator.models.anthropic import AnthropicModel

        return AnthropicModel(name)
    if provider == "openai":
        from orchestrator.models.openai_compat import OpenAICompatModel

        return OpenAICompatModel(name)
    if provider == "scripted":
        from orchestrator.models.scripted import ScriptedModel

        path = DEMO_SCRIPT if name == "demo" else (base_dir or Path.cwd()) / name
        try:
            return ScriptedModel.from_file(path, label=name)
        except ModelError as exc:
            raise ModelSpecError(str(exc)) from exc
    raise ModelSpecError(f"unknown model provider {provider!r}; use one of {', '.join(PROVIDERS)}")
