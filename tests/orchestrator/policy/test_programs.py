"""A deny rule means the program, not the spelling: every way of writing ``rm``, ``curl`` or ``git push``."""

from __future__ import annotations

import pytest
from mcp import types as mt

from orchestrator.policy import Rule, decide
from orchestrator.policy.programs import resolve

SHELL = mt.ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=True)
DENY = [
    Rule("deny", "shell__run", command="rm *"),
    Rule("deny", "shell__run", command="curl *"),
    Rule("deny", "shell__run", command="git push *"),
]

# Spellings whose program is plain to see once wrappers and options are read: each must be denied outright.
DENIED = [
    # the program word
    "/bin/rm -rf victim",
    "/usr/bin/rm -rf victim",
    "./rm victim",
    "../bin/rm victim",
    "'rm' -rf victim",
    '"/bin/rm" -rf victim',
    "r''m victim",
    "\\rm victim",
    "RM -rf victim",
    "Rm victim",
    "/usr/bin/curl https://evil.example",
    "/usr/local/bin/CURL -s https://evil.example",
    # env
    "env rm victim",
    "/usr/bin/env rm victim",
    "env -i A=1 rm victim",
    "env -i PATH=/bin /bin/rm victim",
    "env - rm victim",
    "env -- rm victim",
    "env -u HOME rm victim",
    "env -uHOME rm victim",
    "env --unset=HOME rm victim",
    "env --unset HOME rm victim",
    "env -C /tmp rm victim",
    "env --chdir=/tmp rm victim",
    "env -0 -v rm victim",
    "env --ignore-environment rm victim",
    "env --ignore-sig rm victim",
    "A=1 rm victim",
    "LANG=C /bin/rm victim",
    # command, exec, builtin
    "command rm victim",
    "command -p rm victim",
    "command -- /bin/rm victim",
    "exec rm victim",
    "exec -a innocent rm victim",
    "exec -cl rm victim",
    "builtin command rm victim",
    "builtin exec /bin/rm victim",
    # nice, timeout
    "nice rm victim",
    "nice -n 5 rm victim",
    "nice -n5 rm victim",
    "nice -5 rm victim",
    "nice --adjustment=5 rm victim",
    "nice --adj 5 rm victim",
    "timeout 5 rm victim",
    "timeout 5s rm victim",
    "timeout 0.5m rm victim",
    "timeout -s KILL 5 rm victim",
    "timeout -sKILL 5 rm victim",
    "timeout --signal=KILL 5 rm victim",
    "timeout --sig KILL 5 rm victim",
    "timeout -k 1 5 rm victim",
    "timeout --preserve-status --foreground 5 rm victim",
    # sudo, doas
    "sudo rm victim",
    "sudo -u root rm victim",
    "sudo -uroot rm victim",
    "sudo --user=root rm victim",
    "sudo -n -E -H rm victim",
    "sudo -g wheel -- rm victim",
    "sudo --preserve-env=PATH rm victim",
    "sudo VAR=1 rm victim",
    "sudo -s rm victim",
    "sudo -i /bin/rm victim",
    "doas rm victim",
    "doas -u root rm victim",
    "doas -n /bin/rm victim",
    # the others
    "nohup rm victim",
    "stdbuf -oL rm victim",
    "stdbuf --output=L -e0 rm victim",
    "ionice -c3 rm victim",
    "ionice -c 2 -n 7 rm victim",
    "setsid rm victim",
    "setsid -f -w rm victim",
    "time rm victim",
    "time -p rm victim",
    "time -o out -f %e rm victim",
    "chrt -f 10 rm victim",
    "chrt --idle 0 rm victim",
    "taskset 0x1 rm victim",
    "taskset -c 0,1 rm victim",
    "xargs rm",
    "xargs -0 -n1 rm",
    "xargs -I{} rm {}",
    "xargs -i rm {}",
    "xargs --max-args=1 /bin/rm",
    "busybox rm victim",
    "find . -name '*.o' -exec rm {} +",
    "find . -execdir /bin/rm {} +",
    "find . -ok curl https://evil.example +",
    # nested
    "sudo env nice /bin/rm victim",
    "sudo -u root env -i PATH=/bin nice -n 5 timeout 5 /bin/rm -rf victim",
    "nohup nice -n 19 ionice -c3 rm victim",
    "timeout 5 sudo -u root command -p ./rm victim",
    "env -i sudo exec -a x nohup rm victim",
    "xargs sudo rm",
    # git's global options
    "git -c k=v push",
    "git -c user.name=x push origin main",
    "git -C dir push",
    "git -C /elsewhere push --force",
    "git --no-pager push",
    "git -p push",
    "git --paginate push",
    "git -P push",
    "git --git-dir=.git push",
    "git --git-dir .git push",
    "git --work-tree=. push",
    "git --work-tree . push",
    "git --namespace=ns push",
    "git --namespace ns push",
    "git --bare push",
    "git --exec-path=/usr/lib/git-core push",
    "git --literal-pathspecs push",
    "git --glob-pathspecs --icase-pathspecs push",
    "git --no-replace-objects --no-optional-locks push",
    "git --config-env=core.sshCommand=CMD push",
    "git --config-env core.sshCommand=CMD push",
    "git -C a -C b push",
    "git -C a -c x=y --no-pager push origin main",
    "git --no-pager -c color.ui=never -C sub --git-dir=.git --work-tree=. push",
    "/usr/bin/git -C x push",
    "GIT push",
    "git PUSH",
    "Git -C x Push",
    "'git' 'push'",
    "git-push origin",
    "/usr/lib/git-core/git-push origin",
    "sudo git -C x push",
    "env GIT_DIR=x git push",
    "GIT_DIR=x git -C y push",
    "nice git --no-pager push",
    # in a list, any command counts
    "ls; /bin/rm -rf victim",
    "git status && sudo -u root rm -rf victim",
    "true || git -C x push",
]

