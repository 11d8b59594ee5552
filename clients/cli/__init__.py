"""The ``loom`` command line."""
