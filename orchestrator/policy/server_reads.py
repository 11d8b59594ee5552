"""A person's rules for a server also govern reading it through ``mcp_access``.

``mcp_access__read_resource(server="github", ...)`` reads what ``github`` holds without calling a ``github__*``
tool, so a rule on ``github__*`` would not see it. The engine therefore decides such a call twice: as the
``mcp_access`` tool it is, and as a read-only tool of the server it names (:func:`read_of`), and the strictest
verdict wins (deny, then ask, then allow). The second decision is made for the tool name ``{server}__*`` itself,
so the rules that count are exactly those whose glob matches that literal name:

- a server-wide glob (``github__*``, ``git*``, ``*``) counts: it covers every tool the server has or could have,
  and what a server's resources and prompts hold is as much of it as all its tools together;
- a glob naming one tool or a family (``github__delete_repo``, ``github__create_*``) does not: such a rule is about
  what those tools *do* (delete, create), which reading the server's content does not do; a person who wants the
  content itself kept from the model names the server. (The same line as a child's allow-list:
  :mod:`servers.mcp_access` lets a child read a server only where a glob of its list covers ``{server}__*``.)
- a ``command`` rule never matches (a read runs no command); a ``path`` rule matches the path a ``file://`` or
  ``fs://`` URI names, so ``deny fs__* path "secrets/**"`` also holds for ``fs://secrets/key``.

The server is named as its tools are: sanitised (``my.docs`` → ``my_docs__*``). ``mcp_access`` itself resolves
the name exactly (another case, whitespace, the sanitised spelling of a raw name: no such server), so the rules
checked here are always those of the server that is read. Loom's own servers are named and ruled like any other.

A listing without a server cannot be decided per server by the engine, which does not know the session's
servers: ``mcp_access`` asks :func:`listing_gate` instead, and leaves out every server that reading would not
simply allow (denied, or asked about), saying so; naming that server is then decided here, like any read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from orchestrator.hub.names import SEPARATOR, sanitize

if TYPE_CHECKING:
    from orchestrator.policy.engine import Verdict
    from orchestrator.policy.rules import Rule

__all__ = ["ACCESS_SERVER", "ServerRead", "listing_gate", "read_of"]

ACCESS_SERVER = "mcp_access"
"""The built-in server that reads other servers (``servers.mcp_access.NAME``; not imported: the SDK is slow)."""
_NAMING = frozenset({"list_resources", "read_resource", "list_prompts", "get_prompt"})
"""Its tools, each of which names the server it reads by its ``server`` argument."""


@dataclass(frozen=True, slots=True)
class ServerRead:
    """What an ``mcp_access`` call reads, as the engine decides it: a read-only tool of that server.

    Attributes:
        server: The server's name as its tool names spell it (sanitised).
        tool_name: ``{server}__*``: matched only by rules that cover every tool of the server.
        arguments: The path a resource URI names (``{"path": ...}``), or none.
        refused: Why the call cannot be decided for a server (a ``server`` that is not a string), or ``""``.
    """

    server: str
    tool_name: str
    arguments: Mapping[str, Any]
    refused: str = ""


def read_of(tool_name: str, arguments: Mapping[str, Any]) -> ServerRead | None:
    """The server an ``mcp_access`` call reads, or None (another tool, or a listing of every server)."""
    head, sep, tool = tool_name.partition(SEPARATOR)
    if not sep or head != ACCESS_SERVER or tool not in _NAMING:
        return None
    server = arguments.get("server", "")
    if not isinstance(server, str):
        # The server itself would refuse it too; decided here so that no spelling of a name slips past its rules.
        return ServerRead("", "", {}, refused=f"'server' must be a server's name, not {type(server).__name__}")
    if server == "":
        return None  # every server: mcp_access leaves out those listing_gate withholds
    name = sanitize(server)
    uri = arguments.get("uri")
    path = _uri_path(uri) if tool == "read_resource" and isinstance(uri, str) else None
    return ServerRead(name, f"{name}{SEPARATOR}*", {"path": path} if path is not None else {})


def _uri_path(uri: str) -> str | None:
    """The file a ``file://`` or ``fs://`` URI names (``fs://`` paths are relative to the workspace), or None."""
    if uri.startswith("fs://"):
        return unquote(uri[len("fs://") :]) or "."
    if uri.startswith("file:"):
        return unquote(urlsplit(uri).path) or "/"
    return None


def listing_gate(levels: Sequence[Sequence[Rule]], cwd: str) -> Callable[[str], tuple[Verdict, str]]:
    """For ``mcp_access``'s listings of every server: the verdict and reason of reading a server, by its name.

    Args:
        levels: The rules of every level of the session's bounds (a top-level session has one): a child's listing
            leaves out what any ancestor's rules would.
        cwd: The session's working directory.

    Returns:
        A function of a server's raw name giving ``(verdict, reason)``. The mode is taken as ``ask``: a listing
        that leaves out a server a ``bypass`` session could read is only stricter, and naming it reads it.
    """
    from mcp.types import ToolAnnotations  # the caller, mcp_access, has the SDK loaded already

    from orchestrator.policy.engine import decide  # the engine imports this module

    read_only = ToolAnnotations(read_only_hint=True)
    tool = f"{ACCESS_SERVER}{SEPARATOR}read_resource"

    def gate(server: str) -> tuple[Verdict, str]:
        found: tuple[Verdict, str] = ("allow", "")
        for rules in levels:
            decision = decide("ask", tool, read_only, {"server": server}, rules, cwd)
            if decision.verdict == "deny":
                return decision.verdict, decision.reason
            if decision.verdict == "ask" and found[0] == "allow":
                found = (decision.verdict, decision.reason)
        return found

    return gate
