"""Context assembly for a session of 10,000 events: from its stored events to the model's request.

Issue 6's target: under 100 ms. What is timed is what every run does before its first model call:
read the events its context is built from (the latest compaction and what follows it) from the
checkpoints server, rebuild the history from them (oversized tool results cut), and assemble the
system prompt (instruction files from the Loom home, the project root and the working directory,
the skills index, and the memory index read through the session's hub from the real memory server).

The session is real: a ``CheckpointStore`` (SQLite) holding 10,000 events written in batches as the
loop writes them (assistant message + watermark + call start, then the result), one in eight tool
results large enough to be cut, and instruction files, two skills and a dozen notes on disk. Two
variants: compacted as the runtime compacts (the figure), and never compacted (for information: a
context several windows long, which Loom never sends, rebuilt whole).
"""

from __future__ import annotations

import time
from collections import deque
from pathlib import Path

from benchmarks._report import Figure, fmt_time, median
from orchestrator.context.history import rebuild_history
from orchestrator.events import (
    AssistantMessage,
    ContextCompacted,
    ContextWatermark,
    Event,
    RunFinished,
    RunStarted,
    ToolCallFinished,
    ToolCallStarted,
    UserMessage,
)
from orchestrator.messages import Message, TextBlock, ToolUseBlock, Usage
from orchestrator.models.scripted import ScriptedModel
from orchestrator.runtime.embedded import embedded_runtime
from orchestrator.store.checkpoints import CheckpointStore

TARGET_S = 0.100
EVENTS = 10_000
WINDOW = 200_000
OVERHEAD_TOKENS = 3_000
"""System prompt and tool definitions, roughly what a session with Loom's own servers sends."""
SMALL_RESULT = "line of ordinary tool output, nothing to see here\n" * 30  # ~1.5 kB
LARGE_RESULT = "build log line 0123456789 abcdefghij\n" * 1500  # ~55 kB: cut to 16 kB


