"""The private Postgres cluster of tests/pg.py: each test gets a database of its own that answers queries."""

from __future__ import annotations

import psycopg


def test_a_fresh_database_answers_queries_and_is_its_own(fresh_database: str, postgres_url: str) -> None:
    with psycopg.connect(fresh_database) as conn:
        assert conn.execute("select 1").fetchone() == (1,)
        name = conn.execute("select current_database()").fetchone()
        conn.execute("create table mine (x int)")
        conn.commit()
    assert name is not None and name[0].startswith("loom_test_")
    with psycopg.connect(postgres_url) as conn:
        row = conn.execute("select count(*) from pg_database where datname = %s", (name[0],)).fetchone()
    assert row == (1,)
