"""The footer: model, mode, the context watermark as a gauge, the run's status and step, the connection."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from clients.tui.text import gauge

__all__ = ["StatusBar", "short_model"]


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

    def render(self) -> Text:
        """The line, from the reactive state: the short parts first, so 80 columns cut only the model."""
        style = {"connected": "green", "disconnected": "bold red"}.get(self.connection, "yellow")
        line = Text(f"● {self.connection}", style=style)
        run = self.run if self.run == "idle" or not self.step else f"{self.run} step {self.step}"
        line.append(f"  {run}  ", style="cyan" if self.run not in ("idle", "completed") else "")
        line.append_text(gauge(self.ratio, self.threshold))
        if self.mode:
            line.append(f"  {self.mode}")
        line.append(f"  {short_model(self.model) or 'no session'}", style="bold")
        line.truncate(max(self.size.width, 1), overflow="ellipsis")
        return line


def short_model(model: str) -> str:
    """``PROVIDER:NAME`` with a path-like name cut to its last part (``scripted:/a/s.json`` → ``scripted:s.json``)."""
    provider, sep, name = model.partition(":")
    return f"{provider}{sep}{name.rsplit('/', 1)[-1]}" if sep else model
