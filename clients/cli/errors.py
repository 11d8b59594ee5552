"""Finding the error worth reporting inside the exception groups that task groups raise."""

from __future__ import annotations

from typing import TypeVar

E = TypeVar("E", bound=BaseException)


def first_of(exc: BaseException, kind: type[E]) -> E | None:
    """``exc`` if it is a ``kind``, else the first ``kind`` anywhere inside it (exception groups)."""
    if isinstance(exc, kind):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = first_of(inner, kind)
            if found is not None:
                return found
    return None
