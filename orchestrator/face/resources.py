"""What the face offers as MCP resources: sessions (their list, each one's state and transcript) and skills.

- ``loom://sessions``: the newest :data:`LISTED_SESSIONS` sessions that are not archived, as JSON (each as
  ``get_session`` answers it, with the URIs of its state and transcript).
- ``loom://sessions/{session_id}/state``: one session as ``get_session`` answers it (JSON).
- ``loom://sessions/{session_id}/transcript{?before_seq}``: a page of its events as markdown, newest first by default;
  the page names the URI of the one before it (:mod:`orchestrator.face.transcript`).
- ``loom://skills/{name}``: one of the user's skills (``$LOOM_HOME/skills``), its instructions as the model loads
  them.

State and transcript can be subscribed to (:mod:`orchestrator.face.subscriptions`). Everything is read when asked
for: nothing is kept or computed per session or per event.
"""

from __future__ import annotations

import json
from typing import Final
from urllib.parse import parse_qs, quote, unquote, urlsplit

import anyio.to_thread
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver.exceptions import ResourceNotFoundError
from mcp.types import Resource, ResourceTemplate

from orchestrator.context.skills import Skill, SkillError, find_skills, load_skill
from orchestrator.face.input import lone_surrogate
from orchestrator.face.transcript import PAGE_EVENTS, render_page, transcript_uri
from orchestrator.protocol import MAX_SEQ, SessionInfo
from orchestrator.runtime.host import HostError, SessionHost
from orchestrator.store.interface import SessionRecord

__all__ = [
    "LISTED_SESSIONS",
    "SCHEME",
    "SESSIONS_URI",
    "SKILL_TEMPLATE",
    "STATE_TEMPLATE",
    "TEMPLATES",
    "TRANSCRIPT_TEMPLATE",
    "SessionResources",
    "session_of",
    "skill_uri",
    "state_uri",
    "user_skills",
]

SCHEME: Final = "loom"
SESSIONS_URI: Final = "loom://sessions"
STATE_TEMPLATE: Final = "loom://sessions/{session_id}/state"
TRANSCRIPT_TEMPLATE: Final = "loom://sessions/{session_id}/transcript{?before_seq}"
SKILL_TEMPLATE: Final = "loom://skills/{name}"
LISTED_SESSIONS: Final = 20
"""Sessions listed in ``resources/list`` and ``loom://sessions`` (older ones are read by URI, or list_sessions)."""
JSON: Final = "application/json"
MARKDOWN: Final = "text/markdown"

TEMPLATES: Final = [
    ResourceTemplate(
        uri_template=STATE_TEMPLATE,
        name="session-state",
        title="A Loom session's state",
        description="The session as get_session answers it: status, model, mode, newest event seq, context use.",
        mime_type=JSON,
    ),
    ResourceTemplate(
        uri_template=TRANSCRIPT_TEMPLATE,
        name="session-transcript",
        title="A Loom session's transcript",
        description=(
            f"Its newest {PAGE_EVENTS} events as markdown; the page names the URI of the older page before it "
            "(before_seq). Subscribe to hear when new events arrive."
        ),
        mime_type=MARKDOWN,
    ),
    ResourceTemplate(
        uri_template=SKILL_TEMPLATE,
        name="skill",
        title="A Loom skill",
        description="One of the user's skills ($LOOM_HOME/skills): its instructions as the model loads them.",
        mime_type=MARKDOWN,
    ),
]


def state_uri(session_id: str) -> str:
    """The state resource of a session."""
    return f"loom://sessions/{quote(session_id, safe='')}/state"


def skill_uri(name: str) -> str:
    """The resource of a skill."""
    return f"loom://skills/{name}"


def session_of(uri: str) -> str | None:
    """The session a subscribable resource URI is about (its state or transcript, any page), else None."""
    parts = urlsplit(uri)
    if parts.scheme != SCHEME or parts.netloc != "sessions":
        return None
    session_id, slash, kind = parts.path.lstrip("/").partition("/")
    return unquote(session_id) if slash and session_id and kind in ("state", "transcript") else None


def user_skills(host: SessionHost) -> list[Skill]:
    """The user's skills (blocking: it reads ``$LOOM_HOME/skills``)."""
    home = host.runtime.home
    return find_skills(home, home)[0]


