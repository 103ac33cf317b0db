"""format("odradek") against a secured broker (SASL_SSL, SCRAM, ACLs on), with
the Java option names a Spark job uses for Kafka (``kafka.security.protocol``,
``kafka.sasl.jaas.config``, ``kafka.ssl.truststore.*``): a batch write and a
batch read as a user whose ACLs allow them (users without them are refused as
by any client: tests/integration/security)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from odradek.metadata.acls import AclBinding
from odradek.testing.broker import Broker

pytestmark = pytest.mark.spark

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


@pytest.fixture(scope="module")
def secured() -> Iterator[Broker]:
    with Broker(ssl=True, sasl={"etl": "etl-pw"}, acls=True) as b:
        b.create_topic("secured-events", partitions=2)
        # etl: WRITE and READ on the topic, READ on any group it uses (prefix "spark-").
        b.create_acls(AclBinding(2, "secured-events", 3, "User:etl", "*", 4, 3),
                      AclBinding(2, "secured-events", 3, "User:etl", "*", 3, 3),
                      AclBinding(3, "spark-", 4, "User:etl", "*", 3, 3))
        yield b


def options(b: Broker, user: str, password: str) -> dict[str, str]:
    return {"kafka.bootstrap.servers": b.bootstrap_servers,
            "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config":
                f'{SCRAM} required username="{user}" password="{password}";',
            "kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": b.ssl_ca}


def test_a_spark_job_writes_and_reads_a_secured_broker(spark: Any, secured: Broker) -> None:
    etl = options(secured, "etl", "etl-pw")
    df = spark.createDataFrame([(f"k{i}", f"v{i}") for i in range(20)], "key string, value string")
    (df.write.format("odradek").options(**etl).option("topic", "secured-events")
     .mode("append").save())
    back = (spark.read.format("odradek").options(**etl).option("subscribe", "secured-events")
            .load().collect())
    assert sorted(bytes(r.value).decode() for r in back) == sorted(f"v{i}" for i in range(20))