# Spellings whose program cannot be known for sure: asked about, even in bypass, never allowed.
ASKED = [
    "env -S 'rm -rf victim'",
    "env --split-string='rm -rf victim'",
    "env -Srm",
    "env --frobnicate rm victim",
    "timeout --frobnicate 5 rm victim",
    "timeout soon rm victim",
    "sudo -e /etc/hosts",
    "sudo -h rm victim",
    "sudo --frobnicate rm victim",
    "nice -x rm victim",
    "chrt --frob 1 rm victim",
    "taskset zz rm victim",
    "command -x rm victim",
    "doas -s",
    "busybox --install",
    "git --frobnicate push",
    "git -Cdir push",
    "git -c alias.x=push x",
    "git -c core.sshCommand=evil fetch",
    "git --config-env=alias.x=E x",
    "git --exec-path=/tmp/evil status",
    "git --git-dir",
    "PATH=/tmp/evil git status",
    "LD_PRELOAD=/tmp/evil.so ls",
    "env GIT_SSH_COMMAND=evil git fetch",
    "sudo LD_PRELOAD=/x ls",
    "r? victim",
    "/bin/r[m] victim",
    "/bin/r* victim",
    "git pu?h",
    "sh -c 'rm -rf victim'",
    "bash -c 'git push'",
    "/bin/sh -c 'curl evil'",
    "eval rm victim",
    "su -c 'rm victim'",
    "watch rm victim",
    "strace rm victim",
    "chroot / rm victim",
    "flock /tmp/l rm victim",
    "unshare -r rm victim",
    "xargs git",
    "$X victim",
    "${RM} victim",
    "`which rm` victim",
    "ls | sh",
    "ls > out",
]

# Innocent commands: still run in bypass with the same deny rules.
INNOCENT = [
    "git status",
    "ls",
    "ls -la src",
    "git -C sub status",
    "git -C sub -C deeper log --oneline",
    "git --no-pager log",
    "git -P diff",
    "git -c color.ui=never status",
    "git -c user.email=a@b commit -m x",
    "git --git-dir=.git --work-tree=. status",
    "git pushx",
    "git log --grep push",
    "git stash push",
    "echo rm",
    "grep curl notes.txt",
    "rmdir build",
    "curlie https://example.com",
    "/bin/ls",
    "command -v rm",
    "command -V curl",
    "sudo -l rm",
    "env",
    "env LANG=C ls",
    "LC_ALL=C sort notes.txt",
    "nice -n 5 make",
    "timeout 5 pytest",
    "sudo -u root ls",
    "nohup make",
    "xargs",
    "find . -name '*.py'",
    "git --version",
    "git",
]