class SessionResources:
    """The face's ``loom://`` resources over ``host``: listed and read on demand."""

    def __init__(self, host: SessionHost) -> None:
        self.host = host

    async def listed(self) -> list[Resource]:
        """``loom://sessions``, the newest sessions' state and transcript, and the user's skills."""
        resources = [
            Resource(
                uri=SESSIONS_URI,
                name="sessions",
                title="Loom sessions",
                description=f"The newest {LISTED_SESSIONS} sessions that are not archived, as JSON",
                mime_type=JSON,
            )
        ]
        for info in await self._recent():
            label = info.title or info.cwd
            resources.append(
                Resource(
                    uri=transcript_uri(info.session_id),
                    name=f"{info.session_id} transcript",
                    description=f"Transcript of {label} ({info.status or info.state})",
                    mime_type=MARKDOWN,
                )
            )
            resources.append(
                Resource(
                    uri=state_uri(info.session_id),
                    name=f"{info.session_id} state",
                    description=f"State of {label}",
                    mime_type=JSON,
                )
            )
        for skill in await anyio.to_thread.run_sync(user_skills, self.host):
            resources.append(
                Resource(
                    uri=skill_uri(skill.name),
                    name=f"skill {skill.name}",
                    description=skill.description,
                    mime_type=MARKDOWN,
                )
            )
        return resources

    async def read(self, uri: str) -> list[ReadResourceContents]:
        """The contents of a ``loom://`` resource.

        Raises:
            ResourceNotFoundError: no such resource (unknown session or skill, bad page): the message says why.
        """
        problem = lone_surrogate(uri, "the URI")
        if problem is not None:
            raise ResourceNotFoundError(f"{problem} holds a lone surrogate, which is not text; send valid Unicode")
        parts = urlsplit(uri)
        path = parts.path.strip("/")
        if parts.netloc == "sessions" and not path:
            listing = {
                "sessions": [
                    {
                        **info.model_dump(mode="json"),
                        "state_uri": state_uri(info.session_id),
                        "transcript_uri": transcript_uri(info.session_id),
                    }
                    for info in await self._recent()
                ]
            }
            return [ReadResourceContents(json.dumps(listing, ensure_ascii=False), JSON)]
        if parts.netloc == "sessions":
            session_id, _, kind = path.partition("/")
            session_id = unquote(session_id)
            if kind == "state":
                info = await self._info(session_id)
                return [ReadResourceContents(info.model_dump_json(), JSON)]
            if kind == "transcript":
                return [ReadResourceContents(await self._transcript(session_id, parts.query), MARKDOWN)]
        if parts.netloc == "skills" and path:
            return [ReadResourceContents(await self._skill(unquote(path)), MARKDOWN)]
        raise ResourceNotFoundError(
            f"no Loom resource {uri!r}; resources/list and resources/templates/list show the loom:// ones"
        )

    async def _recent(self) -> list[SessionInfo]:
        records = (await self.host.list_sessions(False))[:LISTED_SESSIONS]
        return [_info(self.host, record) for record in records]

    async def _info(self, session_id: str) -> SessionInfo:
        try:
            record = await self.host.record(session_id)
        except HostError as exc:
            raise ResourceNotFoundError(str(exc)) from exc
        return _info(self.host, record)

    async def _transcript(self, session_id: str, query: str) -> str:
        before = _before_seq(query)
        await self._info(session_id)  # an unknown session fails here, with the host's advice
        store = self.host.runtime.log.store
        events = await store.read_events(session_id, before_seq=before or MAX_SEQ, limit=PAGE_EVENTS + 1)
        more = len(events) > PAGE_EVENTS
        return render_page(session_id, events[1:] if more else events, more_before=more)

    async def _skill(self, name: str) -> str:
        for skill in await anyio.to_thread.run_sync(user_skills, self.host):
            if skill.name == name:
                try:
                    return await anyio.to_thread.run_sync(load_skill, skill)
                except SkillError as exc:
                    raise ResourceNotFoundError(str(exc)) from exc
        raise ResourceNotFoundError(
            f"no skill {name!r} in {self.host.runtime.home / 'skills'}; resources/list names them"
        )


def _before_seq(query: str) -> int | None:
    values = parse_qs(query).get("before_seq")
    if not values:
        return None
    try:
        before = int(values[0])
    except ValueError:
        before = 0
    if not 1 <= before <= MAX_SEQ:
        raise ResourceNotFoundError(f"before_seq must be a whole number from 1 to {MAX_SEQ}, not {values[0]!r}")
    return before


def _info(host: SessionHost, record: SessionRecord) -> SessionInfo:
    from orchestrator.face.server import _session  # get_session's own rendering, one definition

    return _session(record, host.session_state(record), host.pending(session_id=record.id))
