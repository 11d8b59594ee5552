"""A 2025-era session's standalone stream: the daemon's own messages, relayed to the caller as they come.

In the 2025 revisions of streamable HTTP the server sends what belongs to no request of the client's
(``notifications/resources/updated`` for a subscribed resource, log messages, list changes, its own
requests) on a ``GET`` SSE stream the client opens once its session is known. The caller of ``loom mcp``
speaks stdio and cannot open it, so the relay does, in a thread of its own, one per session:

- every message on the stream is written to stdout; a request of the daemon's is answered by the caller
  on stdin, which the relay POSTs into the session as it does any other answer;
- a stream that ends or breaks is opened again after a pause (doubling, at most :data:`MAX_PAUSE_S`),
  with ``Last-Event-ID`` so that the daemon replays what the caller missed meanwhile; an id the daemon no
  longer holds (400) means starting afresh;
- 405 (the daemon offers no such stream), 404 (the session is gone: the relay opens a new one, and a new
  stream with it), 401/403 and 503 (refused, or stopping) end it quietly, as does nothing answering at
  the address; so do :data:`MAX_FAILURES` failed attempts in a row;
- :meth:`Standalone.stop` (stdin closed, or the session replaced) cuts it at once.

The 2026-07-28 revision has no sessions and no such stream (``subscriptions/listen`` is a POST whose
response streams), so nothing here runs for it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from clients.relay.upstream import Abort, Broken, TimedOut, Unreachable, Upstream

logger = logging.getLogger("loom.mcp")

FIRST_PAUSE_S = 0.25
MAX_PAUSE_S = 5.0
MAX_FAILURES = 8
"""Attempts in a row that bring no message before the stream is given up on."""
IDLE_S = 60.0
"""The longest silence before the stream is taken for dead (the daemon sends a keep-alive every 15 s)."""
_ENDS = {404: "the session is gone", 405: "the daemon offers none", 401: "refused", 403: "refused", 503: "stopping"}


class Standalone:
    """The GET stream of one 2025-era session, kept open in a daemon thread until :meth:`stop`."""

    def __init__(self, upstream: Upstream, headers: Mapping[str, str], write: Callable[[dict[str, Any]], None]) -> None:
        self._upstream = upstream
        self._headers = dict(headers)
        self._write = write
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._abort = Abort()
        self._thread = threading.Thread(target=self._run, name="relay standalone stream", daemon=True)
        self.last_event_id: str | None = None
        """The id of the last message relayed, sent as ``Last-Event-ID`` when the stream is opened again."""

    def start(self) -> None:
        """Open the stream in its own thread."""
        self._thread.start()

    def stop(self, wait_s: float = 2.0) -> None:
        """Cut the stream and wait (at most ``wait_s``) for its thread to end."""
        self._stopped.set()
        with self._lock:
            self._abort()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(wait_s)

    @property
    def running(self) -> bool:
        """Whether the thread still keeps the stream (or waits to open it again)."""
        return self._thread.is_alive()

    def _run(self) -> None:
        failures, pause = 0, FIRST_PAUSE_S
        while not self._stopped.is_set():
            relayed = self._open_once()
            if relayed is None:
                return
            failures, pause = (0, FIRST_PAUSE_S) if relayed else (failures + 1, min(pause * 2, MAX_PAUSE_S))
            if failures >= MAX_FAILURES:
                logger.info("gave up on the session's standalone stream after %d attempts", failures)
                return
            self._stopped.wait(pause)

    def _open_once(self) -> bool | None:
        """One GET: whether it relayed anything; None when the stream is over for good."""
        with self._lock:
            if self._stopped.is_set():
                return None
            abort = self._abort = Abort()
        headers = dict(self._headers)
        resuming = self.last_event_id
        if resuming is not None:
            headers["Last-Event-ID"] = resuming
        relayed = False

        def deliver(message: dict[str, Any], event_id: str | None) -> None:
            nonlocal relayed
            relayed = True
            if event_id is not None:
                self.last_event_id = event_id
            if not self._stopped.is_set():
                self._write(message)

        try:
            status = self._upstream.get_stream(headers, deliver, abort=abort, idle_s=IDLE_S)
        except Unreachable as exc:
            logger.info("the session's standalone stream ends: nothing answers (%s)", exc)
            return None
        except (Broken, TimedOut) as exc:
            if not self._stopped.is_set():
                why = str(exc) or f"silent for {IDLE_S:g} s"
                logger.info("the session's standalone stream broke (%s); opening it again", why)
            return relayed
        if status in _ENDS:
            (logger.debug if status == 405 else logger.info)(
                "no standalone stream for the session (HTTP %d: %s)", status, _ENDS[status]
            )
            return None
        if status == 400 and resuming is not None:
            logger.info("the daemon cannot resume the standalone stream after event %s; opening it afresh", resuming)
            self.last_event_id = None
            return True  # no pause: nothing is wrong with the stream itself
        if status != 200:
            logger.info("the daemon refused the standalone stream (HTTP %d)", status)
        return relayed
