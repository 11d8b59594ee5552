"""The agent loop.

One run's steps (the ``Steps`` seam through which it causes effects), the approvals it waits for, and resuming
an interrupted run without repeating a side effect.
"""
