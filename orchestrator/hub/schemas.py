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
from collections.abc import Sequence
from typing import Any

import jsonschema
from mcp import Client
from mcp import types as mt
from referencing import Registry

__all__ = ["input_validator", "output_validator", "share_output_validators"]

_CACHED = 512
"""Distinct schemas kept per kind: bounded, since external servers may send any number over a long-lived daemon."""


def input_validator(schema: dict[str, Any]) -> jsonschema.protocols.Validator | None:
    """A checked validator for a tool's arguments, or None if the schema itself is broken."""
    text = _canonical(schema)
    return _compile_input(schema) if text is None else _compiled_input(text)


def output_validator(schema: dict[str, Any]) -> jsonschema.protocols.Validator | None:
    """A checked validator for a tool's structured results, built as the MCP client builds its own; None if broken."""
    text = _canonical(schema)
    return _compile_output(schema) if text is None else _compiled_output(text)


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
