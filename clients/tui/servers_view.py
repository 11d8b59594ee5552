"""``/servers``: each MCP server's state, tool count, restarts, latency and last error, in a table over the prompt.

The screen asks the face's ``list_servers`` for the shown session (its live states) or, with no session yet, for
the configured servers probed afresh; the heading says which. A session's listing is read again every few seconds
while the screen is open (it costs the daemon nothing); a probe starts every configured server, so it is read
again only on ``r``. The line under the table has the highlighted server's whole last error. Every cell came from
a server or its config: it is made safe for the terminal (:func:`clients.server_rows.plain`) and drawn as plain
text, never as markup.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from clients.loom import FaceError
from clients.server_rows import FULL_ERROR, SERVER_HEADINGS, listing_note, plain, server_cells
from orchestrator.protocol_servers import ServerInfo, ServerList

__all__ = ["REFRESH_S", "ServersScreen"]

REFRESH_S = 3.0
"""How often a session's live listing is read again while the screen is open."""
CALL_TIMEOUT_S = 60.0
"""A probe waits for each configured server's start-up timeout (30 s by default); a session's listing is instant."""

_STATE_STYLE = {"ready": "green", "degraded": "yellow", "failed": "bold red", "starting": "cyan", "stopped": "dim"}

Fetch = Callable[[], Awaitable[ServerList]]


class ServersScreen(ModalScreen[None]):
    """The servers table; ``r`` reads it again, Escape closes it."""

    BINDINGS = [Binding("escape", "close", "Close"), Binding("r", "refresh", "Refresh")]

    DEFAULT_CSS = """
    ServersScreen {
        align: center middle;
    }
    #servers-panel {
        width: 100%;
        height: auto;
        max-height: 90%;
        border: round $accent;
        background: $surface;
        padding: 0 1;
    }
    #servers-heading, #servers-detail {
        height: auto;
        color: $text-muted;
    }
    #servers-table {
        height: auto;
        max-height: 20;
    }
    """

    def __init__(self, fetch: Fetch) -> None:
        super().__init__()
        self._fetch = fetch
        self.listing: ServerList | None = None
        """The listing shown (None until the first answer)."""

    def compose(self) -> ComposeResult:
        """A heading, the table, and the highlighted server's error."""
        with Vertical(id="servers-panel"):
            yield Static("MCP servers: asking the daemon…", id="servers-heading")
            yield DataTable(id="servers-table", cursor_type="row", zebra_stripes=True)
            yield Static("", id="servers-detail")

    def on_mount(self) -> None:
        """Columns, the first read, and the periodic one."""
        table = self.query_one("#servers-table", DataTable)
        table.add_columns(*SERVER_HEADINGS)
        table.focus()
        self.load()
        self.set_interval(REFRESH_S, self._tick)

    def _tick(self) -> None:
        if self.listing is not None and self.listing.source == "session":
            self.load()

    @work(exclusive=True, group="servers")
    async def load(self) -> None:
        """Read the listing and show it (an error says what went wrong in the heading)."""
        heading = self.query_one("#servers-heading", Static)
        try:
            with anyio.fail_after(CALL_TIMEOUT_S):
                listing = await self._fetch()
        except (FaceError, TimeoutError) as exc:
            heading.update(Text(f"MCP servers: {plain(str(exc)) or 'the daemon did not answer in time'} (r retries)"))
            return
        self.show(listing)

    def show(self, listing: ServerList) -> None:
        """Draw ``listing``, keeping the highlighted row where the same server still is."""
        self.listing = listing
        failed = sum(s.state == "failed" for s in listing.servers)
        summary = f"{len(listing.servers)} servers" + (f", {failed} failed" if failed else "")
        heading = self.query_one("#servers-heading", Static)
        heading.update(Text(f"MCP servers: {summary}; {listing_note(listing)}  (r refreshes, Escape closes)"))
        table = self.query_one("#servers-table", DataTable)
        keep = table.cursor_row
        table.clear()
        for server in listing.servers:
            cells = server_cells(server)
            style = _STATE_STYLE.get(server.state, "")
            table.add_row(Text(cells[0]), Text(cells[1], style=style), *(Text(c) for c in cells[2:]), key=server.name)
        if listing.servers:
            table.move_cursor(row=min(keep, len(listing.servers) - 1))
            self._detail(listing.servers[table.cursor_row])

    @on(DataTable.RowHighlighted, "#servers-table")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        if self.listing is not None and 0 <= event.cursor_row < len(self.listing.servers):
            self._detail(self.listing.servers[event.cursor_row])

    def _detail(self, server: ServerInfo) -> None:
        detail = self.query_one("#servers-detail", Static)
        if server.last_error:
            detail.update(Text(f"{plain(server.name)}: {plain(server.last_error, FULL_ERROR)}", style="red"))
        else:
            detail.update(Text(f"{plain(server.name)}: no error"))

    def action_refresh(self) -> None:
        """Read the listing again now (a probe starts the configured servers again)."""
        self.query_one("#servers-heading", Static).update(Text("MCP servers: asking the daemon…"))
        self.load()

    def action_close(self) -> None:
        """Back to the conversation."""
        self.dismiss(None)
