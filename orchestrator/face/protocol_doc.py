"""Write ``docs/protocol.md``, the face's protocol, from the code itself.

The events come from the :data:`orchestrator.events.Event` union (their pydantic fields and docstrings);
the tools come from the real MCP face (``build_face(host).list_tools()`` over a runtime in a temporary
home), so the document shows what a client is sent. ``python -m orchestrator.face.protocol_doc`` writes
the file; ``--check`` exits 1 when it is out of date.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import re
import sys
import tempfile
import textwrap
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypeVar

import anyio
from mcp.types import Tool
from pydantic import BaseModel, Field, TypeAdapter
from pydantic.fields import FieldInfo

from orchestrator.events import Event
from orchestrator.face.server import build_face
from orchestrator.protocol import MAX_WAIT_S
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.runtime.host import SessionHost

T = TypeVar("T")

DOC_PATH = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"
"""Where the generated document lives in the repository."""
COMMAND = "python -m orchestrator.face.protocol_doc"

EVENT_TYPES: tuple[type[BaseModel], ...] = typing.get_args(typing.get_args(Event)[0])
"""The members of the event union, in the order ``orchestrator/events.py`` declares them."""

EVENT_GROUPS: tuple[tuple[str, Callable[[str], bool]], ...] = (
    ("Session", lambda t: t.startswith(("session_", "mode_"))),
    ("Runs", lambda t: t.startswith("run_")),
    ("Conversation and model", lambda t: t.endswith("_message") or t.startswith(("text_", "model_retry", "notice"))),
    ("Tools and servers", lambda t: t.startswith(("tool_", "server_"))),
    ("Approvals and questions", lambda t: t.startswith(("approval_", "question_"))),
    ("Children and the advisor", lambda t: t.startswith(("child_", "advisor_"))),
    ("Orchestration", lambda t: t.startswith(("orchestration_", "task_"))),
    ("Context", lambda t: t.startswith(("context_", "compaction_", "model_"))),
    ("Long work", lambda t: t.startswith(("hook_", "todo_", "loop_", "goal_", "handoff_", "memory_"))),
)
"""Event groups, by ``type``; the first that matches wins, and anything new lands in "Other"."""

TOOL_GROUPS: tuple[tuple[str, Callable[[str], bool]], ...] = (
    ("Long work", lambda n: "goal" in n or "handoff" in n or n.endswith("_memory")),
    ("Sessions", lambda n: n.endswith(("_session", "_sessions")) and not n.startswith(("rewind_", "compact_"))),
    ("Runs", lambda n: n.endswith("_run") or n == "send_message"),
    ("Events", lambda n: "event" in n),
    ("Approvals and questions", lambda n: "approval" in n or "question" in n),
    ("Checkpoints and rewind", lambda n: "checkpoint" in n or "rewind" in n),
    ("Servers and models", lambda n: n in ("list_servers", "list_models")),
    ("Context", lambda n: "compact" in n or "model" in n),
    ("Mode and skills", lambda n: n.endswith(("_mode", "_skills"))),
    ("Review", lambda n: n in ("review", "review_result")),
    ("Orchestration", lambda n: "orchestrat" in n),
)
"""Tool groups, by name; the first that matches wins, and anything new lands in "Other"."""

LIVE_INTRO = f"""\
Every stored event has a `seq`, numbered per session from 1 by the store as it is appended; `seq` is the
cursor. `read_events(session_id, after_seq=N)` returns stored events with `seq > N`, oldest first, at most
`limit` of them, and `next_after_seq`, the cursor to pass next time: replay, then live, with no gap and no
duplicate, and every client sees the same sequence. Start from `0` to replay a session, or from
`get_session`'s `last_seq` to see only what comes next. A full page (`limit` events) means more are
waiting: call again at once.

Long-polling: with `wait_s` (at most {MAX_WAIT_S:g} s; no call blocks longer) a call that finds nothing
new waits for the next stored event and returns as soon as one arrives; if none does, it returns an empty
page whose `next_after_seq` is the cursor you sent. Loop on it to follow a session.

Streamed output is live only: a `text_delta` event (like any `*_delta` event) has `seq: null`, is never
stored and never moves the cursor; what it streamed comes again, complete, in the stored
`assistant_message` of the same run and step.
Whatever `read_events` carries beside the stored events for text still streaming is shown by its result
schema below; treat it as a preview that the stored events supersede.

