"""Approvals of a run on the DBOS engine: durable waits that outlive the worker waiting.

The run's workflow records the request (a journal step), then waits for a DBOS message on the approval's topic
(``DBOS.recv``, itself recorded): a worker that dies meanwhile leaves the wait to the worker that takes the run over,
and a decision sent before then is still there when it asks. The face sends the decision
(:func:`orchestrator.engine.face.answer`) from whichever machine the person answered on; the worker records it as the
run's ``approval_decided``. Approval ids are derived from the run, the call and how many times that call was asked
about in this execution, so a replay asks for the same approval the first execution did.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from dbos import DBOS

from orchestrator.events import ApprovalKind
from orchestrator.loop.approvals import Decision, PendingApproval

logger = logging.getLogger(__name__)

WAIT_S = 600.0
"""One durable wait's bound; the wait is asked again until a decision comes (each round is a recorded step)."""
DECISIONS: tuple[Decision, ...] = ("approve_once", "approve_session", "deny")


def decision_message(decision: str, reason: str, decided_by: str) -> dict[str, str]:
    """The message the face sends to a run's workflow (topic: the approval id)."""
    return {"decision": decision, "reason": reason[:2000], "decided_by": decided_by[:200]}


class DurableWaiter:
    """:class:`~orchestrator.loop.approvals.ApprovalWaiter` for one execution of one run's workflow."""

    def __init__(self) -> None:
        self._asked: dict[tuple[str, str, str], int] = {}

    def approval_id(self, run_id: str, call_id: str, kind: ApprovalKind) -> str:
        """Derived, not random: a replay must record the request it recorded the first time."""
        key = (run_id, call_id, kind)
        self._asked[key] = n = self._asked.get(key, 0) + 1
        return "ap_" + hashlib.sha256(f"{run_id}:{call_id}:{kind}:{n}".encode()).hexdigest()[:12]

    async def wait(self, pending: PendingApproval) -> tuple[Decision, str, str]:
        """Wait, round after bounded round, for the first well-formed decision on ``pending``."""
        while True:
            message: Any = await DBOS.recv_async(topic=pending.approval_id, timeout_seconds=WAIT_S)
            if message is None:
                continue  # no decision yet: the approval stays pending, and the next round is recorded too
            decision = message.get("decision") if isinstance(message, dict) else None
            if isinstance(message, dict) and "cancelled" in message:
                continue  # the face's wake-up after a cancel: the next round finds the workflow cancelled
            if decision not in DECISIONS:
                logger.warning("approval %s: ignoring a malformed decision message", pending.approval_id)
                continue
            reason, by = message.get("reason", ""), message.get("decided_by", "")
            return decision, str(reason), str(by) or "a client"
