"""Carrying out the prompt's slash commands: each is a face call in a worker, bounded, its result a quiet notice.

A command that cannot run (no session yet, not connected, a refusal from the face) says why and what to do,
and puts its text back in the prompt so nothing typed is lost. ``/SKILLNAME args`` sends a message asking the
model to use that skill (the model loads it with its ``loom__skill`` tool, as for any skill it picks itself).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Literal

import anyio

from clients.loom import FaceError, LoomClient
from clients.timeline import build_timeline, render_timeline
from clients.tui.checkpoint_picker import CheckpointPicker
from clients.tui.commands import COMMANDS, MODES, Invocation, parse
from clients.tui.connection import DECIDED_BY
from clients.tui.delegate_commands import CommandRefused, DelegateCommands
from clients.tui.help import help_text
from clients.tui.long_work_commands import LongWorkCommands
from clients.tui.prompt import Prompt
from clients.tui.servers_view import ServersScreen
from clients.tui.sessions_panel import SessionsPanel
from orchestrator.events import Event, ModeChanged, Notice, RunFinished, RunResumed, RunStarted
from orchestrator.protocol import CompactionInfo
from orchestrator.protocol_servers import ServerList

if TYPE_CHECKING:
    from clients.tui.app import LoomApp

__all__ = ["CommandRunner"]

CALL_TIMEOUT_S = 15.0
"""A command's face calls answer in milliseconds; this only catches a daemon that stopped answering."""
COMPACT_TIMEOUT_S = 120.0
"""A compaction calls the model to write its summary, which takes as long as a model call."""
_PAGE = 1000

Handler = Callable[[LoomClient, str], Awaitable[None]]
Level = Literal["info", "warning", "error"]


class _Refused(Exception):
    """A command that cannot run as things are (no session yet); the message says what to do."""


