"""Approvals: a tool call that policy says to ask about waits on the event log for a decision.

An approval is a request on the event log (``approval_requested``) that any attached client may
answer; the first decision wins (``approval_decided``, with who made it) and later ones are told it
was taken. Waiting holds no timeout: a person may take as long as they need, and the tool's own
timeout starts only once the call is allowed. ``approve_session`` is remembered for the session.

Policy comes from :mod:`orchestrator.policy`: the session's mode, the tool's MCP annotations and the
user's and project's rules. A *headless* session has nobody to ask, so what policy would ask about is
denied at once, with a message that tells the model why and the user how to allow it: a headless run
never hangs and never silently allows.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import anyio

from orchestrator.events import ApprovalDecided, ApprovalKind, ApprovalRequested, Event
from orchestrator.hub.pool import HubTool
from orchestrator.policy import MODES as POLICY_MODES
from orchestrator.policy.engine import Mode as PolicyMode
from orchestrator.policy.narrowing import Bounds
from orchestrator.policy.protected import Protected
from orchestrator.policy.rules import Rule
from orchestrator.policy.server_reads import read_of
from orchestrator.store.eventlog import EventLog

Mode = Literal["ask", "accept-edits", "plan", "bypass"]
MODES: tuple[Mode, ...] = ("ask", "accept-edits", "plan", "bypass")
Decision = Literal["approve_once", "approve_session", "deny"]
Verdict = Literal["allow", "ask", "deny"]


class ApprovalError(Exception):
    """An approval cannot be decided (unknown id, already decided); the message says which."""


def headless_denial(tool: str, why: str, *, own_config: bool = False) -> str:
    """What the model is told when a headless run refuses a call that would need approval."""
    how = (
        "change the file yourself, or run with --mode bypass"
        if own_config  # no allow rule admits such a change, so suggesting one would send the user astray
        else "allow it with a rule in $LOOM_HOME/policy.toml (or the project's .loom/policy.toml, after `loom trust`) "
        "or choose another --mode"
    )
    return (
        f"denied by policy: {why}. This run is headless, so nobody can approve the call: do without {tool} "
        f"or tell the user. (User: {how}; see docs/permissions.md.)"
    )


def session_key(tool: str, arguments: Mapping[str, Any]) -> str:
    """What "approve for the session" approves: the tool, or for a read of another server, the tool on that server.

    ``mcp_access__read_resource`` approved for the session while reading ``docs`` must not let it read ``vault``,
    whose own ask rule made the approval necessary in the first place.
    """
    read = read_of(tool, arguments)
    return f"{tool}@{read.server}" if read is not None and read.server else tool


def approved_for_session(events: Iterable[Event]) -> set[str]:
    """The tools approved "for the session" in a session's stored events: remembered across restarts."""
    asked: dict[str, str] = {}
    approved: set[str] = set()
    for event in events:
        if isinstance(event, ApprovalRequested) and not event.child_session_id:  # a child's copy is the child's
            asked[event.approval_id] = session_key(event.tool, event.arguments)
        elif isinstance(event, ApprovalDecided) and event.decision == "approve_session" and event.approval_id in asked:
            approved.add(asked[event.approval_id])
    return approved


@dataclass
class PendingApproval:
    """One approval request and, once decided, its decision."""

    approval_id: str
    session_id: str
    run_id: str
    call_id: str
    tool: str
    arguments: dict[str, Any]
    reason: str
    kind: ApprovalKind = "policy"
    """``review`` for a call a resumed run found unfinished: approve re-runs it, deny skips it."""
    decision: Decision | None = None
    decision_reason: str = ""
    decided_by: str = ""
    done: anyio.Event = field(default_factory=anyio.Event)


class ApprovalWaiter(Protocol):
    """Where a run waits for its approvals when a durable engine, not this process, carries the wait.

    The embedded default (no waiter) waits on an in-memory event that :meth:`Approvals.decide` sets. The DBOS
    engine's waiter (:mod:`orchestrator.engine.waits`) receives the decision as a durable message, so that a run
    whose worker died waits on in another worker, and names approvals so that a replay asks for the same one.
    """

    def approval_id(self, run_id: str, call_id: str, kind: ApprovalKind) -> str:
        """The id of a new approval request (the same on every replay of the run)."""
        ...

    async def wait(self, pending: PendingApproval) -> tuple[Decision, str, str]:
        """Wait for the first decision on ``pending``: ``(decision, reason, decided_by)``."""
        ...


