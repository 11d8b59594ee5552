"""The TUI's conversation: a 10,000-event session opened and scrolled to its top, and a stream of deltas.

The first two run headless (``App.run_test``) on a bare app holding Loom's :class:`~clients.tui.conversation.
Conversation` and its styles, fed events directly: what is measured is the rendering, not the daemon. The
third is the real ``LoomApp`` on a 10,000-event session stored in a real ``loom serve``: the rendering plus
the face's paging of the history. Each figure is a time against its target, as a ratio (target 1.0), the
median over repetitions.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import anyio
import anyio.lowlevel
from textual.app import App, ComposeResult

from benchmarks._procs import loom_serve
from benchmarks._report import Figure, fmt_time, median
from clients.tui.app import LoomApp
from clients.tui.assistant_text import AssistantText
from clients.tui.conversation import Conversation
from clients.tui.user_message import UserMessageBlock
from orchestrator.events import (
    AssistantMessage,
    RunFinished,
    RunStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    UserMessage,
)
from orchestrator.messages import Message, TextBlock, ToolUseBlock, Usage
from orchestrator.models.scripted import ScriptedModel
from orchestrator.protocol import Event
from orchestrator.runtime.embedded import embedded_runtime

OPEN_TARGET_S = 1.0
"""The issue: a session of 10,000 events opens (and reaches its top) in under a second."""
LAG_TARGET_S = 0.1
"""The last delta of a 200/s stream is on screen within this."""
PAGE = 200
"""Events per page, as the face's read_events gives them by default."""
PAGE_UPS = 30
"""Page Up presses timed between opening and Home."""
POLL_S = 0.002
"""How often the benchmark looks (``Pilot.pause`` would force a layout and a paint each time, which the app
does not do: it paints at most 60 times a second)."""
CSS = Path(__file__).parents[1] / "clients" / "tui" / "loom.tcss"
SESSION = "s_bench"


class _Bench(App[None]):
    CSS_PATH = str(CSS)

    def compose(self) -> ComposeResult:
        yield Conversation()


def _session(turns: int) -> list[Event]:
    """``turns`` runs of four events: a question, a tool call, its result, and a Markdown answer."""
    out: list[Event] = []
    for i in range(turns):
        run = f"r_{i}"
        call = ToolUseBlock(id=f"c_{i}", name="fs__read", input={"path": f"notes/{i}.md"})
        usage = Usage(input_tokens=1, output_tokens=1)
        out.append(UserMessage(session_id=SESSION, run_id=run, text=f"question {i}"))
        calls = Message(role="assistant", content=[call])
        out.append(
            AssistantMessage(
                session_id=SESSION,
                run_id=run,
                step=0,
                message=calls,
                stop_reason="tool_use",
                usage=usage,
                duration_ms=1,
            )
        )
        out.append(
            ToolCallFinished(
                session_id=SESSION,
                run_id=run,
                step=0,
                call_id=call.id,
                tool=call.name,
                is_error=False,
                content=f"one\ntwo\n{i}",
                duration_ms=1,
            )
        )
        answer = Message(role="assistant", content=[TextBlock(text=f"Answer **{i}**:\n\n- a point\n- another")])
        out.append(
            AssistantMessage(
                session_id=SESSION,
                run_id=run,
                step=1,
                message=answer,
                stop_reason="end_turn",
                usage=usage,
                duration_ms=1,
            )
        )
    return out


async def _until(predicate: Callable[[], bool], poll_s: float = POLL_S, timeout_s: float = 120.0) -> None:
    """Let the app run until ``predicate`` holds (polling, so nothing forces the app to paint meanwhile)."""
    with anyio.fail_after(timeout_s):
        while not predicate():  # noqa: ASYNC110 - the predicate reads widgets; there is no event to wait on
            await anyio.sleep(poll_s)


async def _open_once(events: list[Event], pages: list[float]) -> tuple[float, float, int]:
    """Seconds until the last answer is shown, then until Home shows the first question; blocks mounted.

    In between, ``PAGE_UPS`` Page Up presses, each one's time appended to ``pages``.
    """
    app = _Bench()
    last = f"question {len(events) // 4 - 1}"
    async with app.run_test(size=(160, 48)) as pilot:
        conversation = app.query_one(Conversation)
        begun = time.perf_counter()
        for start in range(0, len(events), PAGE):
            for event in events[start : start + PAGE]:
                conversation.show(event)
            await anyio.lowlevel.checkpoint()  # the app shows one page, then awaits the next from the daemon
        await _until(lambda: bool(users := conversation.query(UserMessageBlock)) and users.last().text == last)
        await pilot.pause()  # every pending message handled, then one frame laid out and painted
        opened = time.perf_counter() - begun
        mounted = len(conversation.children)
        conversation.focus()
        for _ in range(PAGE_UPS):  # scrolling up page by page, older blocks mounted as they are reached
            begun = time.perf_counter()
            await pilot.press("pageup")  # the key handled, every message it caused handled, a frame painted
            pages.append(time.perf_counter() - begun)
        begun = time.perf_counter()
        await pilot.press("home")
        await _until(
            lambda: conversation.scroll_y == 0 and conversation.query(UserMessageBlock).first().text == "question 0"
        )
        await pilot.pause()
        home = time.perf_counter() - begun
    return opened, home, mounted


