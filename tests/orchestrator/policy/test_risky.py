"""Allow rules that admit more than they look like: ``allow find *`` must not admit ``find . -delete``."""

from __future__ import annotations

import pytest
from mcp import types as mt

from orchestrator.policy import Rule, decide
from orchestrator.policy.risky import findings
from orchestrator.policy.sedscript import script_risk

SHELL = mt.ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=True)
PROGRAMS = ("find", "fd", "git", "git log", "git diff", "git show", "git status", "sort", "sed", "awk", "gawk")
ALLOW = [Rule("allow", "shell__run", command=f"{p} *") for p in PROGRAMS] + [
    Rule("allow", "shell__run", command=f"{p} *") for p in ("tee", "uniq", "rg", "tar", "curl", "xargs")
]

RISKY = [
    # find
    "find . -delete",
    "find . -name '*.tmp' -delete",
    "find . -exec rm {} ;",
    "find . -exec rm {} +",
    "find . -execdir rm {} +",
    "find . -ok rm {} ;",
    "find . -okdir rm {} ;",
    "find . -fprint /tmp/out",
    "find . -fprint0 out",
    "find . -fprintf out %p",
    "find . -fls out",
    "fd -x rm",
    "fd --exec rm",
    "fd -X rm",
    "fd --exec-batch rm",
    "fd -Hx rm",
    # git global options in front of an allowed form
    "git -c core.pager=evil log",
    "git -c core.sshCommand=evil status",
    "git --config-env=core.pager=EVIL log",
    "git --config-env core.pager=EVIL diff",
    "git -C /elsewhere status",
    "git -C /elsewhere log",
    "git --git-dir=/elsewhere/.git log",
    "git --work-tree=/elsewhere status",
    "git --bare log",
    "git --exec-path=/tmp/evil log",
    "git --frobnicate log",
    # git subcommand options that write or run
    "git log --output=FILE",
    "git log --output FILE",
    "git log --outp=FILE",
    "git log -p --output=/home/u/.bashrc",
    "git diff --output=x",
    "git show --output=x HEAD",
    "git format-patch -o dir HEAD~1",
    "git format-patch -odir HEAD~1",
    "git format-patch --output-directory dir HEAD~1",
    "git format-patch --output-directory=dir HEAD~1",
    "git archive -o out.tar HEAD",
    "git archive --output=out.tar HEAD",
    "git diff --ext-diff",
    "git log --ext-diff -p",
    "git ls-remote --upload-pack=evil .",
    "git fetch --upload-pack evil origin",
    "git push --receive-pack=evil",
    "git archive --exec=evil --remote=x HEAD",
    "git grep -O x",
    "git grep -Oevil x",
    "git grep --open-files-in-pager=evil x",
    # sort
    "sort -o out a",
    "sort -oout a",
    "sort a -o out",
    "sort -ro out a",
    "sort --output=out a",
    "sort --output out a",
    "sort --out=x a",
    "sort --compress-program=evil a",
    # sed
    "sed -i s/a/b/ f",
    "sed -i.bak s/a/b/ f",
    "sed -ni p f",
    "sed -Ei s/a/b/ f",
    "sed --in-place s/a/b/ f",
    "sed --in-place=.bak s/a/b/ f",
    "sed --in s/a/b/ f",
    "sed s/a/b/ -i f",
    "sed -f script.sed f",
    "sed --file=script.sed f",
    "sed 'w out' f",
    "sed '1w out' f",
    "sed '/x/W out' f",
    "sed 's/a/b/w out' f",
    "sed 's/a/b/gw out' f",
    "sed 's/a/b/e' f",
    "sed 'e rm -rf ~' f",
    "sed '1e rm -rf ~' f",
    "sed -n 'p;w out' f",
    "sed '/a/,/b/{s/x/y/;w out' f",
    "sed -e p -e 'w out' f",
    "sed --expression='w out' f",
    "sed 's|a|b|w out' f",
    "sed '1!e ls' f",
    "sed 's/a/b/k' f",
    # awk
    "awk 'BEGIN{system(\"rm -rf ~\")}'",
    "awk '{print > \"out\"}' f",
    "awk '{print >> \"out\"}' f",
    "awk '{print | \"sh\"}' f",
    "awk 'BEGIN{\"ls\" | getline x}'",
    "awk 'NR > n' f",
    "awk '@load \"evil\"'",
    "awk -f prog.awk f",
    "awk --file=prog.awk f",
    "gawk -E prog.awk f",
    "gawk -i evil.awk 1 f",
    "gawk -l evil 1 f",
    "gawk -o out 1 f",
    "gawk --pretty-print=out 1 f",
    "gawk -p 1 f",
    "gawk --profile=out 1 f",
    "gawk -d 1 f",
    "gawk --dump-variables=out 1 f",
    "awk -e 'BEGIN{system(\"x\")}'",
    # tee, uniq, xargs
    "tee out",
    "tee -a out",
    "tee ~/.bashrc",
    "uniq in out",
    "uniq -c in out",
    "xargs rm",
    "xargs",
    # rg, tar, curl
    "rg --pre cat x",
    "rg --pre=evil x",
    "tar -I 'evil' -tf a.tar",
    "tar --use-compress-program=evil -tf a.tar",
    "tar --to-command=evil -xf a.tar",
    "tar --checkpoint-action=exec=evil -tf a.tar",
    "tar tIf evil a.tar",
    "tar -F evil -tf a.tar",
    "tar --info-script=evil -tf a.tar",
    "curl -o out https://x",
    "curl -sSLo out https://x",
    "curl -O https://x/f",
    "curl --output out https://x",
    "curl --remote-name https://x/f",
    "curl -D headers https://x",
    "curl -c jar https://x",
    "curl -K config",
    "curl --config config",
    "curl --trace log https://x",
]

