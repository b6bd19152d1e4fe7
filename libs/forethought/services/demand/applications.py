"""The applications the demand service knows: each PDGraph with its estimator, read from the store on
first use (so a restarted service, or a second replica, serves what was registered before) and kept
in memory after. One lock per application orders its estimates and the runs it learns from."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field

import yaml

from forethought.demand import DemandEstimator, LlmSeconds, PDGraph, application_from_dict, require_application_name
from forethought.domain import InvalidField, require
from forethought.rpc.errors import NotFound
from forethought.services.demand.store import ProfileStore


@dataclass
class Application:
    """A registered application: its graph, the estimator over it, and the lock its updates take."""

    graph: PDGraph
    estimator: DemandEstimator
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def recorded(self) -> int:
        return sum(len(profile.observations) for profile in self.graph.profiles.values())


def parse_application_file(content: str) -> Mapping[str, object]:
    """An application file's content, JSON or YAML, as the dict ``application_from_dict`` reads."""
    require(bool(content.strip()), "application_file", "is required: the content of an application file (YAML or JSON)")
    try:
        data = json.loads(content) if content.lstrip().startswith("{") else yaml.safe_load(content)
    except (json.JSONDecodeError, yaml.YAMLError) as error:
        raise InvalidField("application_file", f"is neither valid JSON nor YAML: {error}") from error
    if not isinstance(data, Mapping):
        raise InvalidField("application_file", "must hold a mapping with name and units")
    return data


class Applications:
    """Registered applications by name, backed by the profile store."""

    def __init__(self, store: ProfileStore, llm_seconds: LlmSeconds, walks: int, refine: bool) -> None:
        self._store = store
        self._llm_seconds = llm_seconds
        self._walks = walks
        self._refine = refine
        self._known: dict[str, Application] = {}
        self._loading = asyncio.Lock()

    async def register(self, name: str, content: str, keep_existing: bool) -> tuple[Application, bool]:
        """Builds the application from a file's content and stores it; ``(application, kept)``.

        Raises:
            InvalidField: the name or the file breaks a rule (``application``, ``application_file.<field>``).
        """
        data = parse_application_file(content)
        file_name = data.get("name")
        if name:
            require_application_name(name, "application")
            data = {**data, "name": name}
        else:
            require(isinstance(file_name, str), "application_file.name", "is required when application is empty")
            require_application_name(str(file_name), "application_file.name")
        existing = await self._find(str(data["name"]))
        if keep_existing and existing is not None:
            return existing, True
        graph = await asyncio.to_thread(_build_graph, data)
        application = Application(graph, self._estimator(graph))
        # NOTE: a run the replaced graph is learning from finishes first, so its save cannot undo this one
        async with existing.lock if existing is not None else contextlib.nullcontext():
            await self._store.save(graph)
            self._known[graph.name] = application
        return application, False

    async def get(self, name: str) -> Application:
        """The application called ``name``; NotFound when it was never registered."""
        require(bool(name), "application", "is required")
        application = await self._find(name)
        if application is None:
            raise NotFound(f"application: '{name}' is not registered")
        return application

    @contextlib.asynccontextmanager
    async def locked(self, name: str) -> AsyncIterator[Application]:
        """The application called ``name`` with its lock held; one replaced meanwhile is looked up again."""
        while True:
            application = await self.get(name)
            async with application.lock:
                if self._known.get(name) is application:
                    yield application
                    return

    async def _find(self, name: str) -> Application | None:
        if name in self._known:
            return self._known[name]
        async with self._loading:
            if name not in self._known:
                graph = await self._store.load(name)
                if graph is None:
                    return None
                self._known[name] = Application(graph, self._estimator(graph))
        return self._known[name]

    def _estimator(self, graph: PDGraph) -> DemandEstimator:
        return DemandEstimator(graph, self._llm_seconds, walks=self._walks, refine=self._refine)


def _build_graph(data: Mapping[str, object]) -> PDGraph:
    """The graph and its profiling runs; an InvalidField names the file's field under ``application_file``."""
    try:
        return application_from_dict(data)
    except InvalidField as error:
        raise InvalidField(f"application_file.{error.field}", error.rule) from error
