"""The ``loom`` command's exit codes, in a module of their own so that commands need not import the parser."""

EXIT_OK = 0
"""The run completed, or the command did what it was asked."""
EXIT_FAILED = 1
"""The run failed (or the store did)."""
EXIT_USAGE = 2
"""Bad usage or configuration: nothing ran."""
EXIT_CANCELLED = 130
"""Cancelled by Ctrl-C or SIGTERM."""
