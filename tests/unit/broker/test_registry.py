"""The table of handler modules (``handlers.SERVED``) and the registrations agree,
and handler modules are imported on the first request of their API."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

import odradek.broker.handlers as handlers_pkg
from odradek.broker.handlers import SERVED
from odradek.broker.net.registry import HANDLERS, advertised, handler, load_all, registration


def test_every_handler_module_is_in_the_table_with_the_versions_it_registers() -> None:
    folder = Path(handlers_pkg.__file__).parent
    modules = sorted(p.stem for p in folder.glob("k[0-9][0-9]_*.py"))
    assert sorted(module for module, _ in SERVED.values()) == modules
    loaded = load_all()
    assert sorted(loaded) == sorted(SERVED)
    for key, (module, (lo, hi)) in SERVED.items():
        reg = loaded[key]
        assert (reg.api_key, reg.min_version, reg.max_version) == (key, lo, hi)
        assert reg.handle.__module__ == f"odradek.broker.handlers.{module}"
        assert module.startswith(f"k{key:02d}_")


def test_the_table_is_what_tools_handler_table_writes() -> None:
    from tools import handler_table

    assert handler_table.main(["--check"]) == 0


def test_advertised_is_the_table_by_key() -> None:
    assert advertised() == [(k, lo, hi) for k, (_, (lo, hi)) in sorted(SERVED.items())]


def test_an_unserved_api_has_no_registration() -> None:
    assert registration(4) is None  # LeaderAndIsr: ZooKeeper mode, not served
    assert registration(9999) is None


def test_a_registration_that_differs_from_the_table_is_refused() -> None:
    async def fn(ctx: object, request: object) -> None:
        return None

    with pytest.raises(RuntimeError, match=r"differ from handlers\.SERVED"):
        handler(9999, (0, 1), access=())(fn)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="registered twice"):
        load_all()
        handler(18, (0, 3), access=())(fn)  # type: ignore[arg-type]


def test_registration_imports_the_module_on_first_use(monkeypatch: pytest.MonkeyPatch) -> None:
    key, (module, _) = 60, SERVED[60]
    name = f"odradek.broker.handlers.{module}"
    load_all()
    # forget the module and its registration, as in a broker that has not served it yet
    monkeypatch.delitem(sys.modules, name)
    monkeypatch.delitem(HANDLERS, key)
    monkeypatch.delattr(handlers_pkg, module)
    reg = registration(key)
    assert reg is not None and name in sys.modules
    assert reg.handle is importlib.import_module(name).handle


def test_every_handler_declares_what_its_requests_touch() -> None:
    from odradek.broker.net.registry import handler

    regs = load_all()
    undeclared = [key for key, reg in regs.items()
                  if not reg.access and key not in (17, 18, 36)]
    assert undeclared == []
    for key in (17, 18, 36):  # ApiVersions and SASL: answered before authentication
        assert regs[key].access == ()
    # The inter-node APIs are CLUSTER_ACTION on the cluster, as in Kafka.
    for key in (52, 53, 54, 56, 59, 62, 63, 67):
        assert [(a.operation, a.resource) for a in regs[key].access] == [
            ("CLUSTER_ACTION", "CLUSTER")], key
    assert {(a.operation, a.resource) for a in regs[0].access} == {
        ("WRITE", "TOPIC"), ("WRITE", "TRANSACTIONAL_ID")}

    async def fn(ctx: object, request: object) -> None:
        return None

    with pytest.raises(RuntimeError, match="declares its access"):
        handler(9998, (0, 1))(fn)  # type: ignore[arg-type]
