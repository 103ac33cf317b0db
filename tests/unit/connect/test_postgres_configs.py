"""The PostgreSQL connectors' settings as /config/validate reports them (no
database needed)."""

from __future__ import annotations

from typing import Any

from odradek.connect.connectors.postgres.cdc import PostgresCdcSourceConnector
from odradek.connect.connectors.postgres.polling import PostgresSourceConnector
from odradek.connect.connectors.postgres.sink import PostgresSinkConnector
from odradek.connect.plugins import load


def errors(connector: Any, props: dict[str, str]) -> dict[str, list[str]]:
    info = connector.CONFIG.config_infos(props, type(connector).__name__,
                                         connector.validate(props))
    return {c["value"]["name"]: c["value"]["errors"] for c in info["configs"]
            if c["value"]["errors"]}


def test_aliases_resolve() -> None:
    assert load("PostgresSink") is PostgresSinkConnector
    assert load("PostgresSource") is PostgresSourceConnector
    assert load("PostgresCdcSource") is PostgresCdcSourceConnector
    assert load("odradek.connect.connectors.postgres.PostgresCdcSourceConnector") \
        is PostgresCdcSourceConnector


def test_sink_names_bad_settings() -> None:
    got = errors(PostgresSinkConnector(), {"insert.mode": "merge", "delete.enabled": "true",
                                           "batch.size": "0"})
    assert set(got) == {"connection.url", "insert.mode", "delete.enabled", "batch.size"}
    assert "record_key" in got["delete.enabled"][0]
    assert errors(PostgresSinkConnector(), {"connection.url": "postgresql://h/db"}) == {}


def test_polling_source_names_bad_settings() -> None:
    got = errors(PostgresSourceConnector(), {"connection.url": "postgresql://h/db",
                                             "mode": "timestamp", "topic.prefix": "p"})
    assert set(got) == {"timestamp.column.name", "table.whitelist"}
    got = errors(PostgresSourceConnector(), {"connection.url": "postgresql://h/db",
                                             "mode": "sometimes", "topic.prefix": "p",
                                             "table.whitelist": "a"})
    assert set(got) == {"mode"}


def test_cdc_source_names_bad_settings() -> None:
    got = errors(PostgresCdcSourceConnector(), {
        "connection.url": "postgresql://h/db", "topic.prefix": "p", "slot.name": "Bad-Name",
        "publication.autocreate.mode": "filtered", "snapshot.mode": "always"})
    assert set(got) == {"slot.name", "table.include.list", "snapshot.mode"}
    assert errors(PostgresCdcSourceConnector(), {"connection.url": "postgresql://h/db",
                                                 "topic.prefix": "p"}) == {}
