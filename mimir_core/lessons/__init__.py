"""Lessons: rules distilled from experiences, served only when evidence says they help.

This package holds consolidation (``consolidate.py``, no LLM), the LLM judge seam (``judge.py``),
the evidence gate (``gate.py``), signing (``sign.py``) and the lifecycle (``lifecycle.py``).
``api.py`` holds the bodies of the lesson methods that :class:`mimir_core.Mimir` declares.
"""
