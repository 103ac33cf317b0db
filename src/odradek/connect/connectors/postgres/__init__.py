"""PostgreSQL connectors: a sink (insert/upsert/delete by key), a polling
source (the JDBC source's modes) and a change data capture source (logical
decoding with ``pgoutput``, Debezium-shaped events).

Driver: psycopg2 (``psycopg2-binary``, the ``connect`` extra). It is the one
maintained Python driver with PostgreSQL's streaming replication protocol
(``LogicalReplicationConnection``: ``START_REPLICATION``, standby status
updates with a confirmed flush LSN) as well as ordinary SQL with fast batched
statements (``execute_values``), so all three connectors use one driver:
psycopg 3 has no replication protocol, asyncpg neither, and pg8000's
replication support is less used and pure Python (slower for the sink's bulk
writes). psycopg2 does not decode pgoutput; :mod:`.pgoutput` does.
"""
