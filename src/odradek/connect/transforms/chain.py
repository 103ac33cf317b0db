"""A connector's transformation chain, built from its flat settings.

Settings (Kafka's): ``transforms=a,b`` (run in that order);
``transforms.<a>.type`` (a class name, see :mod:`odradek.connect.plugins`)
and ``transforms.<a>.<setting>`` (given to the transform with the prefix
removed, ``type`` included, ``predicate`` and ``negate`` left out);
``transforms.<a>.predicate=<p>`` and ``transforms.<a>.negate`` (false): run
``a`` only on records the predicate matches (with negate: does not match);
``predicates=p,q``, ``predicates.<p>.type`` and ``predicates.<p>.<setting>``.

The runtime uses::

    errors = validate_transforms(props)        # {"transforms.a.type": ["..."], ...}
    chain = TransformChain.from_props(props)    # raises ConfigError naming the setting
    record = chain.apply(record)                # None: a transform dropped it
    chain.close()

``apply`` takes an optional ``run(class_name, thunk)`` through which each
transform is called, so the runtime can wrap every stage in
``ErrorHandler.run("TRANSFORMATION", class_name, thunk, ...)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from odradek.connect import plugins
from odradek.connect.config import BOOLEAN, LIST, ConfigError, parse
from odradek.connect.data import ConnectRecord
from odradek.connect.transforms.base import Predicate, Transformation

Runner = Callable[[str, Callable[[], ConnectRecord | None]], ConnectRecord | None]


@dataclass(slots=True)
class Stage:
    alias: str
    class_name: str
    transform: Transformation[Any]
    predicate: Predicate[Any] | None = None
    negate: bool = False

    def applies_to(self, record: ConnectRecord) -> bool:
        return self.predicate is None or self.predicate.test(record) != self.negate


def _sub(props: Mapping[str, str], prefix: str) -> dict[str, str]:
    return {k[len(prefix):]: v for k, v in props.items() if k.startswith(prefix)}


def _missing(name: str) -> ConfigError:
    return ConfigError(name, f"Missing required configuration \"{name}\" which has no "
                       "default value.")


def _instance(props: Mapping[str, str], kind: str, alias: str, base: type) -> Any:
    prefix = f"{kind}.{alias}."
    type_key = prefix + "type"
    class_name = props.get(type_key, "").strip()
    if not class_name:
        raise _missing(type_key)
    try:
        cls = plugins.load(class_name)
    except plugins.PluginNotFound:
        raise ConfigError(type_key, f"Invalid value {class_name} for configuration "
                          f"{type_key}: Class {class_name} could not be found.") from None
    if not issubclass(cls, base):
        raise ConfigError(type_key, f"{class_name} is not a {base.__name__}")
    obj: Any = cls()
    sub = _sub(props, prefix)
    sub.pop("predicate", None)
    sub.pop("negate", None)
    try:
        obj.configure(sub)
    except ConfigError as e:
        raise ConfigError(prefix + e.name, e.message) from None
    except ValueError as e:
        raise ConfigError(type_key, str(e)) from None
    return obj


def _aliases(props: Mapping[str, str], key: str) -> list[str]:
    aliases: list[str] = parse(key, LIST, props.get(key, ""))
    if len(set(aliases)) != len(aliases) or "" in aliases:
        raise ConfigError(key, f"Invalid value {props.get(key)} for configuration {key}: "
                          "Duplicate or empty alias provided.")
    return aliases


def _build(props: Mapping[str, str], errors: dict[str, list[str]] | None
           ) -> list[Stage]:
    def fail(e: ConfigError) -> None:
        if errors is None:
            raise e
        errors.setdefault(e.name, []).append(e.message)

    stages: list[Stage] = []
    predicates: dict[str, Predicate[Any]] = {}
    try:
        pred_aliases = _aliases(props, "predicates")
    except ConfigError as e:
        fail(e)
        pred_aliases = []
    for p in pred_aliases:
        try:
            predicates[p] = _instance(props, "predicates", p, Predicate)
        except ConfigError as e:
            fail(e)
    try:
        aliases = _aliases(props, "transforms")
    except ConfigError as e:
        fail(e)
        aliases = []
    for a in aliases:
        try:
            transform = _instance(props, "transforms", a, Transformation)
            pred_key, negate_key = f"transforms.{a}.predicate", f"transforms.{a}.negate"
            pred_alias = props.get(pred_key, "").strip()
            predicate = None
            if pred_alias:
                if pred_alias not in pred_aliases:
                    raise ConfigError(pred_key, f"Invalid value {pred_alias} for "
                                      f"configuration {pred_key}: there is no predicate "
                                      f"\"{pred_alias}\" in \"predicates\"")
                predicate = predicates.get(pred_alias)
            negate = bool(parse(negate_key, BOOLEAN, props.get(negate_key, "false")))
            stages.append(Stage(a, props[f"transforms.{a}.type"].strip(), transform,
                                predicate, negate))
        except ConfigError as e:
            fail(e)
    return stages


def validate_transforms(props: Mapping[str, str]) -> dict[str, list[str]]:
    """Errors by setting name (only settings with errors are listed)."""
    errors: dict[str, list[str]] = {}
    for stage in _build(props, errors):
        stage.transform.close()
    return errors


class TransformChain:
    def __init__(self, stages: list[Stage]) -> None:
        self.stages = stages

    @classmethod
    def from_props(cls, props: Mapping[str, str]) -> TransformChain:
        """The chain of a connector's settings; raises :class:`ConfigError`
        naming the first bad setting."""
        return cls(_build(props, None))

    def apply(self, record: ConnectRecord, run: Runner | None = None
              ) -> ConnectRecord | None:
        current: ConnectRecord | None = record
        for stage in self.stages:
            assert current is not None
            if not stage.applies_to(current):
                continue
            r = current
            if run is None:
                current = stage.transform.apply(r)
            else:
                current = run(stage.class_name,
                              lambda s=stage, r=r: s.transform.apply(r))  # type: ignore[misc]
            if current is None:
                return None
        return current

    def close(self) -> None:
        closed: set[int] = set()
        for stage in self.stages:
            for obj in (stage.transform, stage.predicate):
                if obj is not None and id(obj) not in closed:
                    closed.add(id(obj))
                    obj.close()
