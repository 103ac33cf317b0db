"""A real broker inside a test process, on an ephemeral port.

It runs its own event loop in a daemon thread, so synchronous clients
(confluent-kafka, kafka-python) and asyncio clients (aiokafka, on the test's
own loop) can both talk to it::

    with Broker() as broker:                 # or: async with Broker() as broker:
        broker.create_topic("events", partitions=3)
        ... {"bootstrap.servers": broker.bootstrap_servers} ...

Defaults differ from ``odradek serve`` only where a test suite wants them to:
a temporary data directory (removed on stop), ``127.0.0.1:0``, and
``group.initial.rebalance.delay.ms=0`` so a consumer group forms at once.
Any Kafka broker setting can be given as a keyword (``num_partitions=3``, or
``**{"log.segment.bytes": "1048576"}``). Stopping closes every socket, file
and task it opened, and joins its thread.
"""

from __future__ import annotations

import asyncio
import tempfile
import threading
from collections.abc import Coroutine, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from odradek.broker.app import BrokerApp
from odradek.broker.config import BrokerConfig
from odradek.common.metrics import render
from odradek.metadata import acl_changes, controller
from odradek.metadata.acls import AclBinding, AclFilter
from odradek.storage.fs import FileSystem
from odradek.testing.certs import DevCerts, write_dev_certs

if TYPE_CHECKING:
    from odradek.broker.net.pipeline import Stage

T = TypeVar("T")

ADMIN_PASSWORD = "admin-secret"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def _sasl_properties(users: Mapping[str, str], ssl: bool) -> dict[str, str]:
    """One SASL listener (named as its protocol) offering PLAIN and SCRAM."""
    protocol = "SASL_SSL" if ssl else "SASL_PLAINTEXT"
    plain = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
             + " ".join(f'user_{name}="{password}"' for name, password in users.items()) + ";")
    return {"listeners": f"{protocol}://127.0.0.1:0",
            "listener.security.protocol.map": f"{protocol}:{protocol}",
            **({"advertised.listeners": f"{protocol}://localhost:0"} if ssl else {}),
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            f"listener.name.{protocol.lower()}.plain.sasl.jaas.config": plain}

TEST_DEFAULTS = {"group.initial.rebalance.delay.ms": "0"}


class BrokerError(RuntimeError):
    """A request to the in-process broker failed (e.g. the topic exists)."""