class Approvals:
    """The approvals of one session, and the bounds its calls are decided by.

    ``bounds`` is the session's level of a :class:`~orchestrator.policy.narrowing.Bounds` chain: for a top-level
    session, its mode, rules, working directory and protected paths; for a child, also every level above it, so
    that no call of a child is decided more freely than its parent would decide it.
    """

    def __init__(self, session_id: str, log: EventLog, bounds: Bounds) -> None:
        self.session_id = session_id
        self.log = log
        self.bounds = bounds
        self.allowed_tools: set[str] = set()
        """Tools approved for the rest of the session."""
        self.pending: dict[str, PendingApproval] = {}
        self.waiter: ApprovalWaiter | None = None
        """Set by a durable engine for the runs it carries (None: decisions come through :meth:`decide`)."""

    @classmethod
    def top_level(
        cls,
        session_id: str,
        log: EventLog,
        mode: str,
        *,
        rules: Sequence[Rule] = (),
        cwd: str = ".",
        headless: bool = False,
        protected: Protected | None = None,
    ) -> Approvals:
        """The approvals of a session with no parent (a mode the engine does not know is treated as ``ask``)."""
        policy_mode: PolicyMode = mode if mode in POLICY_MODES else "ask"
        bounds = Bounds(
            label="the session", mode=policy_mode, rules=tuple(rules), cwd=cwd, protected=protected, headless=headless
        )
        return cls(session_id, log, bounds)

    @property
    def mode(self) -> str:
        """This session's own mode (its parent's may be stricter; :attr:`Bounds.effective_mode` says)."""
        return self.bounds.mode

    @mode.setter
    def mode(self, mode: str) -> None:
        """Switch mode; a child is refused a mode freer than its parent's (NarrowingError)."""
        if mode not in POLICY_MODES:
            raise ValueError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
        self.bounds = self.bounds.with_mode(mode)

    @property
    def headless(self) -> bool:
        """Whether nobody answers approvals (this session's setting or an ancestor's): asks become denials."""
        return self.bounds.deny_asks

    def verdict(self, tool: HubTool, arguments: Mapping[str, Any] | None = None) -> tuple[Verdict, str]:
        """Policy for this call, remembering ``approve_session`` decisions (which never override a deny)."""
        decision = self.bounds.decide(tool.name, tool.annotations, arguments or {})
        decided, own_config = decision.verdict, decision.protected
        why = "" if decided == "allow" else decision.reason
        # "Approve for the session" approved the tool, not every file: a change to Loom's own config asks each time.
        if decided == "ask" and session_key(tool.name, arguments or {}) in self.allowed_tools and not own_config:
            return "allow", ""
        if decided == "ask" and self.headless:
            return "deny", headless_denial(tool.name, why, own_config=own_config)
        return decided, why

    async def ask(
        self,
        run_id: str,
        call_id: str,
        tool: str,
        arguments: dict[str, Any],
        reason: str,
        kind: ApprovalKind = "policy",
    ) -> tuple[bool, str]:
        """Record a request and wait, without a timeout, for the first decision.

        Returns:
            ``(allowed, message)``; the message is what the model is told when it is denied.
        """
        waiter = self.waiter
        approval_id = waiter.approval_id(run_id, call_id, kind) if waiter else f"ap_{uuid.uuid4().hex[:12]}"
        pending = PendingApproval(approval_id, self.session_id, run_id, call_id, tool, arguments, reason, kind)
        self.pending[approval_id] = pending
        try:
            await self.log.append(
                ApprovalRequested(
                    session_id=self.session_id,
                    run_id=run_id,
                    approval_id=approval_id,
                    call_id=call_id,
                    tool=tool,
                    arguments=arguments,
                    reason=reason,
                    kind=kind,
                )
            )
            if waiter is None:
                await pending.done.wait()
            else:
                await self._record(pending, *await waiter.wait(pending))
        finally:
            self.pending.pop(approval_id, None)
        if pending.decision == "deny":
            why = f": {pending.decision_reason}" if pending.decision_reason else ""
            return False, f"denied by {pending.decided_by}{why}"
        return True, ""

    async def decide(self, approval_id: str, decision: Decision, reason: str, decided_by: str) -> PendingApproval:
        """Answer a pending approval; the first answer wins.

        Raises:
            ApprovalError: no such pending approval (unknown, or already decided by someone else).
        """
        pending = self.pending.get(approval_id)
        if pending is None or pending.decision is not None:
            raise ApprovalError(f"approval {approval_id!r} is not pending (unknown, or already decided)")
        await self._record(pending, decision, reason, decided_by)
        pending.done.set()
        return pending

    async def _record(self, pending: PendingApproval, decision: Decision, reason: str, decided_by: str) -> None:
        """Take the first decision on ``pending``: remember an approval for the session, and store it."""
        pending.decision, pending.decision_reason, pending.decided_by = decision, reason, decided_by
        if decision == "approve_session":
            self.allowed_tools.add(session_key(pending.tool, pending.arguments))
        await self.log.append(
            ApprovalDecided(
                session_id=self.session_id,
                run_id=pending.run_id,
                approval_id=pending.approval_id,
                decision=decision,
                reason=reason,
                decided_by=decided_by,
            )
        )