PLAIN = [
    "find . -name '*.py'",
    "find . -type f -newer x -print",
    "find . -print0",
    "fd -H pattern",
    "git log --oneline -5",
    "git log --output-indicator-new=+ -p",
    "git log -P",
    "git diff --stat",
    "git diff --no-ext-diff",
    "git show HEAD",
    "git status",
    "git status --short",
    "git --no-pager log",
    "git -P log",
    "git grep -n pattern",
    "git grep -o pattern",
    "git format-patch --stdout HEAD~1",
    "sort a",
    "sort -rn a",
    "sort -k 2 -t , a",
    "sort -k1o a",
    "sed s/a/b/ f",
    "sed -n p f",
    "sed -n '1,5p' f",
    "sed '1d' f",
    "sed 's/hello/world/g' f",
    "sed 's/a/b/2p' f",
    "sed -E 's/a+/c/' f",
    "sed 'y/abc/xyz/' f",
    "sed '/^x/d' f",
    "sed -e 's/a/b/' -e 's/c/d/' f",
    "sed -e :a -e N -e ba f",
    "sed '1i hello' f",
    "sed '3q' f",
    "sed 'r other' f",
    "awk 1 f",
    "awk 'NR == 1' f",
    "awk -F: 'NF == 7' /etc/passwd",
    "awk -v x=1 'NR == x' f",
    "tee",
    "tee -a",
    "uniq a",
    "uniq -c a",
    "rg pattern",
    "rg --pre-glob '*.gz' pattern",
    "tar -tzf a.tgz",
    "tar tzf a.tgz",
    "curl -sSL https://x",
    "curl -X POST -H 'Accept: x' https://x",
]


@pytest.mark.parametrize("command", RISKY)
@pytest.mark.parametrize("mode", ["ask", "accept-edits"])
def test_an_allow_rule_does_not_admit_a_risky_form(command: str, mode: str) -> None:
    decision = decide(mode, "shell__run", SHELL, {"command": command}, ALLOW, "/tmp")
    assert decision.verdict == "ask", decision


