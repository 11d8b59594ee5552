"""The subagents MCP server: spawn child sessions, wait for them, read their results, follow up, cancel.

It drives Loom only through Loom's face, with the client library (:class:`clients.loom.LoomClient`): a child is a
session like any other, so every client sees, attaches to and answers it. ``connect`` opens a client the server
holds: in-process, a connection to the host's own face; standalone (``loom server subagents``), the daemon's.

A server belongs to one session (its children's parent) and acts only on that session's children, so a model
cannot read, steer or cancel a session that is not its own child by passing its id.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Annotated, Literal

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from clients.loom import FaceError, LoomClient
from orchestrator.protocol import MAX_WAIT_S, RunInfo
from servers._tools import Binding, DeferredServer
from servers._version import loom_version
from servers.subagents._children import MAX_GOING, Child, Children, read_run_events
from servers.subagents._held import HeldClient
from servers.subagents._listing import agents_listing
from servers.subagents._models import (
    MAX_SPAWN_MANY,
    MAX_TIMEOUT_S,
    ChildSpec,
    Spawned,
    SpawnedMany,
    SpawnEntry,
    WaitResult,
)
from servers.subagents._render import as_result, render_many, render_state, render_wait
from servers.subagents._summary import FINISHED, MAX_ANSWER_CHARS, ChildState, child_state
from servers.subagents._tasks import ChildTasks, send_run

__all__ = ["Connect", "SubagentTools", "build_server", "main", "prepare_server"]

Connect = Callable[[], AbstractAsyncContextManager[LoomClient]]
"""Opens a client of Loom's face."""

MAX_WAIT_TOOL_S = 300.0
"""The longest one wait call blocks: the model gets progress back at least this often."""
WAIT_ANSWER_BUDGET = 8_000
"""Characters of final answers one wait returns in all, shared by the children it reports finished."""
MIN_ANSWER_SHARE = 400
_SPAWN_AT_ONCE = 8
"""Children spawn_many creates at the same time (each is a few store writes; more only queue)."""
_APPROVAL_POLL_S = 1.0

_CHANGES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
_CANCEL = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
_READS = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)

SPAWN_DESCRIPTION = """Start a child agent working on a goal; returns at once with its child_id.

The child is a session of its own with a fresh context: it never sees this conversation, so the goal must say
everything it needs (files, constraints, what to report). It can do at most what you may do: `allow` narrows its
tools further (globs over tool names: fs__read, fs__*, shell__run), `agent` starts it as one of the roles below,
`timeout_s` ends it with status timed_out. Then call wait for its result (its final answer, the files it changed,
the commands it ran, its open questions), result to check on it, send for a follow-up, cancel to stop it."""

SPAWN_MANY_DESCRIPTION = """Start several child agents at once, each as spawn would (see spawn for the agents).

Returns at once: per child, in order, whether it started (with its child_id) or why not; one refused child does
not stop the others. Then wait (mode "all") collects their results."""


