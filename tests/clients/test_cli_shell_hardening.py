"""The shell through the real ``loom run``: deny rules hold whatever the spelling, and secrets stay with Loom.

Before issue 11, bypass mode with ``deny rm *``, ``deny curl *`` and ``deny git push *`` still ran
``/bin/rm -rf victim``, ``/usr/bin/curl ...`` and ``git -C DIR push``; and every command could read
``ANTHROPIC_API_KEY`` from Loom's environment.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from orchestrator.events import ToolCallFinished
from servers.shell._sandbox import bwrap_problem
from tests.clients.cli_support import make_project, run_loom, write_script

DENY = "".join(
    f'[[rules]]\naction = "deny"\ntool = "shell__run"\ncommand = "{c}"\n' for c in ("rm *", "curl *", "git push *")
)

SPELLINGS = [
    "/bin/rm -rf victim",
    "/usr/bin/rm -rf victim",
    "./../project/../../bin/rm -rf victim",
    "'rm' -rf victim",
    '"/bin/rm" -rf victim',
    "env rm -rf victim",
    "env -i A=1 rm -rf victim",
    "command rm -rf victim",
    "exec rm -rf victim",
    "nice -n 5 rm -rf victim",
    "timeout 5 rm -rf victim",
    "timeout -s KILL 5 rm -rf victim",
    "nohup rm -rf victim",
    "sudo -u root rm -rf victim",
    "sudo env nice /bin/rm -rf victim",
    "xargs rm -rf victim",
    "/usr/bin/curl -s http://127.0.0.1:9/",
    "env curl http://127.0.0.1:9/",
    "git -c k=v push origin main",
    "git -C . push origin main",
    "git --no-pager push origin main",
    "git --git-dir=.git push origin main",
    "git -c core.pager=cat -C . --no-pager push",
]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = make_project(tmp_path / "project")
    (root / "victim").mkdir()
    (root / "victim" / "precious.txt").write_text("keep me\n", encoding="utf-8")
    subprocess.run(["git", "init", "-q", str(root)], check=True, timeout=30)
    return root


def test_deny_rules_hold_for_every_spelling_even_in_bypass(project: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "policy.toml").write_text(DENY, encoding="utf-8")
    calls = [{"name": "shell__run", "arguments": {"command": line}} for line in SPELLINGS]
    script = write_script(tmp_path / "s.json", [{"tool_calls": calls}, {"text": "done"}])
    result = run_loom(
        "run", "--json", "--mode", "bypass", "--model", f"scripted:{script}", "go", cwd=project, home=home
    )
    assert result.returncode == 0, result
    finished = [e for e in result.events() if isinstance(e, ToolCallFinished)]
    assert len(finished) == len(SPELLINGS)
    for done in finished:
        # Denied by the rule, or asked about (headless: denied) because it could not be read with confidence.
        assert done.failure == "denied", done.content
    assert (project / "victim" / "precious.txt").read_text() == "keep me\n"


@pytest.mark.parametrize("sandbox", ["off", "bwrap"])
def test_commands_get_only_the_environment_they_need(project: Path, tmp_path: Path, sandbox: str) -> None:
    if sandbox == "bwrap" and bwrap_problem() is not None:
        pytest.skip(f"the shell sandbox cannot run here: {bwrap_problem()}")
    home = tmp_path / "home"
    home.mkdir()
    shell = {"sandbox": sandbox, "env": ["MY_BUILD_FLAG"]}
    (home / "config.json").write_text(json.dumps({"shell": shell}), encoding="utf-8")
    secrets = {
        "ANTHROPIC_API_KEY": "sk-ant-secret-1",
        "OPENAI_API_KEY": "sk-openai-secret-2",
        "GITHUB_TOKEN": "ghp-secret-3",
        "AWS_SECRET_ACCESS_KEY": "aws-secret-4",
        "SSH_AUTH_SOCK": "/tmp/ssh-secret-5/agent.1",
        "MY_BUILD_FLAG": "passed-by-name",
    }
    script = write_script(
        tmp_path / "s.json",
        [{"tool_calls": [{"name": "shell__run", "arguments": {"command": "env"}}]}, {"text": "done"}],
    )
    result = run_loom(
        "run", "--json", "--mode", "bypass", "--model", f"scripted:{script}", "go", cwd=project, home=home, env=secrets
    )
    assert result.returncode == 0, result
    (done,) = [e for e in result.events() if isinstance(e, ToolCallFinished)]
    listed = dict(line.split("=", 1) for line in done.content.splitlines() if "=" in line and not line.startswith("-"))
    assert "PATH" in listed and "HOME" in listed, done.content
    assert listed.get("MY_BUILD_FLAG") == "passed-by-name", done.content
    for name, value in secrets.items():
        if name != "MY_BUILD_FLAG":
            assert name not in listed and value not in done.content, (name, done.content)
