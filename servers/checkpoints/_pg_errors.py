"""What the Postgres store's failures say: the server's error with the URL's password masked, and what to do.

A database URL may carry a password (``postgresql://user:secret@host/db``). It never reaches a message, a log line
or a tool result: the URL is shown as ``postgresql://user:***@host/db``, and libpq's own messages, which may quote
the connection string they could not parse, have the password cut out of them too.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

__all__ = ["POSTGRES_SCHEMES", "describe_pg", "is_postgres_url", "mask_url", "scrub"]

POSTGRES_SCHEMES = ("postgresql://", "postgres://")

_PASSWORD_IN_QUERY = re.compile(r"(password=)([^&\s]*)", re.IGNORECASE)

_SHORTEST_MASKED = 3

_ADVICE_BY_STATE = {
    "25006": "the store is opened read-only",
    "53100": "the Postgres server's disk is full; free some space there and try again",
    "53200": "the Postgres server is out of memory; try again later",
    "53300": "the Postgres server has too many connections; raise max_connections or stop some clients",
    "28P01": "the user name or password is wrong; fix them in the URL",
    "28000": "the server refused this user; check pg_hba.conf on the server or the user name in the URL",
    "3D000": "that database does not exist; create it (createdb NAME) or fix the URL",
    "42501": "the user lacks a privilege there (Loom needs CREATE on the database for its 'loom' schema); "
    "grant it or use another user",
    "40P01": "two writers deadlocked; try again",
    "57014": "the statement took too long and was cancelled; try again",
    "57P01": "the Postgres server is shutting down; start it again and retry",
}


def is_postgres_url(location: object) -> bool:
    """Whether ``location`` names a Postgres database (a ``postgresql://`` or ``postgres://`` URL string)."""
    return isinstance(location, str) and location.lower().startswith(POSTGRES_SCHEMES)


def _userinfo(url: str) -> tuple[int, int] | None:
    """Where the password of ``url``'s ``user:password@`` part begins and ends, if it has one.

    By hand rather than with `urllib.parse`: a password with an unescaped ``@`` or ``/`` (which libpq accepts)
    must still be found whole. The authority ends at the last ``@`` before the query.
    """
    scheme_end = url.find("://")
    if scheme_end < 0:
        return None
    start = scheme_end + 3
    query = url.find("?", start)
    at = url.rfind("@", start, query if query >= 0 else len(url))
    colon = url.find(":", start, at) if at >= 0 else -1
    return (colon + 1, at) if colon >= 0 else None


def mask_url(url: str) -> str:
    """``url`` with its password (in the authority or a ``password=`` parameter) shown as ``***``."""
    span = _userinfo(url)
    masked = url if span is None else url[: span[0]] + "***" + url[span[1] :]
    return _PASSWORD_IN_QUERY.sub(r"\1***", masked)


def scrub(text: str, url: str) -> str:
    """``text`` with every appearance of ``url``'s password (raw or percent-decoded) replaced by ``***``."""
    text = text.replace(url, mask_url(url))
    span = _userinfo(url)
    found = [url[span[0] : span[1]]] if span is not None and span[1] > span[0] else []
    found += [match.group(2) for match in _PASSWORD_IN_QUERY.finditer(url)]
    for form in {f for raw in found for f in (raw, unquote(raw))}:
        # A password of a character or two would blank out letters all over the message, and says little.
        if len(form) >= _SHORTEST_MASKED:
            text = text.replace(form, "***")
    return text


_ADVICE_BY_TEXT = (
    # libpq's failures to connect carry no SQLSTATE: what the server or libpq said is all there is.
    (re.compile(r"database \"[^\"]*\" does not exist"), "3D000"),
    (re.compile(r"password authentication failed|no password supplied"), "28P01"),
    (re.compile(r"role \"[^\"]*\" does not exist|no pg_hba\.conf entry"), "28000"),
    (re.compile(r"too many clients"), "53300"),
    (re.compile(r"the database system is (shutting down|starting up)"), "57P01"),
)
_BAD_URL = re.compile(r"invalid (integer value|URI|connection option|sslmode)|missing \"=\"|invalid percent-encoded")


def _advice(exc: BaseException) -> str:
    import psycopg  # only once a Postgres store failed: a SQLite store's process never loads it

    state = getattr(exc, "sqlstate", None) or ""
    text = str(exc)
    for pattern, known in _ADVICE_BY_TEXT:
        if not state and pattern.search(text):
            state = known
    if state in _ADVICE_BY_STATE:
        return _ADVICE_BY_STATE[state]
    if _BAD_URL.search(text):
        return "the URL is not a valid Postgres connection URL; write it as postgresql://USER@HOST:PORT/DATABASE"
    if state.startswith("08") or (isinstance(exc, psycopg.OperationalError) and not state):
        return "is Postgres running and reachable there? Start it, or fix the host and port in the URL"
    if isinstance(exc, psycopg.ProgrammingError) and not state:
        return "the URL is not a valid Postgres connection URL; write it as postgresql://USER@HOST:PORT/DATABASE"
    return ""


def describe_pg(action: str, url: str, exc: BaseException) -> str:
    """``"{action} the Loom database at {masked url}: {error} ({advice})"``, never showing the password."""
    detail = str(exc).strip().replace("\n", " ") or type(exc).__name__
    message = f"{action} the Loom database at {mask_url(url)}: {detail}"
    advice = _advice(exc)
    return scrub(f"{message} ({advice})" if advice else message, url)
