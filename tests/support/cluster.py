"""The cluster harness of the tests: :mod:`odradek.testing.cluster`, re-exported
(it lives in the package so that users, and ``odradek dev chaos``, can run it)."""

from __future__ import annotations

from odradek.testing.cluster import (
    LinkProxy,
    LocalCluster,
    Node,
    free_port,
    serve_command,
    wait_for,
)

__all__ = ["LinkProxy", "LocalCluster", "Node", "free_port", "serve_command", "wait_for"]
