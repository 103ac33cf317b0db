"""``pipelines/cdc_demo.py`` end to end: a real PostgreSQL's ``orders`` changes
(snapshot, inserts, updates of amounts and customers, deletes down to a
customer with no orders) flow through the CDC source, a Spark streaming
aggregation over ``format("odradek")`` and the PostgreSQL sink into
``customer_totals``, which must equal the totals computed from ``orders``;
and a database that already has the tables is refused in one line."""

from __future__ import annotations

from typing import Any

import pytest

from odradek.testing.broker import Broker
from pipelines import cdc_demo

pytestmark = pytest.mark.spark


@pytest.mark.slow
def test_cdc_demo_totals_equal_the_orders(spark: Any, kafka: Broker, postgres_url: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    code = cdc_demo.main(["--bootstrap-server", kafka.bootstrap_servers,
                          "--postgres-dsn", postgres_url, "--prefix", "cdcdemo",
                          "--timeout", "240"], spark=spark)
    out = capsys.readouterr().out
    assert code == 0, out
    want = cdc_demo.expected_totals(postgres_url)
    assert cdc_demo.table_totals(postgres_url) == want
    assert len(want) == len(cdc_demo.CUSTOMERS) - 1  # the last customer lost every order
    assert cdc_demo.CUSTOMERS[-1] not in cdc_demo.table_totals(postgres_url)  # tombstone
    assert "customer_totals equals the totals of orders" in out
    import psycopg2

    conn = psycopg2.connect(postgres_url)
    with conn.cursor() as cur:  # the demo dropped its slot (a kept one holds WAL)
        cur.execute("SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'cdc_demo%'")
        assert cur.fetchone()[0] == 0
    conn.close()


def test_cdc_demo_refuses_a_database_that_has_the_tables(
        kafka: Broker, postgres_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    import psycopg2

    conn = psycopg2.connect(postgres_url)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE orders (id integer PRIMARY KEY)")
    conn.close()
    code = cdc_demo.main(["--bootstrap-server", kafka.bootstrap_servers,
                          "--postgres-dsn", postgres_url])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "table orders already exists" in err, err