def _refusal(exc: BaseException) -> Exception | None:
    """The face's (or this server's) refusal ``exc`` is or holds, when that is all it holds (a task group's)."""
    if isinstance(exc, FaceError | ToolError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        found = [_refusal(inner) for inner in exc.exceptions]
        if found and all(f is not None for f in found):
            return found[0]
    return None


class SubagentTools:
    """The subagents tools of one parent session; they act on its children only.

    Args:
        connect: opens a client of Loom's face (held for the server's lifetime, see `HeldClient`).
        session_id: the parent session (None standalone without ``--parent``: the children are top-level
            sessions in ``cwd``, and only those this server started are its own).
        cwd: where top-level children work when there is no parent.
        max_going: how many of its children may be going at once.
        tasks: opens a face client declaring the tasks extension (spawn and send may then answer with a task).
    """

    def __init__(
        self,
        connect: Connect,
        *,
        session_id: str | None,
        cwd: Path,
        max_going: int = MAX_GOING,
        tasks: Connect | None = None,
    ) -> None:
        self.held = HeldClient(connect)
        self.tasks = tasks
        self.session_id = session_id
        self._cwd = cwd
        self.children = Children(session_id, max_going=max_going)

    @contextlib.asynccontextmanager
    async def _face(self) -> AsyncIterator[LoomClient]:
        """A client of the face for one tool call; a refusal inside it comes out as the tool's error.

        The refusal is caught inside the connection and raised once it is closed: raised through it, a daemon
        connection's task group would wrap it in an exception group, and the model would be told only that the
        tool failed.
        """
        failure: Exception | None = None
        async with self.held.client() as loom:
            try:
                yield loom
            except Exception as exc:
                failure = _refusal(exc)
                if failure is None:  # the connection failed under the call: the next one opens another
                    self.held.forget()
                    failure = ToolError(f"the connection to Loom failed ({type(exc).__name__}: {exc}); try again")
        if failure is not None:
            raise ToolError(str(failure)) from failure

    def lifespan(self, _server: MCPServer) -> contextlib.AbstractAsyncContextManager[None]:
        """While the server runs, its tool calls share one client of the face."""
        return self.held.running()

    async def _start(self, loom: LoomClient, spec: ChildSpec) -> Spawned:
        if self.session_id is None and (spec.agent is not None or spec.allow is not None):
            raise ToolError("agent and allow narrow a child of a session: start this server with --parent SESSION")
        async with self.children.room(loom):
            # A child works in its parent's directory ("") unless there is no parent: then in this server's.
            child = await loom.create_session(
                "" if self.session_id else str(self._cwd),
                model=spec.model,
                parent_session_id=self.session_id,
                agent=spec.agent,
                allow=spec.allow,
            )
            try:
                run = await send_run(
                    loom, self.tasks, child.session_id, spec.goal, max_steps=spec.max_steps, timeout_s=spec.timeout_s
                )
            except FaceError as exc:  # the session exists (the store keeps it); say so rather than hide it
                raise ToolError(f"child {child.session_id} was created but its run did not start: {exc}") from exc
            self.children.track(child.session_id, Child(run.run_id, child.agent or spec.agent or "", 0, run.status))
        return Spawned(child_id=child.session_id, run_id=run.run_id, agent=child.agent, status=run.status)

    async def spawn(
        self,
        goal: str = Field(min_length=1, max_length=100_000, description="the child's task, self-contained"),
        agent: str | None = Field(None, max_length=64, description="an agent definition's name (listed above)"),
        allow: Annotated[
            list[str] | None,
            Field(max_length=64, description="tool-name globs the child may use (fs__read, shell__*); omit: yours"),
        ] = None,
        model: Annotated[
            str | None, Field(max_length=500, description="a model spec; omit: the agent's or yours")
        ] = None,
        max_steps: Annotated[int, Field(ge=1, le=1000, description="model calls the child may make")] = 30,
        timeout_s: Annotated[
            float, Field(gt=0, le=MAX_TIMEOUT_S, description="seconds before the child is stopped")
        ] = 600,
    ) -> Spawned:
        """Start a child agent (the description is set per server: it lists the agents)."""
        spec = ChildSpec(goal=goal, agent=agent, allow=allow, model=model, max_steps=max_steps, timeout_s=timeout_s)
        async with self._face() as loom:
            return await self._start(loom, spec)

    async def spawn_many(
        self, children: Annotated[list[ChildSpec], Field(min_length=1, max_length=MAX_SPAWN_MANY)]
    ) -> Annotated[CallToolResult, SpawnedMany]:
        """Start several child agents at once (the description is set per server)."""
        entries: list[SpawnEntry | None] = [None] * len(children)
        limiter = anyio.CapacityLimiter(_SPAWN_AT_ONCE)

        async def one(index: int, spec: ChildSpec, loom: LoomClient) -> None:
            async with limiter:
                try:
                    done = await self._start(loom, spec)
                except (FaceError, ToolError) as exc:
                    entries[index] = SpawnEntry(index=index, started=False, error=str(exc))
                    return
            entries[index] = SpawnEntry(index=index, started=True, **done.model_dump())

        async with self._face() as loom, anyio.create_task_group() as group:
            for index, spec in enumerate(children):
                group.start_soon(one, index, spec, loom)
        made = [e for e in entries if e is not None]
        started = sum(e.started for e in made)
        many = SpawnedMany(children=made, started=started, refused=len(made) - started)
        return as_result(render_many(many), many)

    async def _state(
        self,
        loom: LoomClient,
        child_id: str,
        child: Child,
        run: RunInfo | None = None,
        answer_chars: int = MAX_ANSWER_CHARS,
    ) -> ChildState:
        """The child's state; ``run``: its run as just read (a finished run does not change)."""
        if run is None or run.status not in FINISHED:
            run = await loom.get_run(child.run_id)
        events = await read_run_events(loom, child_id, child.after_seq)
        state = child_state(
            child_id,
            child.run_id,
            events,
            status=run.status,
            reason=run.reason,
            final_text=run.final_text,
            agent=child.agent,
            pending_approvals=run.pending_approvals,
            answer_chars=answer_chars,
        )
        child.status = state.status
        return state

    async def wait(
        self,
        child_ids: Annotated[
            list[str] | None,
            Field(max_length=256, description="children to wait for; omit: every child of yours still going"),
        ] = None,
        mode: Literal["any", "all"] = Field("all", description="return when any of them ends, or when all have"),
        timeout_s: float = Field(120, ge=0, le=MAX_WAIT_TOOL_S, description="the longest this call waits"),
    ) -> Annotated[CallToolResult, WaitResult]:
        """Wait for children to finish, at most timeout_s; returns finished ones' results and the others' progress.

        A result is the child's final answer with its status (completed, failed, cancelled, timed_out,
        interrupted), reason, steps, elapsed time, files changed, commands run and open questions. Children still
        going when the wait ends keep going; wait again, or cancel them.
        """
        started = anyio.current_time()
        async with self._face() as loom:
            chosen = await self.children.resolve(loom, child_ids)
            if not chosen:
                nothing = WaitResult(finished=[], running=[], waited_s=0.0, timed_out=False, note="no child is running")
                return as_result(render_wait(nothing), nothing)
            ended: dict[str, RunInfo] = {}

            async def watch(child_id: str, child: Child, group: anyio.abc.TaskGroup) -> None:
                while True:
                    left = started + timeout_s - anyio.current_time()
                    run = await loom.get_run(child.run_id, wait_s=max(0.0, min(MAX_WAIT_S, left)))
                    if run.status in FINISHED:
                        ended[child_id] = run
                        if mode == "any":
                            group.cancel_scope.cancel()
                        return
                    if left <= 0:
                        return
                    if run.status not in ("running", "queued"):  # awaiting an approval: get_run returns at once
                        await anyio.sleep(min(_APPROVAL_POLL_S, left))

            with anyio.move_on_after(timeout_s + 5):  # get_run's own bound ends each watch; this is a backstop
                async with anyio.create_task_group() as group:
                    for child_id, child in chosen.items():
                        group.start_soon(watch, child_id, child, group)
            states = await self._states(loom, chosen, ended)
        waited = round(anyio.current_time() - started, 3)
        finished = [s for s in states if s.finished]
        running = [s for s in states if not s.finished]
        met = bool(finished) if mode == "any" else not running
        asking = [s.child_id for s in running if s.pending_approvals]
        # Said in words: a child that waits for a person is not stuck, and waiting longer will not move it.
        note = (
            f"waiting for an approval (answered by whoever is attached to this session): {', '.join(asking)}"
            if asking
            else ""
        )
        result = WaitResult(finished=finished, running=running, waited_s=waited, timed_out=not met, note=note)
        return as_result(render_wait(result), result)

    async def _states(self, loom: LoomClient, chosen: dict[str, Child], ended: dict[str, RunInfo]) -> list[ChildState]:
        states: dict[str, ChildState] = {}
        # The parent's context grows by what a wait returns: the answers share one budget.
        share = max(MIN_ANSWER_SHARE, min(MAX_ANSWER_CHARS, WAIT_ANSWER_BUDGET // max(1, len(ended))))

        async def one(child_id: str, child: Child) -> None:
            states[child_id] = await self._state(loom, child_id, child, ended.get(child_id), share)

        async with anyio.create_task_group() as group:
            for child_id, child in chosen.items():
                group.start_soon(one, child_id, child)
        return [states[child_id] for child_id in chosen]

    async def result(
        self, child_id: str = Field(min_length=1, max_length=200)
    ) -> Annotated[CallToolResult, ChildState]:
        """A child's result if its run has ended, else its progress (status, steps so far, current tool, elapsed)."""
        async with self._face() as loom:
            child = await self.children.own(loom, child_id)
            state = await self._state(loom, child_id, child)
        return as_result(render_state(state), state)

    async def send(
        self,
        child_id: str = Field(min_length=1, max_length=200),
        message: str = Field(
            min_length=1, max_length=100_000, description="the follow-up; the child keeps its context"
        ),
        max_steps: int = Field(30, ge=1, le=1000),
        timeout_s: float = Field(600, gt=0, le=MAX_TIMEOUT_S),
    ) -> Spawned:
        """Give a finished child a follow-up: a new run of it, with everything it did so far in its context."""
        async with self._face() as loom:
            child = await self.children.own(loom, child_id)
            before = await self._state(loom, child_id, child)
            if not before.finished:
                raise ToolError(f"child {child_id} is still {before.status}; wait for it or cancel it first")
            async with self.children.room(loom):  # a follow-up is one more child going, as a spawn is
                last_seq = (await loom.get_session(child_id)).last_seq
                run = await send_run(loom, self.tasks, child_id, message, max_steps=max_steps, timeout_s=timeout_s)
                self.children.track(child_id, Child(run.run_id, child.agent, last_seq, run.status))
            return Spawned(child_id=child_id, run_id=run.run_id, agent=child.agent, status=run.status)

    async def cancel(
        self, child_id: str = Field(min_length=1, max_length=200)
    ) -> Annotated[CallToolResult, ChildState]:
        """Stop a child's run; returns its final state (a child that already ended is left as it is)."""
        async with self._face() as loom:
            child = await self.children.own(loom, child_id)
            with contextlib.suppress(FaceError):  # it ended meanwhile: its state says how
                await loom.cancel_run(child.run_id)
            state = await self._state(loom, child_id, child)
        return as_result(render_state(state), state)


def _descriptions(home: Path, project: Path | None) -> tuple[str, str]:
    """The descriptions of spawn and spawn_many, spawn's listing the agent definitions found."""
    listing = agents_listing(home, project)
    if listing:
        agents = f"\n\nAgents (pass the name as `agent`):\n{listing}"
    else:
        agents = "\n\nNo agent definitions are installed ($LOOM_HOME/agents/*.md, .loom/agents/*.md)."
    return SPAWN_DESCRIPTION + agents, SPAWN_MANY_DESCRIPTION


def prepare_server(
    connect: Connect,
    *,
    session_id: str | None,
    cwd: Path,
    home: Path,
    project: Path | None,
    max_going: int = MAX_GOING,
    tasks: Connect | None = None,
) -> DeferredServer:
    """The ``subagents`` server of one session, its ``MCPServer`` built on first use.

    Args:
        connect: opens a client of Loom's face; a running server holds one for its tool calls.
        session_id: the parent session; None for top-level children in ``cwd``.
        cwd: the working directory of top-level children.
        home: Loom's home, whose ``agents/`` definitions spawn's description lists.
        project: the project whose ``.loom/agents/`` are listed too.
        max_going: how many children may be going at once; spawn refuses more.
        tasks: opens a face client declaring the tasks extension: given, spawn and send answer a 2026-07-28
            request that declares it too with the face's task for the child's run (see `_tasks`).
    """
    tools = SubagentTools(connect, session_id=session_id, cwd=cwd, max_going=max_going, tasks=tasks)
    spawn, spawn_many = _descriptions(home, project)

    def make(bound: list[Tool]) -> MCPServer:
        return MCPServer(
            "subagents",
            version=loom_version(),
            instructions="Child agents: spawn them, wait for their results, follow up, cancel.",
            tools=bound,
            log_level="WARNING",
            lifespan=tools.lifespan,
            extensions=[ChildTasks(tasks)] if tasks is not None else None,
        )

    bindings = [
        Binding(tools.spawn, "spawn", spawn, _CHANGES),
        Binding(tools.spawn_many, "spawn_many", spawn_many, _CHANGES),
        Binding(tools.wait, "wait", None, _READS),
        Binding(tools.result, "result", None, _READS),
        Binding(tools.send, "send", None, _CHANGES),
        Binding(tools.cancel, "cancel", None, _CANCEL),
    ]
    return DeferredServer("subagents", bindings, make)


def build_server(
    connect: Connect,
    *,
    session_id: str | None,
    cwd: Path,
    home: Path,
    project: Path | None,
    max_going: int = MAX_GOING,
    tasks: Connect | None = None,
) -> MCPServer:
    """The ``subagents`` server, built now (`prepare_server` defers it)."""
    deferred = prepare_server(
        connect, session_id=session_id, cwd=cwd, home=home, project=project, max_going=max_going, tasks=tasks
    )
    return deferred.build()


def main(argv: Sequence[str] | None = None) -> int:
    """``loom server subagents [--parent SESSION]``: the tools over stdio, driving the running daemon."""
    from servers.subagents._cli import run

    return run(argv)
