"""Tool metadata built once per process, bound to each server's own state in microseconds.

``Tool.from_function`` inspects a signature, builds a pydantic model of the arguments and one of the result, and
generates both JSON schemas: milliseconds per tool. A server built per session (Loom builds fs, shell, memory and
its own ``loom`` tools for every session it opens) would pay that every time for schemas that depend only on the
function's signature. `bound_tool` builds them the first time a function is seen and afterwards copies the built
tool with the new callable: a bound method of this server's own state object, so what one server's tools can see
(roots, working directory, database, session id) lives in that object and nowhere in the shared template.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

from mcp.server.mcpserver.tools import Tool
from mcp.types import ToolAnnotations

__all__ = ["bound_tool", "template_count"]

_TEMPLATES: dict[tuple[Callable[..., Any], bool | None], Tool] = {}
"""Built tools by (underlying function, structured_output), their callable replaced by `_template_only`.

Keys are module functions and the functions behind methods, which live as long as the process, so the cache holds
one entry per tool function Loom defines. A race between threads building the same server at once at worst builds
a template twice; both results are equal.
"""


def _template_only(*_args: Any, **_kwargs: Any) -> NoReturn:
    raise RuntimeError("a shared tool template was called; tools must be bound with bound_tool")


def bound_tool(
    fn: Callable[..., Any],
    *,
    name: str,
    description: str | None = None,
    annotations: ToolAnnotations | None = None,
    structured_output: bool | None = None,
) -> Tool:
    """A tool calling ``fn``, with its argument model and schemas built once per process for ``fn``'s function.

    Pass the result to ``MCPServer(tools=[...])``; it is what ``server.add_tool(fn, ...)`` would register.

    Args:
        fn: A module-level function, or a method bound to the state object of the server being built. Two bound
            methods of one class share a template: only their instance differs.
        name: The tool's name.
        description: What the model reads; ``fn``'s docstring when empty or None (as ``add_tool`` does).
        annotations: The tool's MCP annotations.
        structured_output: As for ``add_tool``.

    Raises:
        TypeError: If ``fn`` is a closure: its captured state would be invisible to the cache, so a second server
            would get the first one's. Hold per-server state in an object and pass a bound method instead.
    """
    function = getattr(fn, "__func__", fn)
    if getattr(function, "__closure__", None):
        raise TypeError(f"tool {name!r} is a closure; bind per-server state as a method's instance instead")
    key = (function, structured_output)
    template = _TEMPLATES.get(key)
    if template is None:
        built = Tool.from_function(fn, name=name, structured_output=structured_output)
        # The template must not keep the first server's state alive or callable.
        template = built.model_copy(update={"fn": _template_only})
        _TEMPLATES[key] = template
    # A shallow copy: the argument model, input and output schemas are the template's own objects, shared by every
    # server (nothing mutates them). Only the callable, and what is given here, are this server's.
    return template.model_copy(
        update={
            "fn": fn,
            "name": name,
            "description": description or fn.__doc__ or "",
            "annotations": annotations,
        }
    )


def template_count() -> int:
    """How many tool templates this process has built (tests check servers built again add none)."""
    return len(_TEMPLATES)
