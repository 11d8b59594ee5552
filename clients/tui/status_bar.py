"""The footer: connection, the run's status, step and elapsed time, the watermark gauge, tokens, mode and model.

Every part comes from the daemon (session, run, usage and watermark events); the app feeds them in. The line
is cut to the terminal by dropping whole parts, least important first, so that 80 columns keep what matters.
"""

from __future__ import annotations

import time

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from clients.tui.text import elapsed, gauge, token_count
from orchestrator.events import AssistantMessage, RunFinished, RunStarted
from orchestrator.protocol import Event

__all__ = ["StatusBar", "short_model"]

_GOING = frozenset({"running", "awaiting approval", "needs review"})


class StatusBar(Widget):
    """One line of state, every part of it from the daemon (session, watermark and run events)."""

    model: reactive[str] = reactive("")
    """The session's model (``PROVIDER:NAME``)."""
    mode: reactive[str] = reactive("")
    """The session's policy mode."""
    ratio: reactive[float | None] = reactive(None)
    """The watermark: context used / window (None before the first model call)."""
    threshold: reactive[float] = reactive(0.8)
    """Past this the session compacts before its next model call."""
    run: reactive[str] = reactive("idle")
    """The current run's status (``idle`` when none goes)."""
    step: reactive[int] = reactive(0)
    """The current run's last model step."""
    connection: reactive[str] = reactive("connecting")
    """``connecting``, ``starting daemon``, ``connected`` or ``disconnected``."""
    tokens: reactive[int] = reactive(0)
    """Tokens the current (or last) run's model calls used (input plus output, as the providers reported them).

    Per run, like its step and clock: a session opened at its end shows only its last runs, so a session total
    counted from the events shown would be wrong."""
    started: reactive[float | None] = reactive(None)
    """When the current (or last) run started: its ``run_started`` event's ``ts``."""
    finished: reactive[float | None] = reactive(None)
    """When that run ended (None while it goes: the elapsed time ticks)."""

    def __init__(self) -> None:
        super().__init__()
        self._run_id = ""

    def on_mount(self) -> None:
        """Tick once a second, so that a running run's elapsed time moves."""
        self.set_interval(1.0, self._tick)

    def _tick(self) -> None:
        if self.started is not None and self.finished is None:
            self.refresh()

    def observe(self, event: Event) -> None:
        """Count a model call's tokens, and start or stop the run's clock (the app sets the rest)."""
        if isinstance(event, AssistantMessage):
            self.tokens += event.usage.input_tokens + event.usage.output_tokens
        elif isinstance(event, RunStarted):
            self._run_id, self.started, self.finished, self.tokens = event.run_id, event.ts, None, 0
        elif isinstance(event, RunFinished) and event.run_id == self._run_id and self.started is not None:
            self.finished = max(event.ts, self.started)

    def reset(self) -> None:
        """Another session: no run, no tokens, no gauge yet."""
        self.run, self.step, self.ratio, self.tokens = "idle", 0, None, 0
        self.started = self.finished = None
        self._run_id = ""

    def render(self) -> Text:
        """The line: whole parts dropped, least important first, until it fits; then the model is cut."""
        # (priority, text) in display order; a lower priority is kept longer.
        style = {"connected": "green", "disconnected": "bold red"}.get(self.connection, "yellow")
        parts: list[tuple[int, Text]] = [(0, Text(f"● {self.connection}", style=style))]
        going = self.run in _GOING
        parts.append((1, Text(f"  {self.run}", style="cyan" if going else "red" if self.run == "failed" else "")))
        if self.step and self.run != "idle":
            parts.append((7, Text(f" step {self.step}", style="cyan" if going else "")))
        if self.started is not None and self.run != "idle":
            end = self.finished if self.finished is not None else time.time()
            parts.append((3, Text(f" {elapsed(end - self.started)}", style="cyan" if going else "")))
        parts.append((2, Text("  ") + gauge(self.ratio, self.threshold)))
        if self.tokens:
            parts.append((6, Text(f"  {token_count(self.tokens)} tok")))
        if self.mode:
            parts.append((5, Text(f"  {self.mode}")))
        parts.append((4, Text(f"  {short_model(self.model) or 'no session'}", style="bold")))
        width = max(self.size.width, 1)
        while sum(p.cell_len for _, p in parts) > width and len(parts) > 1:
            drop = max(range(len(parts)), key=lambda i: parts[i][0])
            if parts[drop][0] == 4:  # the model is cut rather than dropped
                break
            del parts[drop]
        line = Text().join(p for _, p in parts)
        line.truncate(width, overflow="ellipsis")
        return line


def short_model(model: str) -> str:
    """``PROVIDER:NAME`` with a path-like name cut to its last part (``scripted:/a/s.json`` → ``scripted:s.json``)."""
    provider, sep, name = model.partition(":")
    return f"{provider}{sep}{name.rsplit('/', 1)[-1]}" if sep else model