@pytest.mark.parametrize("command", PLAIN)
def test_plain_forms_are_still_allowed(command: str) -> None:
    decision = decide("ask", "shell__run", SHELL, {"command": command}, ALLOW, "/tmp")
    assert decision.verdict == "allow", decision


def test_corpus_is_large_enough() -> None:
    assert len(RISKY) >= 120
    assert len(PLAIN) >= 40


def test_the_reason_names_the_rule_and_the_word() -> None:
    decision = decide("ask", "shell__run", SHELL, {"command": "find . -delete"}, ALLOW, "/tmp")
    assert "allow shell__run 'find *' does not cover '-delete'" in decision.reason
    assert "deletes" in decision.reason


def test_a_rule_that_spells_the_risky_word_out_admits_it() -> None:
    rules = [
        Rule("allow", "shell__run", command="sed -i *"),
        Rule("allow", "shell__run", command="git -C sub status"),
        Rule("allow", "shell__run", command="tee build.log"),
    ]
    for command in ("sed -i s/a/b/ f", "git -C sub status", "tee build.log"):
        assert decide("ask", "shell__run", SHELL, {"command": command}, rules, "/tmp").verdict == "allow", command
    # ... but only where it spells it: another risky word, or the same one elsewhere, is not covered.
    for command in ("sed -i 'w out' f", "git -C sub -c core.pager=x status", "sed -n -i p f"):
        assert decide("ask", "shell__run", SHELL, {"command": command}, rules, "/tmp").verdict == "ask", command


def test_an_allow_rule_stays_literal() -> None:
    rules = [Rule("allow", "shell__run", command="git status")]
    for command in ("git -C /elsewhere status", "sudo git status", "/usr/bin/git status", "GIT status"):
        assert decide("ask", "shell__run", SHELL, {"command": command}, rules, "/tmp").verdict == "ask", command


def test_a_tool_wide_allow_rule_is_not_narrowed() -> None:
    # The user allowed every plain command; find -delete is one, as rm is.
    rules = [Rule("allow", "shell__run")]
    assert decide("ask", "shell__run", SHELL, {"command": "find . -delete"}, rules, "/tmp").verdict == "allow"


def test_deny_rules_are_unaffected() -> None:
    rules = [Rule("deny", "shell__run", command="find *")]
    assert decide("ask", "shell__run", SHELL, {"command": "find . -name x"}, rules, "/tmp").verdict == "deny"


def test_awk_programs_that_a_plain_line_can_hold_are_read_too() -> None:
    # The shell-line parser already refuses quoted '|', '>' and '(' in an allowed line; findings() does not rely on it.
    for program in ('{print > "out"}', "NR > n", '{print | "sh"}', 'BEGIN{system("x")}'):
        assert findings(("awk", program, "f")), program
    for program in ("NR > 1", "NF >= 3", "{print}"):
        assert not findings(("awk", program, "f")), program


def test_findings_point_at_the_word() -> None:
    assert [f.index for f in findings(("git", "-C", "x", "-c", "a=b", "log", "--output=o"))] == [1, 3, 6]
    assert [f.index for f in findings(("sort", "a", "-o", "out"))] == [2]
    assert findings(("ls", "-la")) == []
    assert findings(()) == []


@pytest.mark.parametrize(
    ("script", "risky"),
    [
        ("p", False),
        ("s/a/b/", False),
        ("s/w/e/g", False),
        ("s/\\//x/w out", True),
        ("y/we/ew/", False),
        ("/we/d", False),
        ("\\%w%d", False),
        ("0,/x/d", False),
        ("1~2d", False),
        ("$!N", False),
        ("a\\\nwrite this\\\nand this", False),
        ("s/a/b/;  w out", True),
        ("{p;W out\n}", True),
        ("s/a/b", True),  # unterminated: cannot be read to the end
        ("k", True),
        ("v 4.2", False),
        ("l 70", False),
        ("# e rm\np", False),
    ],
)
def test_sed_script_risk(script: str, risky: bool) -> None:
    assert bool(script_risk(script)) is risky, script_risk(script)
