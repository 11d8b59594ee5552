"""The one place Loom touches a private name of DBOS: recovering a dead executor's workflows from another executor.

DBOS recovers an executor's own pending workflows when that executor launches again, and hands a dead machine's
workflows to a live one only through DBOS Conductor. Loom's pool (:mod:`orchestrator.engine.pool`) notices a dead
worker by its heartbeat and asks a live worker to take its runs over; that needs ``DBOS._recover_pending_workflows``
(DBOS 3.4), a classmethod outside DBOS's public API. It re-enqueues each ``PENDING`` workflow of the given executors
on its own queue (or DBOS's internal one), where any live executor of the same application version dequeues it;
the dequeue is atomic, so a second recovery of the same executors re-runs nothing. Only workflows of this
process's application version are recovered: a run started by another loop version is left alone.

Everything that depends on that private behaviour is here, and ``tests/orchestrator/engine/test_dbos_private.py``
pins it against a real Postgres: if a DBOS upgrade renames or changes it, that test fails rather than the pool
silently recovering nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from dbos import DBOS
from dbos._error import DBOSWorkflowCancelledError, DBOSWorkflowConflictIDError

WorkflowCancelled = DBOSWorkflowCancelledError
"""What a cancelled workflow's code sees (DBOS exports it from a private module only; a rename fails this import)."""
WorkflowConflict = DBOSWorkflowConflictIDError
"""What a workflow's code sees when it records a step it no longer owns: DBOS 3.4 raises it, not the cancel error,
from a ``recv`` woken after the workflow was cancelled (its owner is cleared). The worker asks DBOS which it was."""

__all__ = ["DBOSPrivateAPIChanged", "WorkflowCancelled", "WorkflowConflict", "recover_executors", "stop_dequeuing"]


class DBOSPrivateAPIChanged(RuntimeError):
    """The installed DBOS no longer has the private recovery call Loom relies on (see this module's docstring)."""


def _recover_call() -> Callable[[list[str]], list[Any]]:
    recover = getattr(DBOS, "_recover_pending_workflows", None)
    if not callable(recover):
        raise DBOSPrivateAPIChanged(
            "this DBOS has no DBOS._recover_pending_workflows: Loom's cross-machine recovery was written for "
            "DBOS 3.4; pin dbos to a version it was tested with or update orchestrator/engine/dbos_private.py"
        )
    call: Callable[[list[str]], list[Any]] = recover
    return call


def recover_executors(executor_ids: Sequence[str]) -> list[str]:
    """Make every pending workflow of ``executor_ids`` (of this process's application version) runnable again.

    DBOS must be launched in this process. The call blocks on the system database: run it in a thread
    (``await anyio.to_thread.run_sync(recover_executors, ids)``), never on the event loop.

    Returns:
        The ids of the workflows found pending, each re-enqueued unless a concurrent recovery got to it first (the
        re-enqueue matches only a ``PENDING`` row still under one of ``executor_ids``, so nothing runs twice).

    Raises:
        DBOSPrivateAPIChanged: the installed DBOS lacks the private call, or it returned something unexpected.
    """
    ids = [str(e) for e in executor_ids]
    if not ids:
        return []
    handles = _recover_call()(ids)
    recovered: list[str] = []
    for handle in handles:
        get_id = getattr(handle, "get_workflow_id", None)
        if not callable(get_id):
            raise DBOSPrivateAPIChanged(
                f"DBOS._recover_pending_workflows returned {type(handle).__name__}, not workflow handles; "
                "update orchestrator/engine/dbos_private.py for this DBOS version"
            )
        recovered.append(str(get_id()))
    return recovered


def stop_dequeuing() -> None:
    """Stop this process's DBOS from taking more workflows off its queues, leaving the running ones to run.

    A worker that stops must know which runs it holds before it goes, and none may arrive after it counted them.
    DBOS stops dequeuing only inside ``DBOS.destroy``, which also takes the system database away from the workflows
    still running. This sets the stop events of DBOS's background threads (the queue threads among them) and
    nothing else; pinned by ``tests/orchestrator/engine/test_dbos_private.py``.

    Raises:
        DBOSPrivateAPIChanged: DBOS no longer keeps its threads' stop events where this looks.
    """
    from dbos import _dbos

    instance = getattr(_dbos, "_dbos_global_instance", None)
    events = getattr(instance, "background_thread_stop_events", None)
    if instance is None or not isinstance(events, list):
        raise DBOSPrivateAPIChanged(
            "this DBOS keeps no background_thread_stop_events on its instance: Loom's worker stop was written for "
            "DBOS 3.4; pin dbos to a version it was tested with or update orchestrator/engine/dbos_private.py"
        )
    for event in events:
        event.set()
