from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.config import BUILT_IN_SERVERS, ConfigError, ShellOptions, load_config, load_config_file
from orchestrator.trust import read_project, trust


def write(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def test_standard_mcp_servers_format_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOM_TEST_TOKEN", "s3cret")
    cfg = load_config_file(
        write(
            tmp_path / "c.json",
            {
                "model": "openai:deepseek-chat",
                "mcpServers": {
                    "gh": {"command": "npx", "args": ["-y", "server"], "env": {"TOKEN": "${LOOM_TEST_TOKEN}"}},
                    "docs": {
                        "url": "http://127.0.0.1:9/mcp",
                        "headers": {"X": "${MISSING_VAR:-fallback}"},
                        "timeout": 5,
                    },
                },
            },
        )
    )
    gh, docs = cfg.servers
    assert cfg.model == "openai:deepseek-chat"
    assert (gh.transport, gh.command, gh.args, gh.env) == ("stdio", "npx", ("-y", "server"), {"TOKEN": "s3cret"})
    assert (docs.transport, docs.url, docs.headers, docs.call_timeout_s) == (
        "http",
        "http://127.0.0.1:9/mcp",
        {"X": "fallback"},
        5.0,
    )


def test_type_disabled_and_health_settings_of_an_entry_are_read(tmp_path: Path) -> None:
    cfg = load_config_file(
        write(
            tmp_path / "c.json",
            {
                "mcpServers": {
                    "old": {"type": "sse", "url": "http://127.0.0.1:9/sse"},
                    "new": {"type": "streamable-http", "url": "http://127.0.0.1:9/mcp", "healthInterval": 5},
                    "off": {"type": "stdio", "command": "srv", "disabled": True, "healthTimeout": 2},
                    "plain": {"command": "srv"},
                }
            },
        )
    )
    old, new, off, plain = cfg.servers
    assert (old.transport, new.transport, off.transport, plain.transport) == ("sse", "http", "stdio", "stdio")
    assert (off.disabled, plain.disabled) == (True, False)
    assert (new.health_interval_s, new.health_timeout_s, off.health_timeout_s) == (5.0, 10.0, 2.0)
    assert (plain.health_interval_s, plain.health_timeout_s) == (30.0, 10.0)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"type": "websocket", "url": "ws://h"}, r"mcpServers\.x\.type must be 'stdio', 'http' .* or 'sse'"),
        ({"type": "sse", "command": "srv"}, r"mcpServers\.x has type 'sse' but no 'url'"),
        ({"type": "stdio", "url": "http://h/mcp"}, r"mcpServers\.x has type 'stdio' but no 'command'"),
        ({"command": "srv", "disabled": "yes"}, r"mcpServers\.x\.disabled must be true or false"),
        ({"command": "srv", "healthInterval": 0}, r"mcpServers\.x\.healthInterval must be a positive number"),
    ],
)
def test_bad_type_disabled_or_health_settings_are_named(tmp_path: Path, entry: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config_file(write(tmp_path / "c.json", {"mcpServers": {"x": entry}}))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{\n  "mcpServers": {\n    "x": {"command": "a",}\n  }\n}', r"c\.json:3:\d+: invalid JSON"),
        ("[]", "top level must be a JSON object"),
        ({"mcpServers": []}, "'mcpServers' must be an object"),
        ({"mcpServers": {"x": {}}}, r"mcpServers\.x needs 'command'"),
        ({"mcpServers": {"x": {"command": ""}}}, r"mcpServers\.x\.command must be a non-empty string"),
        ({"mcpServers": {"x": {"command": "a", "args": "b"}}}, r"mcpServers\.x\.args must be a list of strings"),
        ({"mcpServers": {"x": {"url": "ftp://h"}}}, r"mcpServers\.x\.url must be an http"),
        ({"mcpServers": {"x": {"command": "a", "env": {"K": "${LOOM_SURELY_UNSET}"}}}}, "LOOM_SURELY_UNSET"),
        ({"mcpServers": {"x": {"command": "a", "timeout": -1}}}, "positive number of seconds"),
        ({"model": 3}, "'model' must be a string"),
        (
            {"mcpServers": {"x": {"command": "a", "toolTimeouts": [5]}}},
            r"mcpServers\.x\.toolTimeouts must be an object",
        ),
        (
            {"mcpServers": {"x": {"command": "a", "toolTimeouts": {"slow": 0}}}},
            r"mcpServers\.x\.toolTimeouts\.slow must be a positive number",
        ),
        ({"mcpServers": {"x": {"url": "http://h", "toolTimeouts": {"t": "5"}}}}, r"x\.toolTimeouts\.t must be"),
        ({"toolTimeouts": {"fs__grep": None}}, r"toolTimeouts\.fs__grep must be a positive number"),
        ({"toolTimeouts": {"shell": True}}, r"toolTimeouts\.shell must be a positive number"),
        ({"toolTimeouts": 30}, "toolTimeouts must be an object"),
    ],
)
def test_bad_config_names_the_file_and_the_problem(tmp_path: Path, content: object, message: str) -> None:
    path = write(tmp_path / "c.json", content)
    with pytest.raises(ConfigError, match=message) as info:
        load_config_file(path)
    assert str(path) in str(info.value)


