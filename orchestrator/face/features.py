"""The face as a full MCP server: resources, prompts, completions, logging and subscriptions beside its tools.

:class:`FaceServer` is the face's server class. It answers ``resources/*`` and ``prompts/*`` through the SDK's own
handlers (it overrides the methods they call, so the SDK still shapes each era's results and errors), declares
``completions`` and ``logging`` by serving them, and ``resources.subscribe`` by serving ``resources/subscribe`` on
handshake-era connections and ``subscriptions/listen`` (the SDK's, on the face's own bus) on 2026-07-28 ones.
What each offers: :mod:`.resources`, :mod:`.prompts`, :mod:`.completions`, :mod:`.logging_support`,
:mod:`.subscriptions`. Built once per face; per request it costs only what the request asks for.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable
from typing import Any

import anyio
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import Context
from mcp.server.subscriptions import InMemorySubscriptionBus
from mcp.types import (
    GetPromptResult,
    InputRequiredResult,
    Prompt,
    Resource,
    ResourceTemplate,
    SubscribeRequestParams,
    UnsubscribeRequestParams,
)
from pydantic import AnyUrl

from orchestrator.face import logging_support
from orchestrator.face.completions import FaceCompletions
from orchestrator.face.input import CheckedServer
from orchestrator.face.prompts import SkillPrompts
from orchestrator.face.resources import SCHEME, TEMPLATES, SessionResources
from orchestrator.face.subscriptions import WATCHES_KEY, ListenInterest, Watches, subscribe_handlers
from orchestrator.runtime.host import SessionHost

__all__ = ["FaceServer"]


class FaceServer(CheckedServer):
    """The face's MCP server over ``host``.

    The other arguments are `MCPServer`'s, but for ``lifespan``, ``subscriptions`` and ``middleware``, which this
    class provides.
    """

    def __init__(self, host: SessionHost, name: str, **kwargs: Any) -> None:
        self.loom_host = host
        self.bus = InMemorySubscriptionBus()
        """Where resource updates go to 2026-07-28 listen streams."""
        self.loom_resources = SessionResources(host)
        self.loom_prompts = SkillPrompts(host)
        super().__init__(
            name,
            lifespan=self._lifespan,
            subscriptions=self.bus,
            middleware=[logging_support.FaceLog(name), ListenInterest(host)],
            **kwargs,
        )
        logging_support.install(self)
        self.completion()(FaceCompletions(host))  # type: ignore[no-untyped-call]  # untyped in SDK 2.3
        subscribe, unsubscribe = subscribe_handlers(host)
        # MCPServer has no public way to serve resources/subscribe (SDK 2.3); the low-level server does.
        lowlevel = self._lowlevel_server
        lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, subscribe)
        lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, unsubscribe)

    @contextlib.asynccontextmanager
    async def _lifespan(self, _server: Any) -> AsyncIterator[dict[str, Any]]:
        # The task group the subscribed sessions' watchers run in; none runs until a client subscribes.
        async with anyio.create_task_group() as tg:
            yield {WATCHES_KEY: Watches(self.loom_host.runtime.log, self.bus, tg)}
            tg.cancel_scope.cancel()

    async def list_resources(self) -> list[Resource]:
        """The SDK's registered resources, then Loom's sessions and skills."""
        return [*await super().list_resources(), *await self.loom_resources.listed()]

    async def list_resource_templates(self) -> list[ResourceTemplate]:
        """The SDK's registered templates, then Loom's."""
        return [*await super().list_resource_templates(), *TEMPLATES]

    async def read_resource(
        self, uri: AnyUrl | str, context: Context[Any, Any] | None = None
    ) -> Iterable[ReadResourceContents] | InputRequiredResult:
        """A ``loom://`` resource, or one registered with the SDK."""
        if str(uri).startswith(f"{SCHEME}://"):
            return await self.loom_resources.read(str(uri))
        return await super().read_resource(uri, context)

    async def list_prompts(self) -> list[Prompt]:
        """The SDK's registered prompts, then Loom's."""
        return [*await super().list_prompts(), *await self.loom_prompts.listed()]

    async def get_prompt(
        self, name: str, arguments: dict[str, Any] | None = None, context: Context[Any, Any] | None = None
    ) -> GetPromptResult | InputRequiredResult:
        """One of Loom's prompts with its arguments filled, or one registered with the SDK."""
        if self._prompt_manager.get_prompt(name) is not None:
            return await super().get_prompt(name, arguments, context)
        return await self.loom_prompts.get(name, arguments)
