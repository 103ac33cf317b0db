"""Observability: the metrics and health endpoint (``odradek.metrics.listener``)."""
