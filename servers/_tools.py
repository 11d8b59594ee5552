"""Tool metadata built once per process, bound to each server's own state in microseconds.

``Tool.from_function`` inspects a signature, builds a pydantic model of the arguments and one of the result, and
generates both JSON schemas: milliseconds per tool. A server built per session (Loom builds fs, shell, memory and
its own ``loom`` tools for every session it opens) would pay that every time for schemas that depend only on the
function's signature. `bound_tool` builds them the first time a function is seen and afterwards copies the built
tool with the new callable: a bound method of this server's own state object, so what one server's tools can see
(roots, working directory, database, session id) lives in that object and nowhere in the shared template.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.types import ToolAnnotations

__all__ = ["Binding", "DeferredServer", "bound_tool", "template_count"]

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


@dataclass(frozen=True)
class Binding:
    """One tool a `DeferredServer` will register: the arguments `bound_tool` takes."""

    fn: Callable[..., Any]
    name: str
    description: str | None = None
    annotations: ToolAnnotations | None = None
    structured_output: bool | None = None


class DeferredServer:
    """A server whose state is ready and validated, and whose ``MCPServer`` is built on its first `build`.

    Loom opens fs, shell, memory and its ``loom`` tools for every session, and most sessions call few of them,
    often none: building an ``MCPServer`` (its low-level server, request-state keys, a logging handler) and binding
    its tools is most of what opening one costs. What a server will list is known before it is built: its tools'
    names and descriptions, their annotations, and the functions their schemas come from (built once per process,
    see `bound_tool`). That is `listing_key`: two servers with equal keys list the same tools, so a client that
    learned one's listing may use it for the other and build the server only to call it.

    The state (roots opened and checked, a sandbox resolved, arguments validated) is made by whoever creates
    this, so every error a server's construction can raise is raised then, as by ``build_server``.

    Args:
        name: The server's name.
        bindings: Its tools, in listing order.
        make: Builds the server around the bound tools (called at most once).
    """

    def __init__(self, name: str, bindings: Sequence[Binding], make: Callable[[list[Tool]], MCPServer]) -> None:
        self.name = name
        self._bindings = tuple(bindings)
        self._make = make
        self._server: MCPServer | None = None
        # Functions are the templates' keys (they live as long as the process); annotations are compared by value.
        self.listing_key: Hashable = (
            name,
            *(
                (
                    getattr(b.fn, "__func__", b.fn),
                    b.name,
                    b.description or b.fn.__doc__ or "",
                    None if b.annotations is None else b.annotations.model_dump_json(),
                    b.structured_output,
                )
                for b in self._bindings
            ),
        )

    @property
    def built(self) -> bool:
        """Whether `build` has been called."""
        return self._server is not None

    def build(self) -> MCPServer:
        """The server, built on the first call and the same object afterwards."""
        if self._server is None:
            tools = [
                bound_tool(
                    b.fn,
                    name=b.name,
                    description=b.description,
                    annotations=b.annotations,
                    structured_output=b.structured_output,
                )
                for b in self._bindings
            ]
            self._server = self._make(tools)
        return self._server
