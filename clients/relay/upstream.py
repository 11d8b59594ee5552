"""The relay's side towards the daemon: one JSON-RPC message per POST to its streamable-HTTP face.

Above this sits :mod:`clients.relay.relay`, which decides what to send and what to answer; below it is
``http.client`` over kept-alive TCP connections to 127.0.0.1, one per request in flight. A reply is
JSON or an SSE stream, which is read a line at a time so that progress notifications and the daemon's
questions reach the caller before the result does.

Only the standard library is used: importing the MCP SDK (and httpx, pydantic, anyio) costs about a
second at every spawn, and relaying bytes needs none of it. ``http.client`` never reads ``HTTP_PROXY``
and friends, and :class:`Endpoint` refuses any host but 127.0.0.1, so the bearer token goes nowhere
else.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from clients.relay.sse import events, events_with_ids

LOOPBACK = "127.0.0.1"
IDLE_S = 2.0
"""A kept-alive connection idle longer than this is closed rather than reused: the daemon's server
(uvicorn) drops idle connections after 5 s, and a request sent into one being dropped would fail."""
AFTER_ANSWER_S = 2.0
"""How long a stream may stay open after it carried the answer before it is cut."""
MAX_BODY_BYTES = 64 * 1024 * 1024

Deliver = Callable[[dict[str, Any]], bool]
"""Called with each message the daemon sends back; returns True for the answer to the request itself."""
DeliverEvent = Callable[[dict[str, Any], str | None], None]
"""Called with each message of a GET stream and the stream's last event id so far."""


class Unreachable(Exception):
    """Nothing answers at the daemon's address (connection refused, or reset before any reply)."""


class Broken(Exception):
    """The exchange failed after the request was sent; whether the daemon acted on it is unknown."""


class TimedOut(Exception):
    """The daemon did not answer before the deadline."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """The daemon's MCP endpoint, ``http://127.0.0.1:PORT/PATH``."""

    url: str
    port: int
    path: str

    @classmethod
    def parse(cls, url: str) -> Endpoint:
        """The endpoint ``url`` names.

        Raises:
            ValueError: ``url`` is not plain HTTP to 127.0.0.1 (the token must not leave the machine).
        """
        parts = urllib.parse.urlsplit(url)
        if parts.scheme != "http" or parts.hostname != LOOPBACK or parts.port is None:
            raise ValueError(f"the daemon's address {url!r} is not http://{LOOPBACK}:PORT/...; not sending the token")
        return cls(url=url, port=parts.port, path=parts.path or "/")


@dataclass(slots=True)
class Reply:
    """What one POST got back, besides the messages already delivered.

    Attributes:
        status: the HTTP status.
        session_id: the ``Mcp-Session-Id`` the daemon set, if any.
        answered: whether the answer to the request was among the messages.
        error: a JSON-RPC error object sent as a non-2xx body (a 400, a 404, the 503 of a daemon stopping).
    """

    status: int
    session_id: str | None = None
    answered: bool = False
    error: dict[str, Any] | None = None