def test_layers_merge_with_later_files_winning(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "proj"
    write(home / "config.json", {"model": "scripted:a.json", "mcpServers": {"x": {"command": "home"}}})
    write(project / ".loom" / "config.json", {"mcpServers": {"x": {"command": "project"}, "y": {"command": "y"}}})
    extra = write(tmp_path / "extra.json", {"model": "scripted:b.json"})
    untrusted = load_config(home, project, extra)
    assert {s.name: s.command for s in untrusted.servers} == {"x": "home"}  # a project adds servers once trusted
    trust(home, project, read_project(project).digest)
    cfg = load_config(home, project, extra)
    assert cfg.model == "scripted:b.json"
    assert {s.name: s.command for s in cfg.servers} == {"x": "project", "y": "y"}


def test_missing_extra_file_is_an_error_but_missing_defaults_are_not(tmp_path: Path) -> None:
    assert load_config(tmp_path / "nohome", tmp_path).servers == ()
    with pytest.raises(ConfigError, match="no such config file"):
        load_config(tmp_path, tmp_path, tmp_path / "absent.json")


def test_tool_timeouts_per_server_entry_and_top_level(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "proj"
    write(
        home / "config.json",
        {
            "toolTimeouts": {"fs__grep": 30, "shell": 600},
            "mcpServers": {
                "gh": {"command": "gh-mcp", "timeout": 60, "toolTimeouts": {"search_code": 120}},
                "docs": {"url": "https://docs.example/mcp", "toolTimeouts": {"fetch": 5.5}},
            },
        },
    )
    write(project / ".loom" / "config.json", {"toolTimeouts": {"shell": 900, "gh__merge": 10}})
    cfg = load_config(home, project)
    servers = {s.name: s for s in cfg.servers}
    assert (servers["gh"].call_timeout_s, servers["gh"].tool_timeouts_s) == (60.0, {"search_code": 120.0})
    assert servers["docs"].tool_timeouts_s == {"fetch": 5.5}
    assert cfg.tool_timeouts_s == {"fs__grep": 30.0, "shell": 900.0, "gh__merge": 10.0}  # merged by key


def test_shell_options_are_read_and_the_project_overrides_the_user(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    (project / ".loom").mkdir(parents=True)
    home.mkdir()
    (home / "config.json").write_text(json.dumps({"shell": {"sandbox": "bwrap", "network": False}}))
    assert load_config(home, project).shell == ShellOptions(sandbox="bwrap", network=False)
    (project / ".loom" / "config.json").write_text(json.dumps({"shell": {"sandbox": "off"}}))
    assert load_config(home, project).shell == ShellOptions(sandbox="bwrap", network=False)  # looser: not trusted
    trust(home, project, read_project(project).digest)
    assert load_config(home, project).shell == ShellOptions(sandbox="off", network=True)
    assert load_config(tmp_path / "nowhere", tmp_path).shell is None


@pytest.mark.parametrize(
    ("shell", "message"),
    [
        ("bwrap", "must be an object"),
        ({"sandbox": "docker"}, "shell.sandbox must be 'auto', 'bwrap' or 'off'"),
        ({"network": "no"}, "shell.network must be true or false"),
        ({"sandbx": "off"}, "unknown key 'sandbx'"),
    ],
)
def test_bad_shell_options_name_the_key(tmp_path: Path, shell: object, message: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"shell": shell}))
    with pytest.raises(ConfigError, match=message) as err:
        load_config_file(path)
    assert str(path) in str(err.value)


def test_a_configured_server_cannot_take_a_built_in_name(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"mcpServers": {"memory": {"command": "memory-server"}}}))
    with pytest.raises(ConfigError, match=r"mcpServers.memory: the name 'memory' is taken by Loom's built-in server"):
        load_config_file(config)


@pytest.mark.parametrize(
    ("name", "builtin"),
    [
        *((name, name) for name in sorted(BUILT_IN_SERVERS)),
        ("mcp.access", "mcp_access"),  # the tool names would be mcp_access__*: the same namespace
        ("sub agents", "sub_agents"),
    ],
)
def test_every_built_in_name_is_refused_at_load_time_naming_the_file(tmp_path: Path, name: str, builtin: str) -> None:
    config = write(tmp_path / "config.json", {"mcpServers": {"ok": {"command": "x"}, name: {"command": "x"}}})
    if builtin not in BUILT_IN_SERVERS:  # a near miss is just another name
        assert [s.name for s in load_config_file(config).servers] == ["ok", name]
        return
    with pytest.raises(ConfigError) as err:
        load_config_file(config)
    message = str(err.value)
    assert message.startswith(f"{config}: mcpServers.{name}: ")
    assert f"taken by Loom's built-in server {builtin!r}" in message
    assert f"rename this entry in {config}" in message


def test_the_config_refuses_every_name_the_hub_reserves() -> None:
    from orchestrator.hub import names

    assert {"subagents", "checkpoints", "mcp_access"} <= BUILT_IN_SERVERS
    assert BUILT_IN_SERVERS is names.BUILT_IN_SERVERS
