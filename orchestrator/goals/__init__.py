"""Goals that span sessions: work sessions toward a goal, each judged by a grader child against every criterion.

:mod:`~orchestrator.goals.budget` reads and checks a goal's budget, :mod:`~orchestrator.goals.state` folds a
goal's events into its state and report, :mod:`~orchestrator.goals.grading` writes the briefs and reads the
grader's verdict, :mod:`~orchestrator.goals.controller` runs the attempts, :mod:`~orchestrator.goals.face` is what
the controller needs of Loom's face. The host's goals are :mod:`orchestrator.runtime.goals`; docs/long-work.md
says how they are used.
"""