class Abort:
    """A handle another thread uses to cut an exchange short (the caller cancelled, or gave up)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self.aborted = False

    def attach(self, sock: socket.socket | None) -> None:
        """The socket the exchange reads from; cut at once if the exchange was already aborted."""
        with self._lock:
            self._sock = sock
            if self.aborted:
                self._cut()

    def __call__(self) -> None:
        """Cut the exchange: its reader sees the stream end, and the daemon sees the connection close."""
        with self._lock:
            self.aborted = True
            self._cut()

    def _cut(self) -> None:
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _Connection(http.client.HTTPConnection):
    def connect(self) -> None:
        super().connect()
        # A small request and its answer must not wait on Nagle's algorithm and a delayed ACK.
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class Upstream:
    """Kept-alive connections to one daemon endpoint, and :meth:`post` over them; safe to use from many threads."""

    def __init__(self, endpoint: Endpoint, token: str, *, connect_timeout_s: float) -> None:
        self.endpoint = endpoint
        self._auth = f"Bearer {token}"
        self._connect_timeout_s = connect_timeout_s
        self._idle: list[tuple[_Connection, float]] = []
        self._lock = threading.Lock()

    def post(
        self,
        message: Mapping[str, Any],
        headers: Mapping[str, str],
        deliver: Deliver,
        *,
        deadline: float | None,
        abort: Abort | None = None,
    ) -> Reply:
        """POST ``message`` with ``headers``; every message the daemon sends back goes to ``deliver`` as it comes.

        ``deadline`` (``time.monotonic()``) bounds the whole exchange; None leaves it open (a listen stream).

        Raises:
            Unreachable: the request could not be sent (nothing listens there).
            Broken: the connection failed after the request was sent, or the reply was not readable.
            TimedOut: the deadline passed first.
        """
        body = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()
        sent_headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "Authorization": self._auth,
            **headers,
        }
        conn, response = self._send(body, sent_headers, deadline, abort)
        try:
            reply = self._read(conn, response, deliver, deadline)
        except (OSError, http.client.HTTPException, ValueError) as exc:
            conn.close()
            if isinstance(exc, TimeoutError) or _past(deadline):
                raise TimedOut() from exc
            if abort is not None and abort.aborted:
                return Reply(status=response.status)
            raise Broken(_describe(exc)) from exc
        if response.isclosed() and not response.will_close and not (abort is not None and abort.aborted):
            self._put(conn)
        else:
            conn.close()
        return reply

    def get_stream(self, headers: Mapping[str, str], deliver: DeliverEvent, *, abort: Abort, idle_s: float) -> int:
        """GET the 2025-era session's standalone SSE stream; each message goes to ``deliver`` until it ends.

        Returns the HTTP status once the stream ended (200) or was refused (405: none offered; 404: no such
        session; 400: a ``Last-Event-ID`` the daemon cannot resume from). The connection is its own, never
        reused. ``idle_s`` bounds the wait for any line (the daemon sends keep-alive comments meanwhile).

        Raises:
            Unreachable: nothing listens at the daemon's address.
            Broken: the stream failed, or carried something that is not a JSON-RPC message.
            TimedOut: no line came within ``idle_s``.
        """
        conn = _Connection(LOOPBACK, self.endpoint.port, timeout=self._connect_timeout_s)
        try:
            try:
                conn.request(
                    "GET",
                    self.endpoint.path,
                    headers={"Accept": "text/event-stream", "Authorization": self._auth, **headers},
                )
            except (OSError, http.client.HTTPException) as exc:
                raise Unreachable(_describe(exc)) from exc
            abort.attach(conn.sock)
            try:
                if conn.sock is not None:
                    conn.sock.settimeout(idle_s)
                response = conn.getresponse()
                kind = (response.getheader("content-type") or "").split(";")[0].strip().lower()
                if response.status != 200:
                    response.read(MAX_BODY_BYTES)
                    return response.status
                if kind != "text/event-stream":
                    raise ValueError(f"the daemon answered the GET stream with {kind or 'no content type'}")
                for data, event_id in events_with_ids(response):
                    deliver(_message(data.encode()), event_id)
                return response.status
            except TimeoutError as exc:
                raise TimedOut() from exc
            except (OSError, http.client.HTTPException, ValueError) as exc:
                raise Broken(_describe(exc)) from exc
        finally:
            conn.close()

    def delete(self, headers: Mapping[str, str], *, timeout_s: float) -> int:
        """Send ``DELETE`` (ending a 2025-era session); the status.

        Raises:
            OSError: the daemon could not be reached.
            http.client.HTTPException: its answer was not HTTP.
        """
        conn = _Connection(LOOPBACK, self.endpoint.port, timeout=timeout_s)
        try:
            conn.request("DELETE", self.endpoint.path, headers={"Authorization": self._auth, **headers})
            response = conn.getresponse()
            response.read(MAX_BODY_BYTES)
            return response.status
        finally:
            conn.close()

    def close(self) -> None:
        """Close every idle connection."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn, _ in idle:
            conn.close()

    def _send(
        self, body: bytes, headers: Mapping[str, str], deadline: float | None, abort: Abort | None
    ) -> tuple[_Connection, http.client.HTTPResponse]:
        for attempt in (1, 2):
            # The second attempt never takes another idle connection: the daemon closed the first one, and the
            # others, left idle as long, are likely closed too; a second stale one read as "daemon not running".
            conn, reused = self._take(fresh=attempt == 2)
            try:
                timeout = self._connect_timeout_s if deadline is None else min(self._connect_timeout_s, _left(deadline))
                if conn.sock is None:
                    conn.timeout = timeout
                else:
                    conn.sock.settimeout(timeout)
                conn.request("POST", self.endpoint.path, body, dict(headers))
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                # A kept-alive connection the daemon closed meanwhile fails as it is written to: send again, once.
                if reused and attempt == 1 and not isinstance(exc, TimeoutError):
                    continue
                if isinstance(exc, TimeoutError):
                    raise TimedOut() from exc
                raise Unreachable(_describe(exc)) from exc
            if abort is not None:
                abort.attach(conn.sock)  # from here on, the caller may cancel: the headers may be a while coming
            try:
                if conn.sock is not None:
                    conn.sock.settimeout(None if deadline is None else _left(deadline))
                return conn, conn.getresponse()
            except TimeoutError as exc:
                conn.close()
                raise TimedOut() from exc
            except (OSError, http.client.HTTPException) as exc:
                # Sent, then the connection failed: the daemon may have acted on it.
                conn.close()
                raise Broken(_describe(exc)) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _read(
        self, conn: _Connection, response: http.client.HTTPResponse, deliver: Deliver, deadline: float | None
    ) -> Reply:
        reply = Reply(status=response.status, session_id=response.getheader("mcp-session-id"))
        kind = (response.getheader("content-type") or "").split(";")[0].strip().lower()
        if response.status >= 300 or kind not in ("application/json", "text/event-stream"):
            raw = _timed(conn, deadline, lambda: response.read(MAX_BODY_BYTES))
            reply.error = _error_of(raw) if response.status >= 300 else None
            if response.status < 300 and raw.strip():
                raise ValueError(f"the daemon answered with {kind or 'no content type'}, not JSON or SSE")
            return reply
        if kind == "application/json":
            raw = _timed(conn, deadline, lambda: response.read(MAX_BODY_BYTES))
            if raw.strip():  # a 202 for a notification may still say it is JSON
                reply.answered = deliver(_message(raw))
            return reply
        lines = _TimedLines(conn, response, deadline)
        for data in events(lines):
            if deliver(_message(data.encode())):
                reply.answered = True
                # The stream should end with the answer; one that does not is cut soon after.
                lines.deadline = time.monotonic() + AFTER_ANSWER_S
        return reply

    def _take(self, *, fresh: bool = False) -> tuple[_Connection, bool]:
        now = time.monotonic()
        with self._lock:
            if fresh:
                stale, self._idle = self._idle, []
                for conn, _ in stale:
                    conn.close()
            while self._idle:
                conn, since = self._idle.pop()
                if now - since < IDLE_S:
                    return conn, True
                conn.close()
        return _Connection(LOOPBACK, self.endpoint.port, timeout=self._connect_timeout_s), False

    def _put(self, conn: _Connection) -> None:
        with self._lock:
            self._idle.append((conn, time.monotonic()))


class _TimedLines:
    """A response's lines, each read under what is left of a deadline."""

    def __init__(self, conn: _Connection, response: http.client.HTTPResponse, deadline: float | None) -> None:
        self._conn = conn
        self._response = response
        self.deadline = deadline

    def readline(self, limit: int = -1, /) -> bytes:
        return _timed(self._conn, self.deadline, lambda: self._response.readline(limit))


def _timed(conn: _Connection, deadline: float | None, read: Callable[[], bytes]) -> bytes:
    if conn.sock is not None:
        if deadline is not None and _left(deadline) <= 0:
            raise TimeoutError("the deadline passed")
        conn.sock.settimeout(None if deadline is None else _left(deadline))
    return read()


def _left(deadline: float) -> float:
    return max(deadline - time.monotonic(), 0.001)


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() >= deadline


def _message(raw: bytes) -> dict[str, Any]:
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise ValueError("the daemon sent a JSON value that is not a JSON-RPC message")
    return value


def _error_of(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    error = value.get("error") if isinstance(value, dict) else None
    return error if isinstance(error, dict) else None


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
