"""Loom's clients: the command line and (later) the Textual TUI."""
