"""The ``engine`` setting: parsed from the home's config, refused from a project's, secrets never shown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.config import ConfigError, load_config, parse_config
from orchestrator.engine.settings import EngineSettings, mask_url


def _parse(engine: object) -> EngineSettings | None:
    return parse_config(json.dumps({"engine": engine}), Path("/home/me/.loom/config.json")).engine


def test_the_default_is_embedded() -> None:
    assert parse_config("{}", Path("c.json")).engine is None
    settings = _parse({"kind": "embedded"})
    assert settings is not None and not settings.distributed


def test_dbos_needs_a_postgres_url_and_reads_its_numbers() -> None:
    settings = _parse({"kind": "dbos", "database": "postgresql://loom@127.0.0.1:5433/loom", "concurrency": 8})
    assert settings is not None and settings.distributed
    assert (settings.database, settings.concurrency, settings.heartbeat_s) == (
        "postgresql://loom@127.0.0.1:5433/loom",
        8,
        2.0,
    )
    for bad, said in [
        ({"kind": "dbos"}, "database is required"),
        ({"kind": "dbos", "database": "sqlite:///x.db"}, "must be a Postgres URL"),
        ({"kind": "temporal"}, "must be 'embedded' or 'dbos'"),
        ({"kind": "dbos", "database": "postgresql://h/d", "concurrency": 0}, "above 0"),
        ({"kind": "dbos", "database": "postgresql://h/d", "concurrency": 1.5}, "whole number"),
        ({"kind": "dbos", "database": "postgresql://h/d", "workers": 2}, "unknown key 'workers'"),
        ({"kind": "embedded", "database": "postgresql://h/d"}, "dbos engine only"),
    ]:
        with pytest.raises(ConfigError, match=said) as caught:
            _parse(bad)
        assert "/home/me/.loom/config.json: engine" in str(caught.value)


def test_a_password_comes_from_the_environment_and_is_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOM_PG_PASSWORD", "s3cret")
    settings = _parse({"kind": "dbos", "database": "postgresql://loom:${LOOM_PG_PASSWORD}@db.local:5432/loom"})
    assert settings is not None and settings.database == "postgresql://loom:s3cret@db.local:5432/loom"
    assert "s3cret" not in settings.shown_database and settings.shown_database.endswith("@db.local:5432/loom")
    with pytest.raises(ConfigError, match=r"\$\{NOT_SET_ANYWHERE\} is not set"):
        _parse({"kind": "dbos", "database": "postgresql://u:${NOT_SET_ANYWHERE}@h/d"})
    with pytest.raises(ConfigError) as caught:
        _parse({"kind": "dbos", "database": "mysql://u:hunter2@h/d"})
    assert "hunter2" not in str(caught.value)
    assert mask_url("postgresql://u@h/d") == "postgresql://u@h/d"


def test_a_project_cannot_choose_the_engine(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "repo"
    (project / ".loom").mkdir(parents=True)
    home.mkdir()
    attacker = {"engine": {"kind": "dbos", "database": "postgresql://evil@203.0.113.9/runs"}}
    (project / ".loom" / "config.json").write_text(json.dumps(attacker))
    config = load_config(home, project)
    assert config.engine is None
    assert any("'engine' is ignored" in note for note in config.ignored)
    (home / "config.json").write_text(json.dumps({"engine": {"kind": "dbos", "database": "postgresql://me@h/d"}}))
    config = load_config(home, project)
    assert config.engine is not None and config.engine.database == "postgresql://me@h/d"
