"""A deterministic model that plays a script: for tests, demos and offline use.

A script is a list of turns; each turn has text and/or tool calls. Turn *n* answers the *n*-th model
call. Strings in a turn may quote earlier tool results as ``{{result:ID}}`` (``ID`` being the ``id``
given to a tool call in the script), which is how the bundled demo writes a report about what it
actually found. When the script runs out the model says so and ends the turn.

Script file (JSON)::

    {"notice": "shown before the run",
     "turns": [{"text": "Looking around.", "tool_calls": [{"id": "ls", "name": "fs__list", "arguments": {}}]},
               {"text": "Found: {{result:ls}}"}]}
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel, Field, ValidationError

from orchestrator.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock, Usage
from orchestrator.models.base import (
    ModelError,
    ModelEvent,
    ModelRequest,
    ModelResponse,
    StopReason,
    TextDelta,
    ToolCallDelta,
)

_PLACEHOLDER = re.compile(r"\{\{result:([A-Za-z0-9_.-]+)\}\}")
_MAX_QUOTE = 4000


class ScriptedCall(BaseModel):
    """One tool call in a scripted turn."""

    id: str | None = None
    """Name for ``{{result:ID}}`` references; the wire id is made unique per call."""
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ScriptedTurn(BaseModel):
    """One model answer."""

    text: str = ""
    tool_calls: list[ScriptedCall] = Field(default_factory=list)
    delay_s: float = 0.0
    """Think this long before answering (for demos and cancellation tests)."""
    chunk_chars: int = Field(48, ge=1)
    """The text, then (when paced) each tool call's arguments as JSON text, stream in pieces of this many characters."""
    chunk_delay_s: float = Field(0.0, ge=0)
    """Pause this long between pieces, as a model writing a long answer does (live-text tests, benchmarks); a paced
    turn streams its tool calls' arguments too, an unpaced one only its text."""
    error: str | None = None
    """Fail this call instead of answering: ``transient:msg`` or ``permanent:msg``."""


class Script(BaseModel):
    """A whole script."""

    notice: str = ""
    context_window: int | None = Field(None, ge=100)
    """The window this model claims (tokens); small values let a short script cross the compaction threshold."""
    turns: list[ScriptedTurn]
    summaries: list[ScriptedTurn] = Field(default_factory=list)
    """Answers to compaction requests, in order; past the end the model writes a summary itself."""
    by_history: bool = False
    """Answer turn *n* when the conversation sent holds *n* assistant messages, instead of counting calls: the
    script answers the same in any process, after any restart, as a real model would (crash tests of workers)."""


