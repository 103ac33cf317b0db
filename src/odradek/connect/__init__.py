"""Odradek Connect: a Kafka Connect–compatible runtime in Python.

Layers inside the package (each imports only those below it):

- ``runtime/`` — workers (standalone and distributed), the REST API, the task
  threads, the internal topics; the only part that does I/O.
- ``connectors/`` — the shipped connectors (FileStream, PostgreSQL).
- ``transforms/``, ``converters/``, ``errors.py`` — single message transforms,
  predicates, converters and error handling: pure functions of records.
- ``api.py``, ``data.py``, ``config.py``, ``plugins.py`` — the task model a
  connector is written against, the record and schema model, the declarative
  config definitions that answer ``/config/validate``, and plugin lookup.

Connect speaks only the Kafka protocol (through real clients), as a Kafka
Connect worker does, so it runs against Apache Kafka as well as Odradek.
"""
