"""The relay: the driving agent's JSON-RPC lines on stdin, POSTed as they are to the daemon; its answers to stdout.

Above this is the client driving ``loom mcp`` (Claude Code, Codex, ...), speaking MCP over stdio; below
it, :class:`~clients.relay.upstream.Upstream`. The daemon serves both protocol eras on one endpoint, so
the relay passes each message through in the era the caller speaks:

- **2025-era** (``initialize``): the handshake is forwarded and opens a session on the daemon, whose
  ``Mcp-Session-Id`` (and negotiated version) every later message carries. The daemon's own questions
  (``elicitation/create`` while ``review_approval`` runs) arrive on the call's SSE stream and go to the
  caller; its answer, a JSON-RPC response on stdin, is POSTed back. When the session is lost (the daemon
  restarted, or expired it), the caller's ``initialize`` is replayed to open a new one. What the daemon
  sends outside any request (resource updates, log messages) comes on the session's GET stream, which
  :mod:`clients.relay.standalone` keeps open and relays.
- **2026-07-28** (every request carries its version in ``_meta``): each request is one stateless
  exchange, with the ``Mcp-Protocol-Version``/``Mcp-Method``/``Mcp-Name`` headers the HTTP transport
  asks for. A question comes back as an ``input_required`` result, which the caller answers by calling
  again. Closing a request's stream is how it is cancelled.

Each request runs in a thread of its own (progress and questions stream while other calls go on);
notifications and answers are sent in order from the reading thread. Each ``tools/call`` names the
client driving us in its ``_meta`` (``loom/driving-client``), so that what it decides is recorded as
decided by it. When the daemon is gone, slow, or stops mid-call, the call is answered with an error
result that says so (:mod:`clients.relay.answers`); the next call finds the daemon again through its
discovery file.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from clients.relay import answers
from clients.relay.upstream import Abort, Broken, Endpoint, Reply, TimedOut, Unreachable, Upstream
from clients.relay.wire import (
    CLIENT_INFO_META,
    Message,
    call_bound,
    cancelled,
    client_name,
    id_key,
    modern_headers,
    version_of,
    with_driving_client,
)
from orchestrator.daemon.auth import TokenError, load_token
from orchestrator.daemon.discovery import Discovery, read_discovery

if TYPE_CHECKING:
    from clients.relay.standalone import Standalone

logger = logging.getLogger("loom.mcp")

Session = tuple[Discovery, str | None, str | None]
"""A 2025-era session: the daemon it is on, its ``Mcp-Session-Id`` and the version negotiated."""

CONNECT_TIMEOUT_S = 10.0
CALL_MARGIN_S = 30.0
"""How much longer than the tool's own ``wait_s`` a forwarded call may take before it is cancelled."""
STOPPING_GRACE_S = 1.0
"""How long a stream cut without an answer may take to show itself as the daemon stopping."""
_INIT_ID = "loom-relay-initialize"


