"""Crash points for broker code: :mod:`odradek.common.crashpoints` (where the
points are listed), re-exported so that ``from odradek.broker import
crashpoints`` keeps working."""

from __future__ import annotations

from odradek.common.crashpoints import reach

__all__ = ["reach"]
