"""``odradek dev certs DIR``: development TLS certificates (:mod:`odradek.testing.certs`),
and the settings that use them, printed for a broker and for clients.

It refuses to overwrite: when any of the files exists it says which and
stops (``--force`` writes them all anew).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from odradek.cli.common import CliError


def register(verbs: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    certs = verbs.add_parser(
        "certs", help="write a development CA, broker and client certificates (TLS)")
    certs.add_argument("dir", type=Path, help="where to write them (created if missing)")
    certs.add_argument("--force", action="store_true", help="overwrite existing files")
    certs.add_argument("--host", action="append", default=[], metavar="NAME",
                       help="a host name or IP address for the broker certificate "
                            "(repeatable; default localhost and 127.0.0.1)")
    certs.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from odradek.testing.certs import PASSWORD, write_dev_certs

    hosts = tuple(args.host) or ("localhost", "127.0.0.1")
    try:
        certs = write_dev_certs(args.dir, force=args.force, hosts=hosts)
    except FileExistsError as exc:
        raise CliError(f"{exc} exists; use --force to write new certificates") from None
    except OSError as exc:
        raise CliError(f"cannot write to {args.dir}: {exc.strerror or exc}") from None
    host = hosts[0]
    out = [f"Wrote a CA, a broker and a client certificate to {args.dir}/ "
           f"(PKCS12 password: {PASSWORD}).", "",
           "# broker: server.properties",
           *(f"{k}={v}" for k, v in certs.broker_properties(f"SSL://{host}:9093").items()), "",
           "# Java clients, `odradek ... --command-config client.properties`",
           *(f"{k}={v}" for k, v in certs.java_client_properties().items()), "",
           "# confluent-kafka / librdkafka / kcat (-X key=value)",
           f"bootstrap.servers={host}:9093",
           *(f"{k}={v}" for k, v in certs.librdkafka_settings().items()), "",
           "# kafka-python / aiokafka (aiokafka.helpers.create_ssl_context(cafile=..., "
           "certfile=..., keyfile=...))",
           *(f"{k}={v}" for k, v in certs.kafka_python_settings().items())]
    print("\n".join(out))
    return 0
