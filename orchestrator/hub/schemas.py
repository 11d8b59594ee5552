"""Compiled JSON Schema validators for tools' input and output schemas, built once per schema per process.

Compiling a validator runs ``check_schema``, which walks the metaschema through ``$dynamicRef``: milliseconds per
tool, against microseconds to validate one call. Every Loom session connects its own copy of each built-in server,
whose tools have the same schemas in every session, so the validators are cached by the schema's canonical JSON
text rather than by server or tool: a server that changes a tool's schema gets a new validator, and the same
schema from any server shares one. Validators are immutable, so sharing them between sessions is safe.
"""

from __future__ import annotations

import functools
import json
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import jsonschema
from mcp import Client
from mcp import types as mt
from referencing import Registry

__all__ = ["input_validator", "output_validator", "share_output_validators"]

_CACHED = 512
"""Distinct schemas kept per kind: bounded, since external servers may send any number over a long-lived daemon."""


_Found = tuple[dict[str, Any], "jsonschema.protocols.Validator | None"]
_SAME_INPUT: OrderedDict[int, _Found] = OrderedDict()
_SAME_OUTPUT: OrderedDict[int, _Found] = OrderedDict()
"""Validators by the schema object itself, before its JSON text is made: an in-process server's listing hands the
hub the very schema objects its tools were built with once per process (``servers._tools``), so every session after
the first finds them here without serialising them. Each entry holds its schema, so an id is never reused while its
entry lives; tools' schemas are never changed in place (a new schema is a new object, and misses)."""


def input_validator(schema: dict[str, Any]) -> jsonschema.protocols.Validator | None:
    """A checked validator for a tool's arguments, or None if the schema itself is broken."""
    return _by_identity(_SAME_INPUT, schema, _compile_input, _compiled_input)


def output_validator(schema: dict[str, Any]) -> jsonschema.protocols.Validator | None:
    """A checked validator for a tool's structured results, built as the MCP client builds its own; None if broken."""
    return _by_identity(_SAME_OUTPUT, schema, _compile_output, _compiled_output)


def _by_identity(
    same: OrderedDict[int, _Found],
    schema: dict[str, Any],
    compile_one: Callable[[dict[str, Any]], jsonschema.protocols.Validator | None],
    compiled: Callable[[str], jsonschema.protocols.Validator | None],
) -> jsonschema.protocols.Validator | None:
    found = same.get(id(schema))
    if found is not None and found[0] is schema:
        same.move_to_end(id(schema))
        return found[1]
    text = _canonical(schema)
    validator = compile_one(schema) if text is None else compiled(text)
    same[id(schema)] = (schema, validator)
    if len(same) > _CACHED:
        same.popitem(last=False)
    return validator


def share_output_validators(client: Client, tools: Sequence[mt.Tool]) -> None:
    """Give a connected client the process's output validators for ``tools``.

    The SDK's client checks each structured result against the tool's output schema, compiling the validator on the
    tool's first call in each client session: a few milliseconds of every Loom session's first call of each tool,
    for schemas that are the same in every session. Its per-session cache is seeded here instead. That cache is the
    SDK's private state (mcp 2.3), evicted by the SDK itself when a re-listing changes a schema; where it is not
    there, the client compiles its own validators as before.
    """
    validators = getattr(client.session, "_tool_output_validators", None)
    if not isinstance(validators, dict):
        return
    for tool in tools:
        if tool.output_schema is None or tool.name in validators:
            continue
        validator = output_validator(tool.output_schema)
        if validator is not None:  # a broken schema is left for the client to report on the call, as it does
            validators[tool.name] = validator


def _canonical(schema: dict[str, Any]) -> str | None:
    try:
        return json.dumps(schema, sort_keys=True)
    except (TypeError, ValueError):
        return None  # not JSON (no server should send this): compiled uncached


def _compile_input(schema: dict[str, Any]) -> jsonschema.protocols.Validator | None:
    try:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        cls.check_schema(schema)
        return cls(schema)
    except jsonschema.SchemaError:
        return None  # the server's schema is broken; let the server judge the arguments itself


def _compile_output(schema: dict[str, Any]) -> jsonschema.protocols.Validator | None:
    # As mcp.client.session does: $refs resolve within the schema document and the bundled metaschemas only.
    try:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        return cls(schema, registry=Registry())
    except jsonschema.SchemaError:
        return None


@functools.lru_cache(maxsize=_CACHED)
def _compiled_input(text: str) -> jsonschema.protocols.Validator | None:
    return _compile_input(json.loads(text))


@functools.lru_cache(maxsize=_CACHED)
def _compiled_output(text: str) -> jsonschema.protocols.Validator | None:
    return _compile_output(json.loads(text))
