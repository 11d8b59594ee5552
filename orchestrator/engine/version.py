"""The agent loop's version, recorded on every run the DBOS engine starts.

DBOS's ``application_version`` is set to it: a worker dequeues and recovers only runs of its own version, so a run
started by one loop is never replayed by code whose steps may come in another order. Raise it whenever a change
to the loop, the steps or the journal could make a replay of an older run take a different path.
"""

LOOP_VERSION = "loom-loop-1"
"""The version of the step sequence the loop makes (not Loom's package version: most releases keep it)."""
