"""Durable state.

The store interface, its client of the checkpoints server, the event log that numbers and fans out events,
file snapshots and rewind.
"""
