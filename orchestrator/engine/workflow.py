"""A run as a DBOS workflow: ``loom_run``, taken from the durable queue ``loom-runs`` by any worker.

The face enqueues it (workflow id = the run id, partition = the session, so one session's runs go one at a time
across every worker); a worker (:mod:`orchestrator.engine.worker`) executes it, and after a worker's death another
one executes it again: the same function, given the recorded result of every step already done. What it runs is
the session's ordinary ``Session.run`` with :class:`~orchestrator.engine.dbos_steps.DBOSSteps` as its steps and
the journal on (:mod:`orchestrator.engine.journal`): one agent loop on both engines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from dbos import DBOS, DBOSConfig, DBOSPortableJSONSerializer

from orchestrator.engine.version import LOOP_VERSION

if TYPE_CHECKING:
    from orchestrator.engine.settings import EngineSettings

WORKFLOW = "loom_run"
QUEUE = "loom-runs"
APP = "loom"
QUEUE_POLL_S = 0.1
"""How often an idle worker looks for a queued run (the time a new run waits before its first step, at most)."""
MAX_RECOVERIES = 50
"""A run whose worker died this many times goes to DBOS's dead-letter state instead of killing a 51st worker."""


class Executor(Protocol):
    """What a worker process offers the workflow (set by :func:`serve_runs`)."""

    async def execute(self, run_id: str, session_id: str, text: str, max_steps: int) -> dict[str, Any]:
        """Run (or, after a worker's death, replay and go on with) one run; its end as a small JSON object."""
        ...


_EXECUTOR: Executor | None = None


def serve_runs(executor: Executor | None) -> None:
    """Make ``executor`` the one this process's ``loom_run`` workflows execute on (None: stop)."""
    global _EXECUTOR
    _EXECUTOR = executor


@DBOS.workflow(name=WORKFLOW, max_recovery_attempts=MAX_RECOVERIES)
async def loom_run(run_id: str, session_id: str, text: str, max_steps: int) -> dict[str, Any]:
    """One run of one session (the workflow DBOS records, replays and hands between workers)."""
    if _EXECUTOR is None:
        raise RuntimeError("this process takes no Loom runs: start one with `loom worker`")
    return await _EXECUTOR.execute(run_id, session_id, text, max_steps)


def dbos_config(settings: EngineSettings, *, executor_id: str | None) -> DBOSConfig:
    """DBOS's configuration for a worker (``executor_id``) or for the face (None: it only enqueues and sends)."""
    config: DBOSConfig = {
        "name": APP,
        "system_database_url": settings.database,
        "application_version": LOOP_VERSION,
        "log_level": "WARNING",
        # Portable JSON, not pickle: nothing a worker reads back from the shared database is unpickled.
        "serializer": DBOSPortableJSONSerializer(),
    }
    if executor_id is not None:
        config["executor_id"] = executor_id
    return config
