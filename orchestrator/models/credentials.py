"""Whether a model has the credentials its calls need, asked before a run starts.

A provider that can tell (Anthropic from its SDK's credential sources, an OpenAI-compatible endpoint from
its key and URL) has a ``credentials_problem()`` method; the scripted models need nothing. Callers refuse
the run with the problem's text, which names the variable to set, instead of recording a run that fails at
its first model call.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["missing_credentials"]


@runtime_checkable
class _ChecksCredentials(Protocol):
    def credentials_problem(self) -> str | None: ...


def missing_credentials(model: object) -> str | None:
    """What ``model`` lacks to make a call (the message names the variable to set), or None.

    Args:
        model: any :class:`~orchestrator.models.base.Model`.
    """
    return model.credentials_problem() if isinstance(model, _ChecksCredentials) else None