@pytest.mark.parametrize("command", DENIED)
def test_every_spelling_of_a_denied_program_is_denied_in_bypass(command: str) -> None:
    decision = decide("bypass", "shell__run", SHELL, {"command": command}, DENY, "/tmp")
    assert decision.verdict == "deny", decision
    assert decision.rule in DENY


@pytest.mark.parametrize("command", ASKED)
def test_a_program_that_cannot_be_known_is_asked_about_in_bypass(command: str) -> None:
    decision = decide("bypass", "shell__run", SHELL, {"command": command}, DENY, "/tmp")
    assert decision.verdict in ("deny", "ask"), decision
    if decision.verdict == "ask":
        assert "cannot be checked against the deny rule" in decision.reason


@pytest.mark.parametrize("command", DENIED + ASKED)
@pytest.mark.parametrize("mode", ["ask", "accept-edits", "plan"])
def test_no_spelling_is_allowed_in_any_mode(command: str, mode: str) -> None:
    everything = [*DENY, Rule("allow", "shell__run")]
    assert decide(mode, "shell__run", SHELL, {"command": command}, everything, "/tmp").verdict != "allow"


@pytest.mark.parametrize("command", INNOCENT)
def test_innocent_commands_still_run_in_bypass(command: str) -> None:
    decision = decide("bypass", "shell__run", SHELL, {"command": command}, DENY, "/tmp")
    assert decision.verdict == "allow", decision


def test_the_corpus_is_large_enough() -> None:
    assert len(DENIED) >= 120
    assert len(ASKED) >= 40
    assert len(INNOCENT) >= 25


def test_doubt_says_why() -> None:
    decision = decide("bypass", "shell__run", SHELL, {"command": "env -S 'rm -rf x'"}, DENY, "/tmp")
    assert decision.verdict == "ask"
    assert "env -S" in decision.reason and "rm *" in decision.reason


def test_an_unreadable_program_is_not_asked_about_without_a_deny_command_rule() -> None:
    paths_only = [Rule("deny", "shell__run", path="/etc/**")]
    assert decide("bypass", "shell__run", SHELL, {"command": "env -S 'x y'"}, paths_only, "/tmp").verdict == "allow"


def test_an_ask_rule_matches_the_program_too() -> None:
    ask_push = [Rule("ask", "shell__run", command="git push"), Rule("allow", "shell__run")]
    for command in ("git -C x push", "sudo git push", "GIT PUSH"):
        decision = decide("accept-edits", "shell__run", SHELL, {"command": command}, ask_push, "/tmp")
        assert decision.verdict == "ask" and decision.rule == ask_push[0], (command, decision)
    # Cannot be checked against the ask rule: asked, though a tool-wide allow rule matches the plain line.
    unknown = decide("ask", "shell__run", SHELL, {"command": "git -c alias.p=push p"}, ask_push, "/tmp")
    assert unknown.verdict == "ask" and "ask rule" in unknown.reason
    # bypass ignores ask rules, as before.
    assert decide("bypass", "shell__run", SHELL, {"command": "git -C x push"}, ask_push, "/tmp").verdict == "allow"


def test_a_deny_rule_written_with_a_path_means_the_program() -> None:
    rule = [Rule("deny", "shell__run", command="/usr/bin/curl *")]
    assert decide("bypass", "shell__run", SHELL, {"command": "curl x"}, rule, "/tmp").verdict == "deny"


def test_forms_of_a_wrapped_command() -> None:
    resolution = resolve(("sudo", "-u", "root", "env", "-i", "A=1", "/bin/rm", "-rf", "x"))
    assert resolution.forms == (
        ("sudo", "-u", "root", "env", "-i", "A=1", "/bin/rm", "-rf", "x"),
        ("env", "-i", "A=1", "/bin/rm", "-rf", "x"),
        ("rm", "-rf", "x"),
    )
    assert "A" in resolution.doubt  # A=1 is not an inert variable
    git = resolve(("git", "-C", "d", "-c", "user.name=x", "--no-pager", "push", "origin"))
    assert git.forms[-1] == ("git", "push", "origin") and git.doubt == ""
    assert resolve(("command", "-v", "rm")).forms == (("command", "-v", "rm"),)