class Relay:
    """One attached ``loom mcp``: relays lines from ``stdin`` to the daemon and the daemon's messages to ``out``."""

    def __init__(
        self,
        home: Path,
        found: Discovery,
        upstream: Upstream,
        out: BinaryIO,
        *,
        call_margin_s: float = CALL_MARGIN_S,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
    ) -> None:
        self.home = home
        self._found = found
        self._upstream = upstream
        self._out = out
        self._out_lock = threading.Lock()
        self._call_margin_s = call_margin_s
        self._connect_timeout_s = connect_timeout_s
        self._lock = threading.Lock()
        """Guards the daemon's address and the 2025-era session below."""
        self._reopening = threading.Lock()
        self._initialize: Message | None = None
        """The caller's ``initialize``, replayed to open a new session on a daemon that lost ours."""
        self._session: Session | None = None
        """(daemon, ``Mcp-Session-Id``, negotiated version) of the 2025-era session, once open."""
        self._driving = ""
        self._tools: dict[bool, Message] = {}
        """The last ``tools/list`` result per era (modern or not), answered while the daemon is away."""
        self._in_flight: dict[str, tuple[Abort, bool]] = {}
        self._stopping = False
        """The daemon answered 503: it is shutting down."""
        self._standalone: Standalone | None = None
        """The 2025-era session's GET stream (:mod:`clients.relay.standalone`), once the session is open."""
        self._closed = False

    def serve(self, lines: Iterable[bytes]) -> None:
        """Relay every line until ``lines`` ends (the caller closed stdin); then close the session."""
        try:
            for line in lines:
                if line.strip():
                    self._handle(line)
        finally:
            self.close()

    def close(self) -> None:
        """Cut what is in flight and end the 2025-era session on the daemon (bounded, best effort)."""
        for abort, _ in list(self._in_flight.values()):
            abort()
        with self._lock:
            self._closed = True
            standalone, self._standalone = self._standalone, None
        if standalone is not None:
            standalone.stop()
        session = self._session
        if session is not None and session[1] is not None and session[0] == self._found:
            with contextlib.suppress(Exception):
                self._upstream.delete(self._session_headers(session), timeout_s=2.0)
        self._upstream.close()

    # -- from the caller ------------------------------------------------------------------------

    def _handle(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            self._write(answers.error(None, answers.PARSE_ERROR, "Loom: a line on stdin is not JSON"))
            return
        if not isinstance(message, dict):
            self._write(answers.error(None, answers.INVALID_REQUEST, "Loom: expected one JSON-RPC message a line"))
            return
        method = message.get("method")
        if not isinstance(method, str):
            self._send_aside(message)  # the caller's answer to one of the daemon's questions
        elif "id" not in message:
            self._notify(method, message)
        else:
            worker = threading.Thread(target=self._request, args=(message,), name=f"relay {method}", daemon=True)
            worker.start()

    def _notify(self, method: str, message: Message) -> None:
        if method == "notifications/cancelled":
            params = message.get("params")
            key = id_key(params.get("requestId")) if isinstance(params, dict) else None
            abort, modern = self._in_flight.pop(key, (None, False)) if key else (None, False)
            if abort is not None and modern:
                abort()  # over 2026-07-28 HTTP, closing the request's stream is its cancellation
                return
            if abort is not None:
                abort.aborted = True  # the daemon answers a cancelled request with nothing; neither do we
        if self._initialize is None:
            return  # no 2025-era session to send it into; the 2026-07-28 HTTP transport takes no notifications
        self._send_aside(message)

    def _send_aside(self, message: Message) -> None:
        """POST a notification or an answer of the caller's into its session; nothing comes back."""
        try:
            headers = self._headers(message)
            self._upstream.post(message, headers, lambda m: False, deadline=time.monotonic() + self._connect_timeout_s)
        except (Unreachable, Broken, TimedOut, _NotRunning) as exc:
            logger.info("could not pass %s on to the Loom daemon: %s", message.get("method", "an answer"), exc)

    # -- one request ----------------------------------------------------------------------------

    def _request(self, message: Message) -> None:
        method: str = message["method"]
        request_id = message["id"]
        modern = version_of(message) is not None
        params = message.get("params") if isinstance(message.get("params"), dict) else None
        name = str(params.get("name", method)) if params is not None and method == "tools/call" else method
        if method == "initialize":
            self._initialize = message
            self._driving = client_name(params.get("clientInfo") if params else None)
        if method == "tools/call":
            meta = (params or {}).get("_meta")
            info = meta.get(CLIENT_INFO_META) if modern and isinstance(meta, dict) else None
            message = with_driving_client(message, client_name(info) if modern else self._driving)
        bound = call_bound(message, self._call_margin_s)
        abort = Abort()
        key = id_key(request_id)
        self._in_flight[key] = (abort, modern)
        try:
            answered = self._forward(message, modern, bound, abort)
            if not answered and not abort.aborted:
                self._answer_failure(request_id, method, name, modern, self._why_unanswered(name))
        except TimedOut:  # the exchange's connection is closed already
            if not modern:  # the 2025 era cancels by notification; 2026-07-28 by the closed stream
                self._send_aside(cancelled(request_id, f"no answer within {bound:g} s"))
            self._answer_failure(request_id, method, name, modern, answers.timed_out(self._found.url, name, bound or 0))
        except _NotRunning as exc:
            self._answer_failure(request_id, method, name, modern, exc.text(name))
        except Unreachable:
            self._answer_failure(
                request_id, method, name, modern, answers.not_running(self.home, self._found.url, name)
            )
        except Broken as exc:
            if self._gone(wait_s=STOPPING_GRACE_S):
                why = answers.stopped_during(self.home, self._found.url, name)
            else:
                why = answers.failed(self._found.url, name, str(exc))
            self._answer_failure(request_id, method, name, modern, why)
        finally:
            if self._in_flight.get(key, (None,))[0] is abort:
                del self._in_flight[key]

    def _forward(self, message: Message, modern: bool, bound: float | None, abort: Abort) -> bool:
        """POST ``message``, relaying what comes back; whether it was answered.

        A 2025-era session the daemon no longer knows (404) is opened again and the request sent once more.
        """
        request_id = message["id"]
        deadline = None if bound is None else time.monotonic() + bound
        seen: list[Message] = []

        def deliver(reply: Message) -> bool:
            final = "method" not in reply and reply.get("id") == request_id
            if final:
                seen.append(reply)
                self._note(message, reply, modern)
            if not abort.aborted:
                self._write(reply)
            return final

        for attempt in (1, 2):
            headers = self._headers(message)
            reply = self._upstream.post(message, headers, deliver, deadline=deadline, abort=abort)
            if reply.status == 404 and not modern and message["method"] != "initialize" and attempt == 1:
                self._drop_session()
                continue
            if reply.status == 503:
                # The daemon is stopping: it answers 503 for what it had not started answering, in flight or not.
                self._stopping = True
                raise Broken("the daemon is shutting down")
            if reply.status in (401, 403):
                raise _NotRunning(
                    self.home, self._found.url, refused=answers.token_refused(self._found.url, reply.status)
                )
            if reply.status >= 500 and not seen and self._gone(wait_s=STOPPING_GRACE_S):
                raise Broken(f"HTTP {reply.status}")  # a server stopping fails what it has not answered
            if reply.status >= 300 and not seen:
                error = reply.error or {"code": answers.INTERNAL_ERROR, "message": f"HTTP {reply.status}"}
                self._write({"jsonrpc": "2.0", "id": request_id, "error": error})
                return True
            if message["method"] == "initialize" and reply.session_id:
                self._open_session(reply, seen)
            return bool(seen)
        return False

    def _note(self, message: Message, reply: Message, modern: bool) -> None:
        if message["method"] == "tools/list" and isinstance(reply.get("result"), dict):
            params = message.get("params")
            if not (isinstance(params, dict) and params.get("cursor")):
                self._tools[modern] = reply["result"]

    def _answer_failure(self, request_id: Any, method: str, name: str, modern: bool, text: str) -> None:
        abort = self._in_flight.get(id_key(request_id))
        if abort is None or abort[0].aborted:
            return  # the caller cancelled it: it expects no answer
        if method == "tools/call":
            self._write(answers.error_result(request_id, text, modern=modern))
        elif method == "tools/list" and modern in self._tools:
            self._write({"jsonrpc": "2.0", "id": request_id, "result": self._tools[modern]})
        else:
            self._write(answers.error(request_id, answers.INTERNAL_ERROR, text))

    def _why_unanswered(self, name: str) -> str:
        if self._gone(wait_s=STOPPING_GRACE_S):
            return answers.stopped_during(self.home, self._found.url, name)
        return answers.failed(self._found.url, name, "the daemon ended its reply without an answer")

    # -- the daemon and the session -------------------------------------------------------------

    def _headers(self, message: Message) -> dict[str, str]:
        """The routing headers for ``message``, after finding the daemon again (it may have moved)."""
        self._follow_daemon()
        version = version_of(message)
        if version is not None:
            return modern_headers(message, version)
        if message.get("method") == "initialize":
            return {}
        return self._session_headers(self._ensure_session())

    def _follow_daemon(self) -> None:
        found = read_discovery(self.home)
        if found is None:
            raise _NotRunning(self.home, self._found.url)
        with self._lock:
            if found == self._found:
                return
            try:
                token = load_token(self.home)
                endpoint = Endpoint.parse(found.url)
            except (TokenError, ValueError) as exc:
                raise _NotRunning(self.home, found.url, refused=str(exc)) from exc
            old, self._upstream = self._upstream, Upstream(endpoint, token, connect_timeout_s=self._connect_timeout_s)
            self._found, self._stopping = found, False
            old.close()
            logger.info("the Loom daemon is now at %s", found.url)

    def _ensure_session(self) -> Session:
        with self._reopening:  # calls that find the session lost together open one new one, not one each
            with self._lock:
                session = self._session
                if session is not None and session[0] == self._found:
                    return session
                initialize = self._initialize
            if initialize is None:
                return (self._found, None, None)  # no handshake yet: the daemon says what it thinks of that
            return self._reopen(initialize)

    def _reopen(self, initialize: Message) -> Session:
        """Replay the caller's handshake on a daemon that does not know our session; its answer is ours to keep."""
        replayed = {**initialize, "id": _INIT_ID}
        seen: list[Message] = []

        def deliver(reply: Message) -> bool:
            final = reply.get("id") == _INIT_ID and "method" not in reply
            if final:
                seen.append(reply)
            return final

        deadline = time.monotonic() + self._connect_timeout_s
        reply = self._upstream.post(replayed, {}, deliver, deadline=deadline)
        if reply.status == 503:
            self._stopping = True
        if not seen or not reply.session_id:
            raise _NotRunning(self.home, self._found.url)
        self._open_session(reply, seen)
        session = self._session
        assert session is not None
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        self._upstream.post(initialized, self._session_headers(session), lambda m: False, deadline=deadline)
        logger.info("opened a new session on the Loom daemon at %s", self._found.url)
        return session

    def _open_session(self, reply: Reply, seen: list[Message]) -> None:
        result = seen[0].get("result") if seen else None
        version = result.get("protocolVersion") if isinstance(result, dict) else None
        session = (self._found, reply.session_id, version if isinstance(version, str) else None)
        with self._lock:
            self._session = session
            old, self._standalone = self._standalone, None
        if old is not None:
            old.stop(wait_s=0)
        # Imported here, after the handshake's answer went out: what the relay loads before it must stay minimal.
        from clients.relay.standalone import Standalone

        stream = Standalone(self._upstream, self._session_headers(session), self._write)
        with self._lock:
            if self._closed or self._session != session:
                return  # stdin closed, or another session replaced this one meanwhile
            self._standalone = stream
        stream.start()

    def _drop_session(self) -> None:
        with self._lock:
            self._session = None

    @staticmethod
    def _session_headers(session: Session) -> dict[str, str]:
        _, session_id, version = session
        headers = {"Mcp-Session-Id": session_id} if session_id else {}
        if version:
            headers["Mcp-Protocol-Version"] = version
        return headers

    def _gone(self, wait_s: float = 0.0) -> bool:
        """Whether the daemon we talked to has stopped, is stopping, or was replaced (``wait_s`` to show it)."""
        deadline = time.monotonic() + wait_s
        while True:
            if self._stopping or read_discovery(self.home) != self._found or not _listening(self._found.url):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    # -- to the caller --------------------------------------------------------------------------

    def _write(self, message: Message) -> None:
        data = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
        with self._out_lock:
            try:
                self._out.write(data)
                self._out.flush()
            except (OSError, ValueError):
                pass  # the caller is gone; its closed stdin ends the relay


class _NotRunning(Exception):
    """No daemon to send to: none is published, it is stopping, or it refuses us."""

    def __init__(self, home: Path, url: str, *, refused: str | None = None) -> None:
        super().__init__(refused or f"no Loom daemon is running for {home}")
        self._home, self._url, self._refused = home, url, refused

    def text(self, name: str) -> str:
        if self._refused is not None:
            return answers.refused(self._refused, name)
        return answers.not_running(self._home, self._url, name)


def _listening(url: str) -> bool:
    try:
        port = Endpoint.parse(url).port
        with socket.create_connection(("127.0.0.1", port), timeout=2.0):
            return True
    except TimeoutError:
        return True  # slow, not gone: the call's own bound deals with a stuck daemon
    except (OSError, ValueError):
        return False