Reconnecting: keep the last `next_after_seq` you received. Session and run ids survive reconnects and
daemon restarts, so after any break call `read_events(after_seq=<that cursor>)` and continue; you miss
nothing and see nothing twice. Live text sent while you were away is not replayed; the stored
`assistant_message` has it.
"""
"""Hand-written: how to follow a session. Kept here so the generated document carries it."""


@dataclass(frozen=True)
class Face:
    """What the generator reads from the MCP face."""

    tools: list[Tool]
    instructions: str | None = None
    models: Mapping[str, type[BaseModel]] = field(default_factory=dict)
    """Result models by name (the schemas' ``title``), for the field docstrings schemas leave out."""


async def read_face() -> Face:
    """Build the real face over a runtime in a temporary home and list its tools."""
    with tempfile.TemporaryDirectory(prefix="loom-protocol-") as home:
        async with embedded_runtime(Path(home)) as runtime, SessionHost(runtime) as host:
            face = build_face(host)
            tools = await face.list_tools()
            instructions = face.instructions
    models = {m.__name__: m for m in _subclasses(BaseModel) if m.__module__ == "orchestrator.protocol"}
    return Face(tools=tools, instructions=instructions, models=models)


def generate(events: Sequence[type[BaseModel]] = EVENT_TYPES) -> str:
    """The document for the current face and ``events`` (call outside an event loop)."""
    return render(anyio.run(read_face), events)


def render(face: Face, events: Sequence[type[BaseModel]] = EVENT_TYPES) -> str:
    """The document for ``face`` and the event union made of ``events``."""
    page = {t.name: t.output_schema for t in face.tools}.get("read_events")
    out = [
        "# The Loom protocol",
        "",
        f"<!-- Generated by `{COMMAND}` from orchestrator/events.py and the MCP face; do not edit. -->",
        "",
        "What a client of Loom's MCP face (`loom mcp`, `loom serve`) calls and reads: the face's tools, and",
        "the events `read_events` returns. Everything below except the first section is generated from the",
        "pydantic models and the face's own tool list.",
        "",
        "Contents: [Following a session](#following-a-session) · [Events](#events) · [Tools](#tools)",
        "",
        "## Following a session",
        "",
        LIVE_INTRO.rstrip(),
    ]
    if page:
        out += ["", "### The `read_events` result", "", *_schema_tables(page, face.models)]
    out += _events(events) + ["", "## Tools", ""]
    if face.instructions:
        out += ["The face's instructions to a client:", "", textwrap.indent(face.instructions, "> ", bool), ""]
    tool_groups = _grouped([(t.name, t) for t in face.tools], TOOL_GROUPS)
    out += [*_index(tool_groups), "", "Annotations are the MCP hints a client is given (absent: MCP's defaults)."]
    for group, tools in tool_groups:
        out += ["", f"### {group}"]
        for name, tool in tools:
            out += ["", f"#### `{name}`", "", *_tool(tool, face.models)]
    return "\n".join(out).rstrip() + "\n"


def _events(events: Sequence[type[BaseModel]]) -> list[str]:
    union: Any = Annotated[typing.Union[tuple(events)], Field(discriminator="type")]  # noqa: UP007
    defs: dict[str, Any] = TypeAdapter(union).json_schema().get("$defs", {})
    common, aliases = _common_fields(events), _aliases(events)
    named = {name for name, _, _ in aliases}
    base = events[0] if events else BaseModel
    out = ["", "## Events", "", "Every event is one JSON object; `type` tells which. Fields all events share:", ""]
    out += _field_table([(n, base.model_fields[n]) for n in common], base, defs, named)
    event_groups = _grouped([(str(e.model_fields["type"].default), e) for e in events], EVENT_GROUPS)
    out += ["", *_index(event_groups)]
    for group, members in event_groups:
        out += ["", f"### {group}"]
        for name, model in members:
            out += ["", f"#### `{name}`", "", f"`{model.__name__}`. {_flat(model.__doc__ or '')}", ""]
            own = [(n, f) for n, f in model.model_fields.items() if n not in common and n != "type"]
            out += _field_table(own, model, defs, named) if own else ["No fields beyond the shared ones."]
    models = _reachable(events)
    shared = sorted(n for n in defs if n not in {e.__name__ for e in events})
    out += ["", "### Types inside events"] if shared else []
    for name in shared:
        out += ["", f"#### `{name}`", "", *_object_table(defs[name], models.get(name))]
    if aliases:
        out += ["", "### Value sets", "", "| name | values | meaning |", "| --- | --- | --- |"]
        for alias, values, doc in aliases:
            out.append(f"| `{alias}` | {_cell(' | '.join(f'`{json.dumps(v)}`' for v in values))} | {_cell(doc)} |")
    return out


def _index(groups: Sequence[tuple[str, Sequence[tuple[str, object]]]]) -> list[str]:
    """One line per group, linking to each member's heading."""
    return [f"- {g}: " + " · ".join(f"[`{n}`](#{n.lower()})" for n, _ in members) for g, members in groups]


def _tool(tool: Tool, models: Mapping[str, type[BaseModel]]) -> list[str]:
    out = [f"Title: {tool.title}", ""] if tool.title else []
    out += [inspect.cleandoc(tool.description or "(no description)").replace("``", "`"), ""]
    hints = tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else {}
    listed = ", ".join(f"`{k}: {json.dumps(v)}`" for k, v in hints.items())
    out += [f"Annotations: {listed or 'none (MCP defaults)'}", "", "Arguments:", ""]
    out += _schema_tables(tool.input_schema, models)
    if tool.output_schema:
        out += ["", f"Result (`{tool.output_schema.get('title', 'object')}`):", ""]
        out += _schema_tables(tool.output_schema, models)
    for label, schema in (("Input", tool.input_schema), ("Output", tool.output_schema)):
        if schema:
            text = json.dumps(schema, indent=2, ensure_ascii=False)
            out += [
                "",
                f"<details><summary>{label} JSON schema</summary>",
                "",
                f"```json\n{text}\n```",
                "",
                "</details>",
            ]
    return out


def _schema_tables(schema: Mapping[str, Any], models: Mapping[str, type[BaseModel]]) -> list[str]:
    """A table of an object schema's properties, then one per type it defines (``$defs``)."""
    defs: dict[str, Any] = schema.get("$defs", {})
    out = _object_table(schema, models.get(schema.get("title", "")))
    for name in sorted(defs):
        out += ["", f"`{name}`: {_flat(defs[name].get('description', ''))}", ""]
        out += _object_table(defs[name], models.get(name), describe=False)
    return out


def _object_table(schema: Mapping[str, Any], model: type[BaseModel] | None, describe: bool = True) -> list[str]:
    props: dict[str, Any] = schema.get("properties", {})
    out = [_flat(schema["description"]), ""] if describe and schema.get("description") else []
    if not props:
        return [*out, "No fields."]
    docs = _field_docs(model) if model else {}
    required = set(schema.get("required", ()))
    rows = ["| field | type | required / default | description |", "| --- | --- | --- | --- |"]
    for name, prop in props.items():
        need = "required" if name in required else "optional"
        need = f"default `{json.dumps(prop['default'])}`" if "default" in prop else need
        text = prop.get("description") or docs.get(name, "")
        rows.append(f"| `{name}` | {_cell(_type(prop))} | {need} | {_cell(text)} |")
    return out + rows


def _field_table(
    fields: Sequence[tuple[str, FieldInfo]], model: type[BaseModel], defs: Mapping[str, Any], aliases: set[str]
) -> list[str]:
    docs = _field_docs(model)
    props = defs.get(model.__name__, {}).get("properties", {})
    rows = ["| field | type | required / default | description |", "| --- | --- | --- | --- |"]
    for name, info in fields:
        text = info.description or docs.get(name, "")
        used = sorted(aliases & set(re.findall(r"\w+", _declared(model, name)[0])))
        text += "".join(f" Values: [`{alias}`](#value-sets)." for alias in used)
        rows.append(f"| `{name}` | {_cell(_type(props.get(name, {})))} | {_default(info)} | {_cell(text)} |")
    return rows


def _default(info: FieldInfo) -> str:
    if info.is_required():
        return "required"
    factory = info.default_factory
    if factory is None:
        return f"default `{json.dumps(info.default)}`"
    if factory in (list, dict):
        return f"default `{json.dumps(factory())}`"
    return f"set on creation (`{factory.__module__}.{factory.__qualname__}()`)"


def _type(schema: Mapping[str, Any]) -> str:
    """A JSON schema's type, readably: ``string | null``, ``list[Message]``, ``"a" | "b"``."""
    if "$ref" in schema:
        return f"`{schema['$ref'].rsplit('/', 1)[-1]}`"
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    if "enum" in schema:
        return " | ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return " | ".join(_type(s) for s in schema[key])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(f"`{k}`" for k in kind)
    if kind == "array":
        items = schema.get("items")
        text = f"list of {_type(items)}" if items else "`array`"
    elif kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        text = f"object of {_type(schema['additionalProperties'])}"
    else:
        text = f"`{kind}`" if kind else "any"
    # An integer bound exactly (2**63 - 1 in :g would read 9.22337e+18); a float one in its short form.
    bounds = [
        f"{op} {schema[k] if isinstance(schema[k], int) else format(schema[k], 'g')}"
        for k, op in (("minimum", "≥"), ("maximum", "≤"))
        if k in schema
    ]
    return f"{text} ({', '.join(bounds)})" if bounds else text


def _common_fields(events: Sequence[type[BaseModel]]) -> list[str]:
    """Fields every event has, defined alike (the base's ``seq``, ``session_id``, ``ts``), in base order."""
    first = events[0].model_fields if events else {}
    return [n for n, f in first.items() if n != "type" and all(repr(e.model_fields.get(n)) == repr(f) for e in events)]


def _grouped(
    items: Iterable[tuple[str, T]], groups: Sequence[tuple[str, Callable[[str], bool]]]
) -> list[tuple[str, list[tuple[str, T]]]]:
    """Items in their groups (in ``groups`` order, then "Other"), each keeping the order it came in."""
    buckets: dict[str, list[tuple[str, T]]] = {title: [] for title in [*(g for g, _ in groups), "Other"]}
    for name, item in items:
        buckets[next((title for title, test in groups if test(name)), "Other")].append((name, item))
    return [(title, members) for title, members in buckets.items() if members]


def _flat(text: str) -> str:
    """Docstring text on one line: paragraphs kept apart, RST double backticks as Markdown code."""
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text.strip())]
    return " ".join(p for p in paragraphs if p).replace("``", "`")