async def _lag_once(rate: float, seconds: float) -> tuple[float, list[float]]:
    """Feed ``rate`` deltas a second for ``seconds``: the last one's lag, and every delta's lag to the screen.

    A delta is on screen once the text's last rendering (made when Textual lays out and paints a frame) holds
    it; that is looked at every tick of the feeding clock, so a lag is known to within one tick.
    """
    app = _Bench()
    async with app.run_test(size=(160, 48)) as pilot:
        conversation = app.query_one(Conversation)
        total = int(rate * seconds)
        interval = 1 / rate
        fed: list[tuple[float, int]] = []
        """(when, length of the text with it) for each delta not yet seen on screen"""
        lags: list[float] = []
        length = 0
        text: AssistantText | None = None

        def look() -> bool:
            """Record the lag of the deltas now on screen; whether all are."""
            shown = len(text.rendered_source) if text is not None else 0
            now = time.perf_counter()
            while fed and fed[0][1] <= shown:
                lags.append(now - fed.pop(0)[0])
            return not fed

        begun = time.perf_counter()
        for i in range(total):
            piece = f"word{i} " + ("\n\n" if i % 40 == 39 else "")
            conversation.show(TextDelta(session_id=SESSION, run_id="r", step=0, text=piece))
            length += len(piece)
            fed.append((time.perf_counter(), length))
            text = text or conversation.texts[0]
            await anyio.sleep(max(0.0, begun + (i + 1) * interval - time.perf_counter()))
            look()
        await _until(look)
        await pilot.pause()
    return lags[-1], lags


async def measure_open(turns: int, reps: int) -> Figure:
    """A session of ``4 * turns`` events opened (fed in face-sized pages) and scrolled to its top."""
    events = _session(turns)
    opens: list[float] = []
    homes: list[float] = []
    pages: list[float] = []
    mounted = 0
    for _ in range(reps):
        opened, home, mounted = await _open_once(events, pages)
        opens.append(opened)
        homes.append(home)
    total = median([o + h for o, h in zip(opens, homes, strict=True)])
    return Figure(
        key="tui_open_long_session",
        title=f"TUI: open a {len(events):,}-event session and go to its top",
        measured=f"open {fmt_time(median(opens))} + Home {fmt_time(median(homes))} vs {fmt_time(OPEN_TARGET_S)}",
        ratio=total / OPEN_TARGET_S,
        target=1.0,
        notes=[
            f"headless App.run_test at 160x48, a bare app with the Conversation and loom.tcss; {len(events):,} "
            f"events fed in pages of {PAGE} with one event-loop turn between pages; 'open' ends when the last "
            "question is mounted and one more frame is painted, 'Home' when the first question is at the top",
            f"blocks mounted after opening: {mounted} of {len(events) - turns:,} (the window, not the whole history)",
            f"then {PAGE_UPS} Page Up presses (mounting older blocks as they come near): median "
            f"{fmt_time(median(pages))}, worst {fmt_time(max(pages))} from the key to its frame painted",
            "the daemon's side (read_events paging 10,000 events) is not included",
        ],
        data={"open_s": opens, "home_s": homes, "page_up_s": pages, "mounted": mounted, "events": len(events)},
    )


async def measure_stream(rate: float, seconds: float, reps: int) -> Figure:
    """``rate`` text deltas a second into one assistant block: the lag of the last one to reach the screen."""
    lasts: list[float] = []
    every: list[float] = []
    for _ in range(reps):
        last, lags = await _lag_once(rate, seconds)
        lasts.append(last)
        every.extend(lags)
    every.sort()
    p99 = every[min(len(every) - 1, int(len(every) * 0.99))]
    return Figure(
        key="tui_stream_lag",
        title=f"TUI: {rate:.0f} deltas/s rendered without falling behind",
        measured=f"last delta on screen after {fmt_time(median(lasts))} vs {fmt_time(LAG_TARGET_S)}",
        ratio=median(lasts) / LAG_TARGET_S,
        target=1.0,
        notes=[
            f"headless App.run_test at 160x48; {int(rate * seconds)} deltas of one word (a paragraph break every "
            f"40) fed on a {1000 / rate:.0f} ms clock for {seconds:.0f} s into one AssistantText through "
            "Conversation.show; a delta is on screen when the text's last rendering for a frame holds it, looked "
            "at on every tick of the clock; the figure is the last delta's lag (median over repetitions)",
            f"every delta's lag: median {fmt_time(median(every))}, p99 {fmt_time(p99)}, worst {fmt_time(every[-1])}"
            " (the text grows to ~8 KB; past 2,000 characters each finished paragraph is rendered once)",
        ],
        data={"last_lag_s": lasts, "median_lag_s": median(every), "p99_lag_s": p99, "worst_lag_s": every[-1]},
    )


