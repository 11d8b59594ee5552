"""The runtime.

Sessions (actors that serialise turns, compaction and model switches), the host that owns them and their
background runs, and the embedded runtime that wires them to a store.
"""