def _cell(text: str) -> str:
    return _flat(text).replace("|", "\\|") or "—"


def _field_docs(model: type[BaseModel]) -> dict[str, str]:
    """The docstrings written under a model's fields, its own over its bases'."""
    docs: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if issubclass(cls, BaseModel) and cls is not BaseModel:
            body = _source(cls)
            docs.update(_docs_after(body[0].body if body and isinstance(body[0], ast.ClassDef) else []))
    return docs


def _source(obj: Any) -> list[ast.stmt]:
    try:
        return ast.parse(textwrap.dedent(inspect.getsource(obj))).body
    except (OSError, TypeError, SyntaxError):
        return []


def _docs_after(body: Sequence[ast.stmt]) -> dict[str, str]:
    """Names assigned in ``body`` and the string literal right after each assignment."""
    docs: dict[str, str] = {}
    for stmt, after in zip(body, body[1:], strict=False):
        targets = [stmt.target] if isinstance(stmt, ast.AnnAssign) else getattr(stmt, "targets", [])
        if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str):
            docs |= {t.id: inspect.cleandoc(after.value.value) for t in targets if isinstance(t, ast.Name)}
    return docs


def _declared(model: type[BaseModel], name: str) -> tuple[str, str]:
    """A field's annotation as written (``RunStatus | None``), and the module of the class declaring it."""
    for cls in model.__mro__:
        written = vars(cls).get("__annotations__", {}).get(name)
        if written is not None:
            return (written if isinstance(written, str) else repr(written)), cls.__module__
    return "", model.__module__


