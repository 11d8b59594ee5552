"""What each model call sees.

The system prompt's layers, the history rebuilt from the store, cut tool results, the watermark, and compaction.
"""