class Broker:
    """``with Broker() as b: ... b.bootstrap_servers ...``"""

    def __init__(
        self, *, use_uvloop: bool = False, data_dir: str | None = None,
        fs: FileSystem | None = None, stages: list[tuple[Stage, str]] | None = None,
        ssl: bool = False, sasl: bool | Mapping[str, str] = False, acls: bool = False,
        **overrides: str
    ) -> None:
        """``fs``: the file-system seam the partition logs use (a test's wrapper of
        :class:`~odradek.storage.fs.OsFileSystem` injects faults or stalls).
        ``stages``: (stage, the stage it goes before) added to the broker's
        request pipeline (:mod:`odradek.broker.net.pipeline`). ``ssl``: one SSL
        listener on 127.0.0.1, advertised as ``localhost`` (the name its
        certificate carries), with development certificates written to a
        temporary directory (:mod:`odradek.testing.certs`; :attr:`certs`,
        :attr:`ssl_ca`, :meth:`client_config`); ``ssl.client.auth`` is Kafka's
        default, none, unless given.

        ``sasl``: the one listener is SASL_PLAINTEXT (SASL_SSL with ``ssl``)
        offering PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 to the users given
        (name → password; ``True``: none besides ``admin``), each a PLAIN user
        and a SCRAM user of both mechanisms, and ``admin`` (password
        :data:`ADMIN_PASSWORD`) always; :meth:`client_config` takes ``user=``.
        ``acls``: Kafka's StandardAuthorizer, nothing allowed without an ACL,
        ``User:admin`` a super user (:meth:`create_acls` as the operator)."""
        self._tmp = None if data_dir else tempfile.TemporaryDirectory(prefix="odradek-")
        data = data_dir or (self._tmp.name if self._tmp else "")
        props = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": data, **TEST_DEFAULTS}
        self._certs_tmp: tempfile.TemporaryDirectory[str] | None = None
        self.certs: DevCerts | None = None
        """The development certificates of an ``ssl=True`` broker."""
        if ssl:
            self._certs_tmp = tempfile.TemporaryDirectory(prefix="odradek-certs-")
            self.certs = write_dev_certs(self._certs_tmp.name)
            props.update(self.certs.broker_properties("SSL://127.0.0.1:0", "none"))
            props["advertised.listeners"] = "SSL://localhost:0"
        self.users: dict[str, str] = {}
        """SASL users (name → password) of a ``sasl`` broker."""
        if sasl:
            self.users = {"admin": ADMIN_PASSWORD, **(sasl if isinstance(sasl, Mapping) else {})}
            props.update(_sasl_properties(self.users, ssl))
        if acls:
            props.update({"authorizer.class.name": STANDARD_AUTHORIZER,
                          "super.users": "User:admin"})
        props.update({k.replace("_", "."): str(v) for k, v in overrides.items()})
        self.config = BrokerConfig.from_sources(None, props)
        self.app = BrokerApp(self.config, fs=fs, stages=stages)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._use_uvloop = use_uvloop

    @property
    def bootstrap_servers(self) -> str:
        return self.app.bootstrap_servers

    @property
    def ssl_ca(self) -> str:
        """The CA certificate (PEM) of an ``ssl=True`` broker."""
        return self._dev_certs().ca

    @property
    def ssl_certfile(self) -> str:
        """A client certificate chain (PEM) the broker's CA signed (``CN=client``)."""
        return self._dev_certs().path("client.pem")

    @property
    def ssl_keyfile(self) -> str:
        return self._dev_certs().path("client.key")

    def client_config(self, certificate: bool = True, user: str = "admin",
                      mechanism: str = "SCRAM-SHA-512") -> dict[str, str]:
        """confluent-kafka settings for this broker: TLS with the client
        certificate (or without it) on an ``ssl`` broker, SASL as ``user``
        with ``mechanism`` on a ``sasl`` one; ``{"bootstrap.servers": ...}``
        alone on a plain one."""
        conf = {"bootstrap.servers": self.bootstrap_servers}
        if self.certs is not None:
            conf.update(self.certs.librdkafka_settings())
            if not certificate or self.users:
                del conf["ssl.certificate.location"], conf["ssl.key.location"]
        if self.users:
            if user not in self.users:
                raise BrokerError(f"no SASL user {user!r} on this broker")
            conf.update({"security.protocol": "SASL_SSL" if self.certs else "SASL_PLAINTEXT",
                         "sasl.mechanism": mechanism, "sasl.username": user,
                         "sasl.password": self.users[user]})
        return conf

    def _dev_certs(self) -> DevCerts:
        if self.certs is None:
            raise BrokerError("this broker was not started with ssl=True")
        return self.certs

    @property
    def data_dir(self) -> str:
        return str(self.config.log_dir)

    def start(self) -> Broker:
        self._thread = threading.Thread(target=self._run, name="odradek-broker", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            self._thread.join()
            self._cleanup()
            raise self._error
        return self

    def _run(self) -> None:
        loop: asyncio.AbstractEventLoop
        if self._use_uvloop:
            import uvloop

            loop = uvloop.new_event_loop()
        else:
            loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main())
        except BaseException as exc:  # reported to the starting thread
            self._error = exc
            self._ready.set()
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
            loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        try:
            await self.app.start()
            if self.users:
                await self._add_scram_users()
        except BaseException:
            await self.app.stop()
            raise
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            await self.app.stop()

    async def _add_scram_users(self) -> None:
        """Every user of :attr:`users`, both SCRAM mechanisms (as the operator)."""
        from odradek.metadata import scram
        from odradek.wire import scram as scram_wire

        state = self.app.state
        assert state is not None
        ups = []
        for name, password in self.users.items():
            for mech in scram_wire.MECHANISMS.values():
                salt = f"odradek-test-{name}-{mech.id}".encode()
                ups.append(scram.Upsertion(name, mech.id, mech.min_iterations, salt,
                                           scram_wire.salted_password(
                                               mech.hash_name, password, salt,
                                               mech.min_iterations)))
        for mech_id in (1, 2):  # Kafka wants one request per mechanism and user
            these = [u for u in ups if u.mechanism == mech_id]

            def decide(image: Any, these: list[scram.Upsertion] = these) -> scram.Alteration:
                return scram.alter(image.scram, [], these)

            outcome = await state.write(decide)
            for user, (error, message) in outcome.results.items():
                if error:
                    raise BrokerError(f"SCRAM user {user}: {message}")

    def create_topic(
        self, name: str, partitions: int = 1, configs: Mapping[str, str] | None = None
    ) -> None:
        """Create a topic as CreateTopics would (same validation and errors)."""

        async def create() -> None:
            state = self.app.state
            assert state is not None
            outcome = await state.write(lambda image: controller.create_topic(
                image, name, partitions, -1, dict(configs or {}),
                node_id=state.node_id, default_partitions=state.config.get_int("num.partitions"),
                topic_id=state.ids.uuid(),
            ))
            if outcome.error:
                raise BrokerError(f"{outcome.error.name}: {outcome.message}")

        if self._loop is None:
            raise BrokerError("the broker is not running")
        asyncio.run_coroutine_threadsafe(create(), self._loop).result()

    def create_acls(self, *bindings: AclBinding) -> None:
        """Store ACL bindings as CreateAcls would (same validation), as the
        operator: no principal is checked. An invalid binding raises BrokerError."""

        async def create() -> None:
            state = self.app.state
            assert state is not None
            outcome = await state.write(
                lambda image: acl_changes.create_acls(image.acls, bindings, state.ids.uuid))
            for r in outcome.results:
                if r.error:
                    raise BrokerError(f"{r.error.name}: {r.message}")

        self._on_loop(create())

    def delete_acls(self, *filters: AclFilter) -> list[AclBinding]:
        """Remove the ACL bindings the filters match, as DeleteAcls would (as
        the operator); returns them."""

        async def delete() -> list[AclBinding]:
            state = self.app.state
            assert state is not None
            outcome = await state.write(
                lambda image: acl_changes.delete_acls(image.acls, filters))
            return [b for r in outcome.results for b in r.removed]

        return self._on_loop(delete())

    def render_metrics(self) -> str:
        """The broker's metrics registry in Prometheus text (what its metrics
        endpoint serves), rendered on the broker's loop as a scrape is."""

        async def rendered() -> str:
            return render(self.app.metrics)

        return self._on_loop(rendered())

    def _on_loop(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop is None:
            coro.close()
            raise BrokerError("the broker is not running")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join()
            self._thread = None
        self._cleanup()

    def _cleanup(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
        if self._certs_tmp is not None:
            self._certs_tmp.cleanup()
            self._certs_tmp = None

    def __enter__(self) -> Broker:
        return self.start()

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Broker:
        return await asyncio.to_thread(self.start)

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await asyncio.to_thread(self.stop)
