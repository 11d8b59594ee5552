"""What the face offers as MCP prompts: each of the user's skills, and ``delegate_task``.

A skill prompt (named as the skill) returns the skill's instructions as one user message, with its arguments
filled: ``arguments`` replaces ``$ARGUMENTS`` in the body (as a Claude Code command does) or, when the body has none,
follows it as the task to apply the skill to; ``session_id`` looks the skill up among that session's skills too
(its project's ``.loom/skills``, which win on a clash), so a project skill can be fetched by its name.

``delegate_task`` (an underscore, which no skill name can hold) asks the client's model to hand a task to a Loom
session through the face's tools; its ``model`` and ``mode`` arguments complete from the known values.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import anyio.to_thread
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, GetPromptResult, Prompt, PromptArgument, PromptMessage, TextContent

from orchestrator.context.instructions import project_root
from orchestrator.context.skills import Skill, SkillError, find_skills, load_skill
from orchestrator.face.input import lone_surrogate
from orchestrator.policy import MODES
from orchestrator.runtime.host import HostError, SessionHost

__all__ = ["DELEGATE", "PLACEHOLDER", "SkillPrompts"]

DELEGATE: Final = "delegate_task"
PLACEHOLDER: Final = "$ARGUMENTS"
MAX_ARGUMENT_CHARS: Final = 20_000
"""The longest argument a prompt takes (it goes into a message a model reads)."""

_SKILL_ARGUMENTS = [
    PromptArgument(name="arguments", description=f"What to apply the skill to (fills {PLACEHOLDER})", required=False),
    PromptArgument(name="session_id", description="A session whose project's skills are looked up too", required=False),
]
_DELEGATE_PROMPT = Prompt(
    name=DELEGATE,
    title="Delegate a task to a Loom session",
    description="Have Loom's agent do a task in a directory: create a session, send the task, follow the run.",
    arguments=[
        PromptArgument(name="task", description="What the Loom session should do", required=True),
        PromptArgument(name="cwd", description="The directory it works in (absolute)", required=True),
        PromptArgument(name="model", description="PROVIDER:NAME; default as configured", required=False),
        PromptArgument(name="mode", description=f"One of {', '.join(MODES)} (default ask)", required=False),
    ],
)


class SkillPrompts:
    """The face's prompts over ``host``: the user's skills, read when asked for, and ``delegate_task``."""

    def __init__(self, host: SessionHost) -> None:
        self.host = host

    async def listed(self) -> list[Prompt]:
        """``delegate_task`` and one prompt per user skill."""
        home = self.host.runtime.home
        skills, _problems = await anyio.to_thread.run_sync(find_skills, home, home)
        return [
            _DELEGATE_PROMPT,
            *(Prompt(name=s.name, description=s.description, arguments=_SKILL_ARGUMENTS) for s in skills),
        ]

    async def get(self, name: str, arguments: dict[str, str] | None) -> GetPromptResult:
        """The prompt ``name`` with ``arguments`` filled.

        Raises:
            MCPError: ``INVALID_PARAMS`` for an unknown prompt, a missing or oversized argument, an unknown session.
        """
        given = dict(arguments or {})
        problem = lone_surrogate(given, "arguments")
        if problem is not None:
            raise _invalid(f"{problem} holds a lone surrogate, which is not text; send valid Unicode (UTF-8) text")
        for key, value in given.items():
            if len(value) > MAX_ARGUMENT_CHARS:
                raise _invalid(f"argument {key!r} is {len(value):,} characters; at most {MAX_ARGUMENT_CHARS:,}")
        if name == DELEGATE:
            return _delegate(given)
        skill = await self._skill(name, given.get("session_id") or None)
        try:
            body = await anyio.to_thread.run_sync(load_skill, skill)
        except SkillError as exc:
            raise _invalid(str(exc)) from exc
        text = given.get("arguments", "").strip()
        if PLACEHOLDER in body:
            body = body.replace(PLACEHOLDER, text)
        elif text:
            body = f"{body}\n\n## Task\n\n{text}"
        return GetPromptResult(
            description=skill.description,
            messages=[PromptMessage(role="user", content=TextContent(type="text", text=body))],
        )

    async def _skill(self, name: str, session_id: str | None) -> Skill:
        home = self.host.runtime.home
        project = home
        if session_id is not None:
            try:
                record = await self.host.record(session_id)
            except HostError as exc:
                raise _invalid(str(exc)) from exc
            project = project_root(Path(record.cwd))
        skills, _problems = await anyio.to_thread.run_sync(find_skills, home, project)
        for skill in skills:
            if skill.name == name:
                return skill
        raise _invalid(f"no prompt {name!r}; prompts/list names them (a project's skills need its session_id)")


def _delegate(given: dict[str, str]) -> GetPromptResult:
    task, cwd = given.get("task", "").strip(), given.get("cwd", "").strip()
    if not task or not cwd:
        raise _invalid(f"{DELEGATE} needs the arguments task and cwd")
    mode = given.get("mode") or "ask"
    if mode not in MODES:
        raise _invalid(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
    model = given.get("model", "").strip()
    create = f"cwd={cwd!r}, mode={mode!r}" + (f", model={model!r}" if model else "")
    text = (
        f"Delegate this task to a Loom session. Call Loom's create_session({create}), then send_message with the "
        "session_id and the task as text (wait_s=60), and follow the run with get_run until it ends. In mode 'ask' "
        "tool calls wait for approval: show them to me (list_approvals) and decide_approval with what I say. "
        f"Report the run's final_text.\n\nTask:\n{task}"
    )
    return GetPromptResult(
        description=_DELEGATE_PROMPT.description,
        messages=[PromptMessage(role="user", content=TextContent(type="text", text=text))],
    )


def _invalid(message: str) -> MCPError:
    return MCPError(code=INVALID_PARAMS, message=message)