def _skill(root: Path, name: str) -> None:
    (root / name).mkdir(parents=True)
    (root / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: what {name} does\n---\nSteps.\n")


def _layout(base: Path) -> tuple[Path, Path]:
    home, project = base / "home", base / "project"
    cwd = project / "pkg"
    cwd.mkdir(parents=True)
    (project / ".git").mkdir()
    home.mkdir(exist_ok=True)
    for folder, text in ((home, "User rules.\n"), (project, "Project rules.\n"), (cwd, "Package rules.\n")):
        (folder / "AGENTS.md").write_text(text * 40)
    _skill(home / "skills", "deploy")
    _skill(project / ".loom" / "skills", "release-notes")
    return home, cwd


def _turn(session_id: str, run_id: str, step: int) -> list[Event]:
    call_id = f"toolu_{step:05d}"
    message = Message(
        role="assistant",
        content=[
            TextBlock(text=f"Step {step}: reading the next file."),
            ToolUseBlock(id=call_id, name="fs__read", input={"path": f"src/module_{step}.py"}),
        ],
    )
    content = LARGE_RESULT if step % 8 == 0 else SMALL_RESULT
    return [
        AssistantMessage(
            session_id=session_id,
            run_id=run_id,
            step=step,
            message=message,
            stop_reason="tool_use",
            usage=Usage(input_tokens=1000, output_tokens=20),
            duration_ms=1.0,
        ),
        ContextWatermark(
            session_id=session_id,
            run_id=run_id,
            step=step,
            model="scripted:bench",
            used_tokens=1020,
            window=200_000,
            ratio=0.0051,
            threshold=0.8,
            source="provider",
        ),
        ToolCallStarted(
            session_id=session_id, run_id=run_id, step=step, call_id=call_id, tool="fs__read", arguments={}
        ),
        ToolCallFinished(
            session_id=session_id,
            run_id=run_id,
            step=step,
            call_id=call_id,
            tool="fs__read",
            is_error=False,
            content=content,
            duration_ms=1.0,
        ),
    ]


async def _fill(store: CheckpointStore, session_id: str, events: int, *, compact: bool) -> tuple[int, int]:
    """Append about ``events`` events to the session as runs of 50 steps, the way the loop writes them.

    With ``compact``, a compaction is recorded whenever the context would pass 0.8 of a 200,000-token
    window, keeping the newest quarter of the window, as the runtime does (the summary itself is
    short: its size does not change what assembly costs). Returns the events stored and compactions.
    """
    stored, run, compactions = 1, 0, 0  # session_created
    turns: deque[tuple[int, int]] = deque()  # (assistant seq, estimated tokens) since the last compaction
    while stored < events:
        run += 1
        run_id = f"r_{run:05d}"
        await store.append(
            [
                RunStarted(session_id=session_id, run_id=run_id, model="scripted:bench", max_steps=50),
                UserMessage(session_id=session_id, run_id=run_id, text=f"Keep going with part {run}."),
            ]
        )
        stored += 2
        for step in range(1, 51):
            batch = _turn(session_id, run_id, step)
            await store.append(batch[:3])
            await store.append(batch[3:])
            stored += 4
            result = batch[3]
            assert isinstance(result, ToolCallFinished)
            turns.append((batch[0].seq or 0, 40 + min(len(result.content), 16_400) // 4))
            if compact and OVERHEAD_TOKENS + sum(t for _, t in turns) > 0.8 * WINDOW:
                while sum(t for _, t in turns) > WINDOW // 4:
                    turns.popleft()
                await store.append([_compaction(session_id, run_id, turns[0][0])])
                stored += 1
                compactions += 1
        await store.append(
            [
                RunFinished(
                    session_id=session_id, run_id=run_id, status="completed", reason="end_turn", final_text="", steps=50
                )
            ]
        )
        stored += 1
    return stored, compactions


def _compaction(session_id: str, run_id: str, kept_from: int) -> ContextCompacted:
    summary = "\n\n".join(f"## {s}\nnone" for s in ("Goal and constraints", "Decisions", "Files and state"))
    return ContextCompacted(
        session_id=session_id,
        run_id=run_id,
        trigger="auto",
        summary=summary,
        instructions=[],
        kept_from_seq=kept_from,
        dropped_from_seq=1,
        dropped_to_seq=kept_from - 1,
        dropped_messages=1,
        dropped_tool_calls=1,
        tokens_before=1,
        tokens_after=1,
    )


async def measure(base: Path, repetitions: int, events: int = EVENTS) -> Figure:
    """Median assembly time over ``repetitions``, for a session as Loom keeps it and one never compacted."""
    home, cwd = _layout(base)
    results: dict[str, dict[str, list[float]]] = {}
    sizes: dict[str, tuple[int, int, int]] = {}
    async with embedded_runtime(home) as runtime:
        store = runtime.log.store
        assert isinstance(store, CheckpointStore)
        for variant, compact in (("as kept", True), ("never compacted", False)):
            async with runtime.open_session(cwd, ScriptedModel.from_turns([])) as session:
                await session.hub.call("memory__set", {"namespace": "user", "key": "style", "body": "Short."})
                for i in range(12):
                    body = f"Note {i}: a fact worth keeping.\nDetails."
                    await session.hub.call("memory__set", {"namespace": "project", "key": f"fact-{i}", "body": body})
                stored, compactions = await _fill(store, session.id, events, compact=compact)
                timings: dict[str, list[float]] = {"read": [], "history": [], "system": [], "assembly": []}
                for _ in range(repetitions + 1):  # the first is a warm-up
                    started = time.perf_counter()
                    read = await store.read_context_events(session.id)
                    after_read = time.perf_counter()
                    history = rebuild_history(read)
                    after_history = time.perf_counter()
                    system = await session.system_prompt()
                    done = time.perf_counter()
                    timings["read"].append(after_read - started)
                    timings["history"].append(after_history - after_read)
                    timings["system"].append(done - after_history)
                    timings["assembly"].append(done - started)
                assert "fact-11" in system and "release-notes" in system and "Package rules" in system
                results[variant] = {k: v[1:] for k, v in timings.items()}
                sizes[variant] = (stored, compactions, len(history))
    kept = median(results["as kept"]["assembly"])
    notes = [
        f"{v}: {sizes[v][0]:,} events, {sizes[v][1]} compactions -> {sizes[v][2]:,} messages; assembly "
        f"{fmt_time(median(r['assembly']))} (rebuilding the history {fmt_time(median(r['history']))}, system prompt "
        f"{fmt_time(median(r['system']))}, reading its events from the store {fmt_time(median(r['read']))})"
        for v, r in results.items()
    ]
    return Figure(
        key="context_assembly",
        title=f"context assembly, {events:,}-event session",
        measured=f"{fmt_time(kept)} vs {fmt_time(TARGET_S)} budget",
        ratio=kept / TARGET_S,
        target=1.0,
        ratio_range=(min(results["as kept"]["assembly"]) / TARGET_S, max(results["as kept"]["assembly"]) / TARGET_S),
        notes=[
            f"median of {repetitions} after a warm-up; 'as kept' compacts at 0.8 of a {WINDOW:,}-token window as the"
            " runtime does; 'never compacted' (info) is the same events rebuilt whole, a context several windows"
            " long that Loom never sends",
            *notes,
        ],
        data={v: {k: median(t) for k, t in r.items()} for v, r in results.items()},
    )
