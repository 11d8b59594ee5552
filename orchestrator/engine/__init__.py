"""Engines a run executes on: the embedded default, or DBOS workers over a shared Postgres database."""