def _aliases(events: Sequence[type[BaseModel]]) -> list[tuple[str, tuple[Any, ...], str]]:
    """The documented ``Literal`` aliases the events' fields are declared with: name, values, docstring."""
    used: dict[str, set[str]] = {}
    for model in events:
        for name in model.model_fields:
            annotation, module_name = _declared(model, name)
            used.setdefault(module_name, set()).update(re.findall(r"\w+", annotation))
    found = []
    for module_name in sorted(used):
        module = sys.modules.get(module_name)
        docs = _docs_after(_source(module)) if module else {}
        for name in sorted(used[module_name] & set(docs)):
            value = getattr(module, name, None)
            if typing.get_origin(value) is typing.Literal:
                found.append((name, typing.get_args(value), docs[name]))
    return found


def _reachable(events: Sequence[type[BaseModel]]) -> dict[str, type[BaseModel]]:
    """Every model the events contain, by name (for the docstrings of their fields)."""
    found: dict[str, type[BaseModel]] = {}
    todo: list[Any] = list(events)
    while todo:
        item = todo.pop()
        if isinstance(item, type) and issubclass(item, BaseModel):
            if item.__name__ not in found:
                found[item.__name__] = item
                todo += [f.annotation for f in item.model_fields.values()]
        else:
            todo += typing.get_args(item)
    return found


def _subclasses(cls: type[BaseModel]) -> list[type[BaseModel]]:
    found = sorted(cls.__subclasses__(), key=lambda c: (c.__module__, c.__qualname__))
    return [c for sub in found for c in (sub, *_subclasses(sub))]


def main(argv: Sequence[str] | None = None, path: Path = DOC_PATH) -> int:
    """Write the document, or with ``--check`` exit 1 when the file on disk differs from it."""
    parser = argparse.ArgumentParser(prog=COMMAND, description="Write docs/protocol.md from the code.")
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/protocol.md is out of date")
    args = parser.parse_args(argv)
    text = generate()
    if args.check:
        stale = not path.is_file() or path.read_text(encoding="utf-8") != text
        if stale:
            print(f"docs/protocol.md is out of date; run {COMMAND}", file=sys.stderr)
        return int(stale)
    path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
