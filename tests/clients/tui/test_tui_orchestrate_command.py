"""``/orchestrate`` against a real daemon: the graph block follows the session's task events, then a cancel ends it.

The planner, executors and reviewer are the built-in roles run by scripted models (installed as the user's agent
definitions); the executors take long enough that ``/orchestrate cancel`` finds them running.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from clients.tui.commands import Completions, candidates
from clients.tui.graph_strip import GraphStrip
from clients.tui.graph_view import GraphBlock
from clients.tui.notice_line import NoticeLine
from tests.clients.cli_support import make_project
from tests.clients.tui.support import connected, tui, type_message, until
from tests.orchestrator.daemon.daemon_process import running_daemon
from tests.orchestrator.face.orchestration_support import install_roles

pytestmark = pytest.mark.timeout(120)


async def orchestrated(home: Path, work: Path) -> tuple[list[str], str, list[str], list[str]]:
    """The graph's lines and the strip over the prompt while its executors run, the lines once cancelled, and the
    notices shown."""
    app = tui(home, work, "scripted:demo")
    async with app.run_test(size=(100, 30)) as pilot:
        await connected(pilot)
        await type_message(pilot, "/orchestrate write the log")
        await until(pilot, lambda: bool(app.query(GraphBlock)), "the graph's block")
        (block,) = app.query(GraphBlock)
        await until(pilot, lambda: block.status == "running", "the planned graph")
        await until(pilot, lambda: all(t.state == "running" for t in list(block.tasks.values())[:2]), "a and b to run")
        running = block.text.splitlines()
        strip = app.query_one(GraphStrip)
        await until(pilot, lambda: "● b" in strip.text, "the strip to show the tasks running")
        strip_running = strip.text if strip.display else ""
        await type_message(pilot, "/orchestrate cancel")
        await until(pilot, lambda: block.status == "cancelled", "the graph to end cancelled")
        assert not strip.display  # the block has the report: the strip hides
        await type_message(pilot, "/orchestrate")

        def notices() -> list[str]:
            return [n.text for n in app.conversation.query(NoticeLine) if "orchestration" in n.text]

        await until(pilot, lambda: len(notices()) == 3, "the status of /orchestrate")
        return running, strip_running, block.text.splitlines(), notices()


def test_orchestrate_shows_the_graph_live_and_cancel_ends_it(tmp_path: Path) -> None:
    work, home = make_project(tmp_path / "work"), tmp_path / "home"
    install_roles(home, tmp_path, executor=[{"delay_s": 60, "text": "Appended."}])
    with running_daemon(home, tmp_path):
        running, strip, ended, notices = anyio.run(orchestrated, home, work)
    assert running[0].endswith("[running · 0/3 passed]") and running[1] == "write the log"
    assert [line.split()[:3] for line in running[2:5]] == [
        ["●", "a", "running"],
        ["●", "b", "running"],
        ["·", "c", "pending"],
    ]
    assert running[4].endswith("← a, b")
    oid = running[0].split()[2]
    assert strip == f"orchestration {oid} running · 0/3 passed  ● a  ● b  · c  (/orchestrate cancel ends it)"
    assert ended[0].endswith("[cancelled · 0/3 passed]")
    assert [line.split()[:3] for line in ended[2:5]] == [["-", "a", "cancelled"]] + [
        ["-", "b", "cancelled"],
        ["-", "c", "cancelled"],
    ]
    assert "started: its graph shows here as it runs (/orchestrate cancel ends it)" in notices[0]
    assert notices[1] == f"orchestration {oid}: cancelled"
    assert notices[2].splitlines()[0] == f"orchestration {oid}: cancelled - cancelled from the TUI", notices


def test_orchestrate_and_review_are_offered_and_tab_completes_cancel() -> None:
    known = Completions()
    assert [c.text for c in candidates("/or", known)] == ["/orchestrate"]
    assert [c.text for c in candidates("/rev", known)] == ["/review"]
    assert [c.text for c in candidates("/orchestrate ca", known)] == ["/orchestrate cancel"]
    assert candidates("/orchestrate add a flag", known) == []  # a goal is not completed into a cancel
