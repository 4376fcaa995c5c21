"""SoloFlow's built-in behaviour, shipped as plugins through the ``soloflow`` entry points.

Each is ``trylast`` so that a user's plugin wins, and can be blocked by its entry-point
name (``SOLOFLOW_BLOCK_PLUGINS=keyword_classifier``).
"""