def _stored_turns(session_id: str, turns: int) -> list[list[Event]]:
    """``turns`` runs as the loop stores them (seven events each), one list per run."""
    out: list[list[Event]] = []
    for i in range(turns):
        run = f"r_{i:05d}"
        call = ToolUseBlock(id=f"c_{i}", name="fs__read", input={"path": f"notes/{i}.md"})
        usage = Usage(input_tokens=1, output_tokens=1)
        calls = Message(role="assistant", content=[call])
        answer = Message(role="assistant", content=[TextBlock(text=f"Answer **{i}**:\n\n- a point\n- another")])
        out.append(
            [
                RunStarted(session_id=session_id, run_id=run, model="scripted:bench", max_steps=5),
                UserMessage(session_id=session_id, run_id=run, text=f"question {i}"),
                AssistantMessage(
                    session_id=session_id,
                    run_id=run,
                    step=0,
                    message=calls,
                    stop_reason="tool_use",
                    usage=usage,
                    duration_ms=1,
                ),
                ToolCallStarted(
                    session_id=session_id, run_id=run, step=0, call_id=call.id, tool=call.name, arguments=call.input
                ),
                ToolCallFinished(
                    session_id=session_id,
                    run_id=run,
                    step=0,
                    call_id=call.id,
                    tool=call.name,
                    is_error=False,
                    content=f"one\ntwo\n{i}",
                    duration_ms=1,
                ),
                AssistantMessage(
                    session_id=session_id,
                    run_id=run,
                    step=1,
                    message=answer,
                    stop_reason="end_turn",
                    usage=usage,
                    duration_ms=1,
                ),
                RunFinished(session_id=session_id, run_id=run, status="completed", reason="", final_text="", steps=2),
            ]
        )
    return out


async def _daemon_open_once(home: Path, cwd: Path, session_id: str, last: str) -> float:
    """Seconds from the app starting on ``session_id`` until its last question is on screen."""
    app = LoomApp(home=home, cwd=cwd, session_id=session_id, autostart=False)
    begun = time.perf_counter()
    async with app.run_test(size=(160, 48)) as pilot:
        conversation = app.conversation
        await _until(lambda: bool(u := conversation.query(UserMessageBlock)) and u.last().text == last)
        await pilot.pause()
        return time.perf_counter() - begun


async def measure_daemon_open(base: Path, events: int, reps: int) -> Figure:
    """``loom tui SESSION`` on a stored session of about ``events`` events, through a real ``loom serve``."""
    home, cwd = base / "home", base / "work"
    cwd.mkdir(parents=True)
    async with embedded_runtime(home) as runtime, runtime.open_session(cwd, ScriptedModel.from_turns([])) as session:
        session_id = session.id
        turns = _stored_turns(session_id, events // 7)
        for batch in turns:
            await runtime.log.store.append(batch)
    stored = 7 * len(turns) + 1
    opens: list[float] = []
    async with loom_serve(home, cwd):
        await _daemon_open_once(home, cwd, session_id, f"question {len(turns) - 1}")  # warm-up
        for _ in range(reps):
            opens.append(await _daemon_open_once(home, cwd, session_id, f"question {len(turns) - 1}"))
    return Figure(
        key="tui_open_through_daemon",
        title=f"TUI: `loom tui SESSION` on a {stored:,}-event session, through the daemon",
        measured=f"last question on screen after {fmt_time(median(opens))} vs {fmt_time(OPEN_TARGET_S)}",
        ratio=median(opens) / OPEN_TARGET_S,
        target=1.0,
        notes=[
            "the real LoomApp under App.run_test (160x48) attached to a real `loom serve` (its own process) over "
            "HTTP, on a session stored beforehand (7 events a run: started, question, tool call, its start and "
            "result, answer, finished); from the app starting to the last question on screen and painted",
            "the TUI reads the session's end: read_events(before_seq=...) pages of 200 events, backwards until a "
            "page holds a run's start (one page here), then follows from the newest event; older runs are read as "
            "the user scrolls up; the conversation mounts only the last blocks",
        ],
        data={"open_s": opens, "events": stored},
    )


async def measure(base: Path, quick: bool) -> list[Figure]:
    """The three figures (``quick``: fewer repetitions and a shorter stream)."""
    reps = 1 if quick else 3
    return [
        await measure_open(2500, reps),
        await measure_stream(200, 2 if quick else 5, reps),
        await measure_daemon_open(base, 10_000, reps),
    ]