class CommandRunner:
    """The app's commands, and what they need to remember from the events shown (the last and interrupted runs)."""

    def __init__(self, app: LoomApp) -> None:
        self.app = app
        self.last_run: tuple[str, str] | None = None
        """(session, run) of the newest run seen, for ``/trace``."""
        self.interrupted: tuple[str, str] | None = None
        """(session, run) of a run that ended interrupted (or needs review), for ``/resume``."""
        delegate = DelegateCommands(app, self.notice)
        long_work = LongWorkCommands(app, self.notice)
        self._handlers: dict[str, Handler] = {
            "compact": self._compact,
            "model": self._model,
            "mode": self._mode,
            "rewind": self._rewind,
            "resume": self._resume,
            "cancel": self._cancel,
            "trace": self._trace,
            "servers": self._servers,
            "review": delegate.review,
            "orchestrate": delegate.orchestrate,
            "goal": long_work.goal,
            "handoff": long_work.handoff,
        }

    @property
    def prompt(self) -> Prompt:
        """The app's prompt."""
        return self.app.query_one(Prompt)

    # -- what the app calls -------------------------------------------------------------------------

    def observe(self, event: Event) -> None:
        """Note the runs ``event`` tells of, and show a mode change (called for every event shown)."""
        if isinstance(event, RunStarted):
            self.last_run = (event.session_id, event.run_id)
        elif isinstance(event, RunFinished) and event.status in ("interrupted", "needs_review"):
            self.interrupted = (event.session_id, event.run_id)
        elif isinstance(event, RunFinished | RunResumed) and self.interrupted == (event.session_id, event.run_id):
            self.interrupted = None
        elif isinstance(event, ModeChanged):  # whoever changed it: every client watching says so
            by = f" by {event.changed_by}" if event.changed_by else ""
            self.notice(f"mode: {event.previous} → {event.mode}{by} (from the next tool call)")

    def run(self, text: str) -> bool:
        """Carry out ``text`` if it is a command (True); False when it is a message to send."""
        if text.startswith("//"):
            return False
        invocation = parse(text)
        if invocation is None:
            return False
        if invocation.name == "help":
            self.notice(help_text(sorted(self.prompt.known.skills)))
        elif invocation.name == "sessions":
            panel = self.app.query_one(SessionsPanel)
            panel.display = True
            panel.focus()
        else:
            self.app.run_worker(self._carry_out(invocation, text), group="command")
        return True

    def refresh_known(self) -> None:
        """Fetch what the completion list offers: the models in use, the session's skills."""
        self.app.run_worker(self._refresh_known(), group="completion", exclusive=True)

    def notice(self, text: str, level: Level = "info") -> None:
        """Show ``text`` as a quiet line in the conversation (``warning``/``error`` stand out)."""
        self.app.conversation.show(Notice(session_id=self.app.session_id or "", text=text, level=level))

    # -- carrying out -------------------------------------------------------------------------------

    async def _carry_out(self, invocation: Invocation, text: str) -> None:
        loom = self.app.loom
        if loom is None:
            self._refuse(text, "not connected to the daemon; try again once the status line says connected")
            return
        handler = self._handlers.get(invocation.name)
        try:
            if handler is None:
                await self._skill(loom, invocation, text)
            else:
                await handler(loom, invocation.args)
        except (FaceError, _Refused, CommandRefused) as exc:
            self._refuse(text, f"/{invocation.name}: {exc}")
        except TimeoutError:
            self._refuse(text, f"/{invocation.name}: the daemon did not answer in time; try again")

    def _refuse(self, text: str, why: str) -> None:
        self.notice(why, "error")
        prompt = self.prompt
        if not prompt.text.strip():  # the user may have started something else meanwhile: never overwrite it
            prompt.set_text(text)

    def _session(self) -> str:
        if self.app.session_id is None:
            raise _Refused("there is no session yet; send a message first")
        return self.app.session_id

    async def _skill(self, loom: LoomClient, invocation: Invocation, text: str) -> None:
        if invocation.name not in self.prompt.known.skills and self.app.session_id is not None:
            await self._refresh_known()
        if invocation.name not in self.prompt.known.skills:
            names = ", ".join(f"/{c.name}" for c in COMMANDS)
            self._refuse(text, f"unknown command /{invocation.name}; the commands are {names}, and skills by name")
            return
        what = f" for this: {invocation.args}" if invocation.args else ""
        message = f'Use the skill "{invocation.name}" (load it with the loom__skill tool){what}'
        self.app.post_message(Prompt.Submitted(self.prompt, message))

    async def _compact(self, loom: LoomClient, args: str) -> None:
        preview = args == "--preview"
        focus = "" if preview else args
        session_id = self._session()
        self.notice("estimating a compaction…" if preview else "compacting…")
        with anyio.fail_after(CALL_TIMEOUT_S if preview else COMPACT_TIMEOUT_S):
            info = await loom.compact_session(session_id, focus=focus, preview=preview)
        self.notice(*_compaction_notice(info))

    async def _model(self, loom: LoomClient, args: str) -> None:
        if not args:
            await self._refresh_known()
            known = ", ".join(self.prompt.known.models) or "none yet"
            self.notice(f"model: {self.app.status.model}; /model PROVIDER:NAME switches (used here: {known})")
            return
        if self.app.session_id is None:  # the session made by the first message will use it
            self.app.model = self.app.status.model = args
            self.notice(f"new sessions here use {args}")
            return
        with anyio.fail_after(CALL_TIMEOUT_S):
            info = await loom.switch_model(self._session(), args)
        self.app.status.model = info.model
        if info.compaction is not None:
            self.notice(*_compaction_notice(info.compaction))

    async def _mode(self, loom: LoomClient, args: str) -> None:
        if not args:
            self.notice(f"mode: {self.app.status.mode}; /mode {'|'.join(MODES)} changes it from the next tool call")
            return
        if self.app.session_id is None:
            if args not in MODES:
                raise _Refused(f"unknown mode {args!r}; use one of {', '.join(MODES)}")
            self.app.mode = self.app.status.mode = args
            self.notice(f"new sessions here start in mode {args}")
            return
        with anyio.fail_after(CALL_TIMEOUT_S):
            info = await loom.set_mode(self._session(), args, changed_by=DECIDED_BY)
        self.app.status.mode = info.mode
        if not info.changed:  # a change is shown from its mode_changed event, as in every other client's view
            self.notice(f"mode is already {info.mode}")

    async def _rewind(self, loom: LoomClient, args: str) -> None:
        session_id = self._session()
        with anyio.fail_after(CALL_TIMEOUT_S):
            found = await loom.list_checkpoints(session_id)
        if not found.checkpoints:
            self.notice("nothing to rewind to: the session has no runs yet")
            return

        def picked(run_id: str | None) -> None:
            if run_id is not None:
                self.app.run_worker(self._rewind_to(session_id, run_id), group="command")
            self.prompt.focus()

        self.app.push_screen(CheckpointPicker(found.checkpoints), picked)

    async def _rewind_to(self, session_id: str, run_id: str) -> None:
        loom = self.app.loom
        if loom is None:
            self.notice("not connected to the daemon: nothing was rewound; try /rewind again", "error")
            return
        try:
            with anyio.fail_after(CALL_TIMEOUT_S):
                done = await loom.rewind_session(session_id, run_id)
        except (FaceError, TimeoutError) as exc:
            self.notice(f"/rewind: {exc or 'the daemon did not answer in time'}", "error")
            return
        self.app.switch_to(done.session_id)
        files = ", ".join(f"{f.path} {f.action}" for f in done.files) or "no files to restore"
        text = f"rewound to before run {run_id}: {files}; this is a new branch of {session_id}"
        if done.not_rewound:
            text += f"; not rewound (shell or other servers): {', '.join(done.not_rewound)}"
        self.notice(text)

    async def _resume(self, loom: LoomClient, args: str) -> None:
        session_id = self._session()
        if self.interrupted is None or self.interrupted[0] != session_id:
            self.notice("nothing to resume: no run of this session was interrupted")
            return
        run_id = self.interrupted[1]
        with anyio.fail_after(CALL_TIMEOUT_S):
            await loom.resume_run(run_id)
        self.app.current_run, self.app.status.run = run_id, "running"
        self.notice(f"resuming run {run_id}…")

    async def _cancel(self, loom: LoomClient, args: str) -> None:
        run_id = self.app.current_run
        if run_id is None:
            self.notice("no run is going")
            return
        with anyio.fail_after(CALL_TIMEOUT_S):
            await loom.cancel_run(run_id)
        self.notice(f"cancelling run {run_id}…")

    async def _trace(self, loom: LoomClient, args: str) -> None:
        session_id = self._session()
        run_id = self.app.current_run
        if run_id is None and self.last_run is not None and self.last_run[0] == session_id:
            run_id = self.last_run[1]
        if run_id is None:
            self.notice("no run to trace yet: send a message first")
            return
        events: list[Event] = []
        with anyio.fail_after(CALL_TIMEOUT_S):
            run = await loom.get_run(run_id)
            cursor = 0
            while True:
                page = await loom.read_events(session_id, after_seq=cursor, limit=_PAGE)
                events += page.events
                if len(page.events) < _PAGE:
                    break
                cursor = page.next_after_seq
        head = {"run_id": run.run_id, "session_id": run.session_id, "status": run.status}
        self.notice(render_timeline(head, build_timeline(events, run_id)).rstrip())

    async def _servers(self, loom: LoomClient, args: str) -> None:
        session_id = self.app.session_id  # its live states; with no session yet, the configured servers probed

        async def fetch() -> ServerList:
            current = self.app.loom  # the one connected now: the screen may outlive a reconnect
            if current is None:
                raise FaceError("not connected to the daemon; r tries again", "list_servers")
            return await current.list_servers(session_id)

        def closed(_: None) -> None:
            self.prompt.focus()

        self.app.push_screen(ServersScreen(fetch), closed)

    async def _refresh_known(self) -> None:
        loom = self.app.loom
        if loom is None:
            return
        known = self.prompt.known
        # Skills first, each call bounded on its own: the models' list asks each provider's SDK about its
        # credentials, which can be slow the first time, and must not keep the skills out of the list.
        try:
            if self.app.session_id is not None:
                with anyio.fail_after(CALL_TIMEOUT_S):
                    skills = await loom.list_skills(self.app.session_id)
                known.skills = {s.name: s.description for s in skills.skills}
                self.prompt.refresh_completion()
            with anyio.fail_after(CALL_TIMEOUT_S):
                models = await loom.list_models()
            known.models, known.providers = models.models, models.providers
        except (FaceError, TimeoutError):
            return  # completion offers what it has; the command itself says what went wrong
        self.prompt.refresh_completion()


def _compaction_notice(info: CompactionInfo) -> tuple[str, Level]:
    if info.status == "preview":
        return (
            f"compaction preview: {info.tokens_before:,} → about {info.tokens_after:,} tokens (window "
            f"{info.window:,}); {info.dropped_messages} messages ({info.dropped_tool_calls} tool calls) would be "
            "summarised. /compact does it",
            "info",
        )
    if info.status == "nothing_to_compact":
        return f"nothing to compact{': ' + info.detail if info.detail else ''}", "info"
    if info.status == "compacted":
        return (
            f"compacted: {info.tokens_before:,} → {info.tokens_after:,} tokens; {info.dropped_messages} messages "
            "summarised (the store keeps them all)",
            "info",
        )
    return f"compaction {info.status}: {info.detail}; the history is kept as it is", "warning"
