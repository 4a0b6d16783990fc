"""Lessons: rules distilled from experiences, served only when evidence says they help.

This package holds consolidation (``consolidate.py``, no LLM), the LLM judge seam (``judge.py``),
the evidence gate (``gate.py``), signing (``sign.py``) and the lifecycle (``lifecycle.py``).
:class:`LessonsMixin` adds the lesson methods to :class:`mimir_core.Mimir`.
"""

from __future__ import annotations

from .api import LessonsMixin

__all__ = ["LessonsMixin"]
