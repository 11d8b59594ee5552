"""The Loom TUI: a Textual app that is a client of the daemon's face, like the CLI or another agent.

All I/O runs in workers the app owns: one connection worker attaches to the daemon (starting it first when
asked), follows the shown session and polls the session list, and reconnects with the same cursors when the
daemon goes away; sending a message or a decision is a short worker of its own. The UI thread never waits on
the daemon.
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio
from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Footer

from clients.loom import FaceError, LiveFollower, LoomClient, daemon_running
from clients.loom.follow import read_older
from clients.tui.approval_card import ApprovalCard
from clients.tui.child_block import ChildBlock
from clients.tui.command_runner import CommandRunner
from clients.tui.completion import CompletionList
from clients.tui.connection import DECIDED_BY, DaemonStartFailed, attach, start_daemon, wait_for_daemon
from clients.tui.conversation import Conversation
from clients.tui.graph_strip import GraphStrip
from clients.tui.history import HISTORY_FILE, PromptHistory
from clients.tui.prompt import Prompt
from clients.tui.sessions_panel import SessionsPanel
from clients.tui.status_bar import StatusBar
from clients.tui.todo_list import TodoList
from orchestrator.events import (
    ApprovalDecided,
    ApprovalRequested,
    AssistantMessage,
    ContextWatermark,
    ModeChanged,
    ModelSwitched,
    RunFinished,
    RunStarted,
    SessionCreated,
)
from orchestrator.protocol import Event, SessionInfo

__all__ = ["LoomApp"]

FOLLOW_WAIT_S = 20.0
"""One ``read_events`` long-poll; a call is abandoned (and the daemon taken for gone) after this plus a margin."""
CALL_MARGIN_S = 15.0
CALL_TIMEOUT_S = 15.0
"""Any other face call: they answer in milliseconds, so this only catches a daemon that stopped answering."""
POLL_S = 3.0
"""How often the session list is refreshed (sessions started by other clients appear within this)."""
QUIT_WINDOW_S = 3.0
"""A second Ctrl-C within this quits."""
NARROW = 100
"""Below this many columns the sessions panel starts hidden (Ctrl+O shows it)."""


class LoomApp(App[int]):
    """Loom's terminal UI on the daemon running for ``home``.

    | Key | Does |
    | --- | --- |
    | Enter / Ctrl+J | send the message / new line |
    | Ctrl+C | cancel the running run; again (or with none running) to quit |
    | Ctrl+Q | quit (the daemon's runs go on) |
    | Ctrl+N | new session (made when the first message is sent) |
    | Ctrl+O | show or hide the sessions panel |
    | Ctrl+B | in a child session: back to its parent (Enter on a child's block opens the child) |
    | a / s / d | on an approval card: approve once, for the session, deny with a reason |

    Args:
        home: the Loom home whose daemon to attach to.
        cwd: where new sessions work.
        session_id: the session to open (None: a new one, made when the first message is sent).
        model: the model of sessions made here (None: as configured).
        mode: the policy mode of sessions made here.
        autostart: start ``loom serve`` in the background when no daemon runs.
    """

    CSS_PATH = "loom.tcss"
    TITLE = "Loom"
    BINDINGS = [
        Binding("ctrl+c", "interrupt", "Cancel/quit", priority=True),
        Binding("ctrl+q", "quit", "Quit", priority=True),
        Binding("ctrl+n", "new_session", "New session"),
        Binding("ctrl+o", "toggle_sessions", "Sessions"),
        Binding("ctrl+b", "parent_session", "Parent"),
        Binding("escape", "focus_prompt", "Prompt", show=False),
    ]

    def __init__(
        self,
        *,
        home: Path,
        cwd: Path,
        session_id: str | None = None,
        model: str | None = None,
        mode: str = "ask",
        autostart: bool = True,
    ) -> None:
        super().__init__()
        self.home, self.cwd = home, cwd
        self.session_id = session_id
        self.model, self.mode, self.autostart = model, mode, autostart
        self.loom: LoomClient | None = None
        self.current_run: str | None = None
        self._follower = LiveFollower(session_id) if session_id else None
        self._follow_scope: anyio.CancelScope | None = None
        self._reading_older = self._all_older = False
        self._session_changed = anyio.Event()
        self._last_interrupt = 0.0
        self._parents: dict[str, str] = {}
        """session -> the session that started it, as the daemon said (its list, the session, a child's block)."""
        self.daemon_started: int | None = None
        """The pid of the daemon this TUI started, if it started one."""
        self.commands = CommandRunner(self)
        """The prompt's slash commands (clients/tui/command_runner.py)."""

    def compose(self) -> ComposeResult:
        """The sessions panel, the conversation over the prompt, the status line and the key hints."""
        with Horizontal(id="main"):
            yield SessionsPanel()
            with Vertical(id="chat"):
                yield Conversation()
                yield TodoList()
                yield GraphStrip()
                yield Prompt(PromptHistory(self.home / HISTORY_FILE))
                yield CompletionList()
        yield StatusBar()
        yield Footer()

    @property
    def conversation(self) -> Conversation:
        """The conversation of the shown session."""
        return self.query_one(Conversation)

    @property
    def status(self) -> StatusBar:
        """The footer's state line."""
        return self.query_one(StatusBar)

    def on_mount(self) -> None:
        """Lay out for the terminal's width and start the connection worker."""
        if self.size.width < NARROW:
            self.query_one(SessionsPanel).display = False
        self.status.mode = self.mode
        self.status.model = self.model or "(new session)"
        self.query_one(Prompt).focus()
        self.run_worker(self._connection(), group="connection", exclusive=True)

    # -- the connection -----------------------------------------------------------------------------

    async def _connection(self) -> None:
        first = True
        while True:
            if not await anyio.to_thread.run_sync(daemon_running, self.home):
                if first and self.autostart:
                    await self._start_daemon()
                else:
                    self.status.connection = "disconnected"
                    await wait_for_daemon(self.home)
            first = False
            try:
                async with attach(self.home) as loom:
                    self.loom = loom
                    self.status.connection = "connected"
                    if self.session_id:
                        await self._load_session(loom, self.session_id)
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(self._poll_sessions, loom)
                        await self._follow(loom)
            except Exception as exc:  # whatever broke the link, the TUI keeps what it shows and reconnects
                self.status.connection = "disconnected"
                self.notify(f"lost the daemon ({_describe(exc)}); reconnecting…", severity="warning")
            finally:
                self.loom = None
            await anyio.sleep(1.0)

    async def _start_daemon(self) -> None:
        self.status.connection = "starting daemon"
        self.notify(f"No Loom daemon runs for {self.home}: starting `loom serve` in the background…")
        try:
            self.daemon_started = await start_daemon(self.home, self.cwd)
        except DaemonStartFailed as exc:
            self.status.connection = "disconnected"
            self.notify(f"{exc}; waiting for a daemon (start `loom serve`)", severity="error", timeout=30)
            await wait_for_daemon(self.home)
        else:
            self.notify(f"daemon started (pid {self.daemon_started}); it keeps running after the TUI closes")

    async def _follow(self, loom: LoomClient) -> None:
        """Follow the shown session, and the next one when the user switches."""
        while True:
            follower = self._follower
            if follower is None:
                await self._session_changed.wait()
                continue
            with anyio.CancelScope() as scope:
                self._follow_scope = scope
                while True:
                    with anyio.fail_after(FOLLOW_WAIT_S + CALL_MARGIN_S):
                        if follower.opened:
                            events = await follower.next(loom, FOLLOW_WAIT_S)
                        else:  # a long session opens at its end; older runs are read as the user scrolls up
                            events = await follower.open_at_end(loom)
                            self.conversation.has_older = follower.older is not None
                    for event in events:
                        self._show(event)
                    self._offer_card()

    @on(Conversation.OlderWanted)
    def _older_wanted(self, event: Conversation.OlderWanted) -> None:
        follower = self._follower
        self._all_older = self._all_older or event.everything  # Home while a page is on its way: all of it
        if self.loom is not None and follower is not None and follower.older is not None and not self._reading_older:
            self._reading_older = True
            self.run_worker(self._read_older(self.loom, follower), group="older")

    async def _read_older(self, loom: LoomClient, follower: LiveFollower) -> None:
        """Show the runs before the oldest one shown (after Home: all of them, page by page, then the top)."""
        try:
            while follower.older is not None:
                with anyio.fail_after(CALL_TIMEOUT_S):
                    events, more = await read_older(loom, follower.session_id, follower.older)
                if follower is not self._follower:
                    return  # another session is shown now
                follower.older = events[0].seq if more and events else None
                self.conversation.show_older(events)
                self.conversation.has_older = follower.older is not None
                if not self._all_older:
                    return
            if self._all_older:
                self.conversation.action_scroll_home()
        except (FaceError, TimeoutError) as exc:
            self.notify(f"older history not read: {_describe(exc)}", severity="warning")
        finally:
            self._reading_older = self._all_older = False

    async def _poll_sessions(self, loom: LoomClient) -> None:
        panel = self.query_one(SessionsPanel)
        while True:
            with anyio.fail_after(CALL_TIMEOUT_S):
                sessions = await loom.list_sessions()  # each one's status says whether it waits for an approval
            known = self.session_id in self._parents
            self._parents.update((s.session_id, s.parent_session_id) for s in sessions if s.parent_session_id)
            panel.show_sessions(sessions, cwd=str(self.cwd), current=self.session_id)
            if not known and self.session_id in self._parents:
                self.refresh_bindings()  # Ctrl+B shows once the shown session is known to be a child
            await anyio.sleep(POLL_S)

    async def _load_session(self, loom: LoomClient, session_id: str) -> None:
        with anyio.fail_after(CALL_TIMEOUT_S):
            info = await loom.get_session(session_id)
        self._session_info(info)

    def _session_info(self, info: SessionInfo) -> None:
        if info.parent_session_id:
            self._parents[info.session_id] = info.parent_session_id
            self.refresh_bindings()
        self.status.model, self.status.mode = info.model, info.mode
        self.status.ratio = info.context_ratio
        self.sub_title = f"{info.session_id} · {info.cwd}"
        self.query_one(TodoList).show_plan(info.todos)  # its plan, if its last update is not read yet

    # -- events -------------------------------------------------------------------------------------

    def _show(self, event: Event) -> None:
        self.conversation.show(event)
        self.commands.observe(event)
        self.query_one(GraphStrip).observe(event)  # an orchestration going stays in view, however scrolled
        self.query_one(TodoList).observe(event)  # the plan, over the prompt
        self.status.observe(event)  # tokens and the run's clock
        status = self.status
        if isinstance(event, SessionCreated):
            status.model, status.mode = event.model, event.mode
            if event.parent_session_id and self.session_id:
                self._parents[self.session_id] = event.parent_session_id
        elif isinstance(event, RunStarted):
            self.current_run, status.run, status.step = event.run_id, "running", 0
        elif isinstance(event, AssistantMessage):
            status.step = event.step
        elif isinstance(event, ApprovalRequested):
            status.run = "awaiting approval"
        elif isinstance(event, ApprovalDecided) and status.run == "awaiting approval":
            status.run = "running"
        elif isinstance(event, RunFinished) and event.run_id == self.current_run:
            self.current_run, status.run = None, event.status
        elif isinstance(event, ContextWatermark):
            status.ratio, status.threshold = event.ratio, event.threshold
        elif isinstance(event, ModelSwitched):
            status.model = event.model
        elif isinstance(event, ModeChanged):
            status.mode = event.mode

    def _offer_card(self) -> None:
        """Put the oldest pending approval under the keys, unless the user is writing a message."""
        cards = self.conversation.pending_cards()
        prompt = self.query_one(Prompt)
        if cards and self.focused is prompt and not prompt.text:
            cards[0].focus()
            cards[0].scroll_visible()

    # -- sessions -----------------------------------------------------------------------------------

    def switch_to(self, session_id: str | None) -> None:
        """Show another session (None: a new one, made when the first message is sent)."""
        if session_id == self.session_id and session_id is not None:
            return
        self.session_id, self.current_run = session_id, None
        self._follower = LiveFollower(session_id) if session_id else None
        self.conversation.clear()
        self.query_one(GraphStrip).reset()
        self.query_one(TodoList).reset()
        self.status.reset()
        if session_id is None:
            self.status.model, self.status.mode, self.sub_title = self.model or "(new session)", self.mode, ""
        elif self.loom is not None:
            self.run_worker(self._load_session(self.loom, session_id), group="load", exclusive=True)
        if self._follow_scope is not None:
            self._follow_scope.cancel()
        self._session_changed.set()
        self._session_changed = anyio.Event()
        self.refresh_bindings()

    @on(SessionsPanel.Chosen)
    def _session_chosen(self, event: SessionsPanel.Chosen) -> None:
        self.switch_to(event.session_id)
        self.query_one(Prompt).focus()

    @on(ChildBlock.Opened)
    def _child_opened(self, event: ChildBlock.Opened) -> None:
        if self.session_id is not None:
            self._parents.setdefault(event.child_session_id, self.session_id)
        self.switch_to(event.child_session_id)
        self.query_one(Prompt).focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Ctrl+B is offered only in a child session (one whose parent is known)."""
        if action == "parent_session":
            return self.session_id is not None and bool(self._parents.get(self.session_id))
        return True

    def action_parent_session(self) -> None:
        """Back to the session that started the child shown."""
        parent = self._parents.get(self.session_id or "")
        if parent:
            self.switch_to(parent)
            self.query_one(Prompt).focus()

    @on(SessionsPanel.Renamed)
    def _session_renamed(self, event: SessionsPanel.Renamed) -> None:
        self.run_worker(self._change_session(event.session_id, event.title), group="sessions")

    @on(SessionsPanel.Archived)
    def _session_archived(self, event: SessionsPanel.Archived) -> None:
        self.run_worker(self._change_session(event.session_id, None), group="sessions")

    async def _change_session(self, session_id: str, title: str | None) -> None:
        """Rename (``title``) or archive (None) a session, then show the list as it now is."""
        loom = self.loom
        if loom is None:
            self.notify("not connected to the daemon", severity="warning")
            return
        try:
            with anyio.fail_after(CALL_TIMEOUT_S):
                if title is None:
                    await loom.archive_session(session_id)
                else:
                    await loom.rename_session(session_id, title)
                sessions = await loom.list_sessions()
        except (FaceError, TimeoutError) as exc:
            self.notify(f"not {'archived' if title is None else 'renamed'}: {_describe(exc)}", severity="error")
            return
        if title is None and session_id == self.session_id:
            self.switch_to(None)  # an archived session takes no more messages
        panel = self.query_one(SessionsPanel)
        panel.show_sessions(sessions, cwd=str(self.cwd), current=self.session_id)

    def action_new_session(self) -> None:
        """A new session: it is made when the first message is sent."""
        self.switch_to(None)
        self.query_one(Prompt).focus()

    def action_toggle_sessions(self) -> None:
        """Show (and focus) or hide the sessions panel."""
        panel = self.query_one(SessionsPanel)
        panel.display = not panel.display
        (panel if panel.display else self.query_one(Prompt)).focus()

    def action_focus_prompt(self) -> None:
        """Back to the prompt."""
        self.query_one(Prompt).focus()

    # -- sending ------------------------------------------------------------------------------------

    @on(Prompt.Submitted)
    def _submitted(self, event: Prompt.Submitted) -> None:
        if self.commands.run(event.text):
            return
        text = event.text[1:] if event.text.startswith("//") else event.text  # "//x" sends "/x"
        self.run_worker(self._send(text), group="send")

    @on(Prompt.CompletionWanted)
    def _completion_wanted(self) -> None:
        self.commands.refresh_known()

    async def _send(self, text: str) -> None:
        loom = self.loom
        prompt = self.query_one(Prompt)
        if loom is None:
            self.notify("not connected to the daemon: the message is back in the prompt", severity="warning")
            prompt.text = text
            return
        try:
            with anyio.fail_after(CALL_TIMEOUT_S):
                if self.session_id is None:
                    info = await loom.create_session(str(self.cwd), model=self.model, mode=self.mode)
                    self.switch_to(info.session_id)
                    self._session_info(info)
                assert self.session_id is not None
                run = await loom.send_message(self.session_id, text)
        except (FaceError, TimeoutError) as exc:
            self.notify(f"not sent: {_describe(exc)}", severity="error")
            prompt.text = text
            return
        if run.status == "queued":
            self.notify("queued: it runs when the current run ends")

    @on(ApprovalCard.Decided)
    def _decided(self, event: ApprovalCard.Decided) -> None:
        self.run_worker(self._decide(event), group="decide")
        self.query_one(Prompt).focus()

    async def _decide(self, event: ApprovalCard.Decided) -> None:
        loom = self.loom
        if loom is None:
            event.card.failed("not connected to the daemon")
            return
        try:
            with anyio.fail_after(CALL_TIMEOUT_S):
                await loom.decide_approval(
                    event.approval_id, event.decision, reason=event.reason, decided_by=DECIDED_BY
                )
        except (FaceError, TimeoutError) as exc:
            event.card.failed(f"not decided: {_describe(exc)}")

    @on(ApprovalCard.StopRun)
    def _stop_run(self, event: ApprovalCard.StopRun) -> None:
        if self.loom is None:
            event.card.failed("not connected to the daemon")
        else:  # the card shows the outcome when the run's end arrives (it expires the card)
            self.run_worker(self._cancel(self.loom, event.run_id, event.card), group="cancel")
        self.query_one(Prompt).focus()

    # -- cancel and quit ----------------------------------------------------------------------------

    def action_interrupt(self) -> None:
        """Cancel the running run; a second Ctrl-C (or one with no run going) quits, leaving the daemon alone."""
        now = time.monotonic()
        if now - self._last_interrupt < QUIT_WINDOW_S:
            self.exit(0)
            return
        self._last_interrupt = now
        if self.current_run is not None and self.loom is not None:
            self.run_worker(self._cancel(self.loom, self.current_run), group="cancel")
            self.notify("cancelling the run… (Ctrl-C again to quit)")
        else:
            self.notify("Ctrl-C again to quit (the daemon keeps running)")

    async def _cancel(self, loom: LoomClient, run_id: str, card: ApprovalCard | None = None) -> None:
        try:
            with anyio.fail_after(CALL_TIMEOUT_S):
                await loom.cancel_run(run_id)
        except (FaceError, TimeoutError) as exc:
            (card.failed if card else lambda m: self.notify(m, severity="error"))(f"not cancelled: {_describe(exc)}")


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _describe(exc.exceptions[0])
    return str(exc) or type(exc).__name__
