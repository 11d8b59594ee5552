"""Completion of the face's prompt and resource-template arguments that have known values.

- ``session_id`` (the session templates, any skill prompt): the ids of the newest sessions, by prefix.
- ``name`` (``loom://skills/{name}``), and a skill prompt's name is its own: the user's skill names.
- ``model`` (``delegate_task``): the configured model, the profiles named in the configuration, the models recent
  sessions ran on, and ``PROVIDER:`` for each provider.
- ``mode`` (``delegate_task``): the policy modes.

Values are matched by prefix and at most :data:`MAX_VALUES` are sent (``total`` and ``hasMore`` say how many
matched). Everything is looked up when asked for.
"""

from __future__ import annotations

from typing import Final

import anyio.to_thread
from mcp.types import Completion, CompletionArgument, CompletionContext, PromptReference, ResourceTemplateReference

from orchestrator.face.prompts import DELEGATE
from orchestrator.face.resources import SKILL_TEMPLATE, STATE_TEMPLATE, TRANSCRIPT_TEMPLATE, user_skills
from orchestrator.models import PROVIDERS
from orchestrator.policy import MODES
from orchestrator.runtime.host import SessionHost

__all__ = ["MAX_VALUES", "FaceCompletions"]

MAX_VALUES: Final = 100
"""The spec's cap on the values of one completion."""
SESSIONS_SEARCHED: Final = 200
"""How many of the newest sessions session ids are completed from."""
_GLOB = frozenset("*?[")


class FaceCompletions:
    """The face's ``completion/complete`` answers over ``host``."""

    def __init__(self, host: SessionHost) -> None:
        self.host = host

    async def __call__(
        self,
        ref: PromptReference | ResourceTemplateReference,
        argument: CompletionArgument,
        context: CompletionContext | None,
    ) -> Completion | None:
        """Values for ``argument`` of the prompt or template ``ref``; None when it has no known values."""
        name, prefix = argument.name, argument.value
        if isinstance(ref, ResourceTemplateReference):
            if ref.uri in (STATE_TEMPLATE, TRANSCRIPT_TEMPLATE) and name == "session_id":
                return _matching(await self._session_ids(), prefix)
            if ref.uri == SKILL_TEMPLATE and name == "name":
                return _matching(await self._skill_names(), prefix)
            return None
        if ref.name == DELEGATE:
            if name == "mode":
                return _matching(list(MODES), prefix)
            if name == "model":
                return _matching(await self._models(), prefix)
            return None
        if name == "session_id":
            return _matching(await self._session_ids(), prefix)
        return None

    async def _session_ids(self) -> list[str]:
        return [record.id for record in (await self.host.list_sessions(False))[:SESSIONS_SEARCHED]]

    async def _skill_names(self) -> list[str]:
        return [skill.name for skill in await anyio.to_thread.run_sync(user_skills, self.host)]

    async def _models(self) -> list[str]:
        runtime = self.host.runtime
        found: dict[str, None] = {}
        for spec in [runtime.model or "", *(p for p in runtime.profiles if not _GLOB & set(p))]:
            if ":" in spec:
                found[spec] = None
        for record in (await self.host.list_sessions(True))[:SESSIONS_SEARCHED]:
            found.setdefault(record.model, None)
        for provider in PROVIDERS:
            found.setdefault(f"{provider}:", None)
        return list(found)


def _matching(values: list[str], prefix: str) -> Completion:
    matched = [value for value in values if value.startswith(prefix)]
    return Completion(values=matched[:MAX_VALUES], total=len(matched), has_more=len(matched) > MAX_VALUES)
