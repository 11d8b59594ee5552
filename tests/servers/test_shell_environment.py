"""What environment a command gets: an allow-list of the server's own, plus what is configured, sandboxed or not.

The secrets are set in this process's environment, which is the server's when it runs in-process, and passed as
the child's environment when ``python -m servers.shell`` runs over stdio with the command-line flags.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

import servers.shell
from servers.shell import build_server
from servers.shell._sandbox import SandboxMode
from tests.servers._support import REPO_ROOT, SANDBOXES, call_ok

pytestmark = pytest.mark.anyio


SECRETS = {
    "ANTHROPIC_API_KEY": "sk-test-anthropic",
    "OPENAI_API_KEY": "sk-test-openai",
    "FOO_TOKEN": "foo-token-value",
    "GITHUB_TOKEN": "ghp-test",
    "AWS_SECRET_ACCESS_KEY": "aws-secret-value",
    "DB_PASSWORD": "hunter2-value",
    "LC_API_KEY": "locale-looking-secret",
    "SSH_AUTH_SOCK": "/nonexistent-agent-dir/agent.sock",
    "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent-bus/bus",
    "DOCKER_HOST": "unix:///nonexistent-docker/docker.sock",
    "XDG_RUNTIME_DIR": "/nonexistent-runtime-dir",
    "HTTPS_PROXY": "http://user:proxy-password@proxy.invalid:3128",
}
"""Variables a command must not see unless configured: credentials, agent and daemon sockets, proxy passwords."""


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    return SECRETS


@pytest.fixture(params=SANDBOXES)
def sandbox(request: pytest.FixtureRequest) -> SandboxMode:
    mode: SandboxMode = request.param
    return mode


def parse_env(output: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in output.splitlines() if "=" in line)


async def env_of(
    root: Path, sandbox: SandboxMode, env_pass: Sequence[str] = (), env_set: Mapping[str, str] | None = None
) -> dict[str, str]:
    async with Client(build_server(root, sandbox=sandbox, env_pass=env_pass, env_set=env_set)) as client:
        content = await call_ok(client, "run", {"command": "env"})
    assert content["exit_code"] == 0, content
    return parse_env(content["stdout"])


async def test_secrets_and_sockets_stay_out_and_the_basics_pass(
    root: Path, sandbox: SandboxMode, secrets: dict[str, str]
) -> None:
    env = await env_of(root, sandbox)
    assert set(env) & set(secrets) == set()
    assert not [value for value in secrets.values() if value in "\n".join(env.values())]
    assert (env["PATH"], env["HOME"], env["LC_ALL"]) == (os.environ["PATH"], os.environ["HOME"], "C.UTF-8")


async def test_configured_names_pass_by_name_and_fixed_values_are_set(
    root: Path, sandbox: SandboxMode, secrets: dict[str, str]
) -> None:
    env = await env_of(
        root,
        sandbox,
        env_pass=["FOO_TOKEN", "NOT_SET_ANYWHERE"],
        env_set={"BUILD_MODE": "release", "HOME": str(root)},
    )
    assert (env["FOO_TOKEN"], env["BUILD_MODE"], env["HOME"]) == ("foo-token-value", "release", str(root))
    assert "NOT_SET_ANYWHERE" not in env
    assert "ANTHROPIC_API_KEY" not in env and "GITHUB_TOKEN" not in env


async def test_a_tmpdir_the_sandbox_cannot_offer_is_dropped_there(
    root: Path, sandbox: SandboxMode, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Under /tmp, which the sandbox replaces with an empty one: mktemp would fail if TMPDIR still pointed there.
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    async with Client(build_server(root, sandbox=sandbox)) as client:
        content = await call_ok(client, "run", {"command": 'echo "${TMPDIR-unset}"; mktemp > /dev/null && echo ok'})
    expected = f"{tmp_path}\nok\n" if sandbox == "off" else "unset\nok\n"
    assert (content["exit_code"], content["stdout"]) == (0, expected)


async def test_the_model_is_told_the_environment_is_reduced_and_how_to_add_a_variable(
    root: Path, sandbox: SandboxMode
) -> None:
    server = build_server(root, sandbox=sandbox, env_pass=["FOO_TOKEN"], env_set={"BUILD_MODE": "x"})
    instructions = server.instructions or ""
    assert "Commands get a reduced environment" in instructions
    assert "--pass-env NAME" in instructions and "shell.env" in instructions
    assert "plus the configured BUILD_MODE;" in instructions  # FOO_TOKEN is not set here, so it is not listed
    async with Client(server) as client:
        (tool,) = (await client.list_tools()).tools
    assert "reduced environment" in (tool.description or "")


def test_bad_names_and_values_are_refused(root: Path) -> None:
    with pytest.raises(ValueError, match="'BAD=NAME' is not a valid environment variable name"):
        build_server(root, sandbox="off", env_pass=["BAD=NAME"])
    with pytest.raises(ValueError, match="must be a list of names"):
        build_server(root, sandbox="off", env_pass="FOO_TOKEN")
    with pytest.raises(ValueError, match="'1X' is not a valid environment variable name"):
        build_server(root, sandbox="off", env_set={"1X": "y"})
    with pytest.raises(ValueError, match="NUL"):
        build_server(root, sandbox="off", env_set={"X": "a\x00b"})


async def test_loom_server_shell_takes_pass_env_and_set_env(root: Path, sandbox: SandboxMode) -> None:
    args = ["--root", str(root), "--sandbox", sandbox, "--pass-env", "FOO_TOKEN", "--set-env", "MODE=a=b"]
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "servers.shell", *args],
        cwd=str(REPO_ROOT),
        env={"PATH": os.environ["PATH"], "HOME": os.environ["HOME"], **SECRETS},
    )
    async with Client(params) as client:
        content = await call_ok(client, "run", {"command": "env"})
    env = parse_env(content["stdout"])
    assert (env["FOO_TOKEN"], env["MODE"]) == ("foo-token-value", "a=b")
    assert set(env) & set(SECRETS) == {"FOO_TOKEN"}


def test_set_env_without_a_value_is_a_usage_error(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        servers.shell.main(["--root", str(root), "--set-env", "NOVALUE"])
    assert raised.value.code == 2
    assert "expected NAME=VALUE, got 'NOVALUE'" in capsys.readouterr().err