class ScriptedModel:
    """Plays a :class:`Script` one turn per model call."""

    def __init__(self, script: Script, *, label: str = "script") -> None:
        self._script = script
        self._label = label
        self._next = 0
        self._summaries = 0
        self._ids: dict[str, str] = {}
        self.requests: list[ModelRequest] = []
        """Every request received, for tests that assert what the model was shown."""

    @classmethod
    def from_file(cls, path: Path, *, label: str | None = None) -> ScriptedModel:
        """Load a JSON script.

        Raises:
            ModelError: the file is missing or not a valid script (permanent).
        """
        try:
            script = Script.model_validate_json(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ModelError(f"cannot read script {path}: {exc.strerror or exc}", transient=False) from exc
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'top level'}: {err['msg']}" for err in exc.errors()[:3]
            )
            raise ModelError(f"invalid script {path}: {problems}", transient=False) from exc
        return cls(script, label=label or str(path))

    @classmethod
    def from_turns(
        cls, turns: Sequence[Mapping[str, Any] | ScriptedTurn], notice: str = "", *, context_window: int | None = None
    ) -> ScriptedModel:
        """Build a model from turns given inline (tests)."""
        script = Script(
            notice=notice, context_window=context_window, turns=[ScriptedTurn.model_validate(t) for t in turns]
        )
        return cls(script, label="inline")

    @property
    def name(self) -> str:
        """``scripted:<source>``."""
        return f"scripted:{self._label}"

    @property
    def context_window(self) -> int | None:
        """The script's ``context_window``, if it sets one (see :mod:`orchestrator.models.profiles`)."""
        return self._script.context_window

    @property
    def notice(self) -> str:
        """The script's own notice, shown before a run."""
        return self._script.notice

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Play the next turn (or, for a compaction's request, the next summary)."""
        self.requests.append(request)
        if request.purpose == "summary":
            # Summaries are a separate track, so that a compaction does not shift the conversation's turns.
            index = self._summaries
            self._summaries += 1
            summaries = self._script.summaries
            turn = summaries[index] if index < len(summaries) else ScriptedTurn(text=write_summary(request))
            async for event in _play(turn, index, request, {}):
                yield event
            return
        index = self._next
        self._next += 1
        if self._script.by_history:
            index = sum(1 for message in request.messages if message.role == "assistant")
        if index >= len(self._script.turns):
            turn = ScriptedTurn(text="(The script has no more turns.)")
        else:
            turn = self._script.turns[index]
        async for event in _play(turn, index, request, self._ids):
            yield event


class FunctionModel:
    """A model whose every answer comes from a Python function (tests)."""

    def __init__(
        self,
        fn: Callable[[ModelRequest], ScriptedTurn | dict[str, Any]],
        name: str = "function",
        *,
        context_window: int | None = None,
    ) -> None:
        self._fn = fn
        self._name = name
        self._calls = 0
        self.context_window = context_window
        """The window this model claims, if any (see :mod:`orchestrator.models.profiles`)."""

    @property
    def name(self) -> str:
        """``scripted:<name>``."""
        return f"scripted:{self._name}"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Ask the function for the next turn and play it."""
        turn = ScriptedTurn.model_validate(self._fn(request))
        self._calls += 1
        async for event in _play(turn, self._calls, request, {}):
            yield event


async def _play(
    turn: ScriptedTurn, index: int, request: ModelRequest, ids: dict[str, str]
) -> AsyncIterator[ModelEvent]:
    """Stream one turn: optional delay or error, text deltas, each call's argument deltas, then the whole message."""
    if turn.delay_s > 0:
        await anyio.sleep(turn.delay_s)
    if turn.error is not None:
        kind, _, message = turn.error.partition(":")
        raise ModelError(message or turn.error, transient=kind == "transient")
    results = _results_by_id(request, ids) if ids and "{{result:" in turn.model_dump_json() else {}
    text = _fill(turn.text, results)
    blocks: list[TextBlock | ToolUseBlock] = []
    pieces: list[TextDelta | ToolCallDelta] = []
    if text:
        blocks.append(TextBlock(text=text))
        pieces.extend(TextDelta(chunk) for chunk in _chunks(text, turn.chunk_chars))
    for k, call in enumerate(turn.tool_calls):
        wire_id = f"toolu_{index:04d}_{k}"
        if call.id:
            ids[call.id] = wire_id
        use = ToolUseBlock(id=wire_id, name=call.name, input=_fill_any(call.arguments, results))
        blocks.append(use)
        if turn.chunk_delay_s == 0:
            # Unpaced, the turn is written in one instant and a follower could only catch its arguments by luck
            # (a follower gives a message's unseen text as a delta, not its arguments): so, like a provider that
            # does not stream them, it sends them whole in the message.
            continue
        # As a provider streams them: the first piece names the call, the pieces together are its JSON.
        for n, chunk in enumerate(_chunks(json.dumps(use.input), turn.chunk_chars)):
            pieces.append(
                ToolCallDelta(k, chunk, call_id=wire_id, name=call.name) if n == 0 else ToolCallDelta(k, chunk)
            )
    for n, piece in enumerate(pieces):
        if n and turn.chunk_delay_s > 0:
            await anyio.sleep(turn.chunk_delay_s)
        yield piece
    usage = Usage(input_tokens=0, output_tokens=max(1, len(text) // 4))
    stop: StopReason = "tool_use" if turn.tool_calls else "end_turn"
    yield ModelResponse(Message(role="assistant", content=list(blocks)), stop, usage)


def _chunks(text: str, size: int = 48) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _results_by_id(request: ModelRequest, ids: dict[str, str]) -> dict[str, str]:
    wanted = {wire: name for name, wire in ids.items()}
    found: dict[str, str] = {}
    for message in request.messages:
        if message.role != "user":
            continue
        for block in message.content:
            if isinstance(block, ToolResultBlock) and block.tool_use_id in wanted:
                found[wanted[block.tool_use_id]] = _quote(block.content)
    return found


def _quote(result: str) -> str:
    """A tool result as a script quotes it: whole up to ``_MAX_QUOTE`` characters, else cut at a line end and marked.

    The demo's report quotes file lists this way; a list cut without a mark would read as complete.
    """
    if len(result) <= _MAX_QUOTE:
        return result
    kept = result[:_MAX_QUOTE]
    if "\n" in kept:
        kept = kept[: kept.rindex("\n")]
    hidden = result[len(kept) :].strip("\n")
    lines = hidden.count("\n") + 1
    return f"{kept}\n… ({lines:,} more line{'s' if lines != 1 else ''}, {len(hidden):,} characters, not shown)"


def _fill(text: str, results: dict[str, str]) -> str:
    if not results or "{{" not in text:
        return text
    return _PLACEHOLDER.sub(lambda m: results.get(m.group(1), f"(no result for {m.group(1)})"), text)


def _fill_any(value: Any, results: dict[str, str]) -> Any:
    if isinstance(value, str):
        return _fill(value, results)
    if isinstance(value, list):
        return [_fill_any(v, results) for v in value]
    if isinstance(value, dict):
        return {k: _fill_any(v, results) for k, v in value.items()}
    return value


_INSTRUCTION = re.compile(r"<instruction>\n(.*?)\n</instruction>", re.DOTALL)
_REQUIRED = re.compile(r"Required format: [^\n]*\n((?:## [^\n]+\n?)+)")
_TOOL_CALL = re.compile(r"^\[tool call [^\]:]*: ([^\]]+)\]$", re.MULTILINE)


def write_summary(request: ModelRequest) -> str:
    """A compaction summary made from the request itself, as a model would be asked to write it.

    Deterministic and honest: the user's instructions quoted verbatim from the request, the tool calls
    counted by name, and nothing claimed beyond that. It lets scripted sessions (tests, the demo) compact
    without scripting every summary.
    """
    text = "".join(m.text for m in request.messages)
    instructions = _INSTRUCTION.findall(text)
    calls = _TOOL_CALL.findall(text)
    counted = {name: calls.count(name) for name in dict.fromkeys(calls)}
    goal = "\n".join(f'- "{i}"' for i in instructions) or "- none stated in this part"
    work = "\n".join(
        f"- {name}: {n} call{'s' if n != 1 else ''} (results in the transcript)" for name, n in counted.items()
    )
    asked = [*_REQUIRED.finditer(text)]  # the request's own format comes last, after the transcript
    headings = re.findall(r"^## (.+)$", asked[-1].group(1), re.MULTILINE) if asked else []
    if "Warnings" in headings:  # a handoff's blocks (orchestrator.context.handoff), not a compaction's sections
        filled = {"Goal and constraints": goal, "Work done": work or "none", "Next step": "continue the work"}
        return "\n\n".join(f"## {name}\n{filled.get(name, 'none recorded')}" for name in headings)
    return (
        f"## Goal and constraints\n{goal}\n\n"
        "## Decisions\nnone recorded\n\n"
        "## Files and state\nas the tool results showed; see the calls below\n\n"
        f"## Work done\n{work or 'none'}\n\n"
        "## Open items\nnone known\n\n"
        "## Next step\ncontinue with the user's latest request"
    )


def dump_script(script: Script) -> str:
    """Serialise a script as pretty JSON (the inverse of :meth:`ScriptedModel.from_file`)."""
    return json.dumps(script.model_dump(exclude_defaults=True), indent=2)
