"""The engine's error, importable without DBOS (the host catches it whether or not the engine is in use)."""


class EngineError(Exception):
    """The engine refused a request; the message says why and what to do."""
