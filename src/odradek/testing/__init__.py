"""An in-process broker for users' test suites: ``from odradek.testing import Broker``.

``Broker`` and ``BrokerError`` are loaded on first use (PEP 562), so importing
this package (as the pytest plugin's parent package, or ``odradek`` itself)
does not load the broker (about half a second of imports).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from odradek.testing.broker import Broker, BrokerError

__all__ = ["Broker", "BrokerError"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        import importlib

        return getattr(importlib.import_module("odradek.testing.broker"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
