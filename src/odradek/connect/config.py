"""Declarative configuration definitions (Kafka's ``ConfigDef``).

A :class:`ConfigDef` is a list of :class:`ConfigKey`: name, type, default,
importance, documentation, group and an optional validator. It parses a flat
``str -> str`` map into typed values and answers ``/config/validate`` and
``/connector-plugins/{p}/config`` in Kafka Connect's JSON shapes:

- a key's definition (``ConfigKeyInfo``): ``{"name", "type", "required",
  "default_value", "importance", "documentation", "group", "order_in_group",
  "width", "display_name", "dependents"}`` — ``type`` in upper case
  (``STRING``, ``INT``, ``LONG``, ``DOUBLE``, ``BOOLEAN``, ``LIST``,
  ``PASSWORD``, ``CLASS``), ``default_value`` a string or null;
- a value (``ConfigValueInfo``): ``{"name", "value", "recommended_values",
  "errors", "visible"}``.

Types parse as Kafka's do: INT/LONG decimal integers, DOUBLE floats, BOOLEAN
``true``/``false`` (any case), LIST comma-separated with surrounding spaces
trimmed (empty string: empty list), PASSWORD shown as ``[hidden]``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

STRING = "STRING"
INT = "INT"
LONG = "LONG"
DOUBLE = "DOUBLE"
BOOLEAN = "BOOLEAN"
LIST = "LIST"
PASSWORD = "PASSWORD"
CLASS = "CLASS"

HIGH = "HIGH"
MEDIUM = "MEDIUM"
LOW = "LOW"

NO_DEFAULT = object()
"""A key without a default is required."""

Validator = Callable[[str, Any], None]
"""Raises ValueError with a message when the parsed value is not allowed."""


class ConfigError(ValueError):
    """A setting is missing or invalid; ``name`` says which."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}")
        self.name = name
        self.message = message


def parse(name: str, type_: str, raw: Any) -> Any:
    """``raw`` (a string, or an already-typed value) as ``type_``."""
    if raw is None:
        return None
    if not isinstance(raw, str):
        if type_ == LIST and isinstance(raw, list | tuple):
            return [str(v) for v in raw]
        return raw
    text = raw.strip()
    try:
        if type_ in (INT, LONG):
            return int(text)
        if type_ == DOUBLE:
            return float(text)
        if type_ == BOOLEAN:
            if text.lower() not in ("true", "false"):
                raise ValueError
            return text.lower() == "true"
        if type_ == LIST:
            return [p.strip() for p in text.split(",")] if text else []
    except ValueError:
        raise ConfigError(name, f"Invalid value {raw} for configuration {name}: "
                          f"Not a valid {type_.lower()}") from None
    return raw if type_ == PASSWORD else text


def one_of(*allowed: str) -> Validator:
    def check(name: str, value: Any) -> None:
        if value is not None and str(value) not in allowed:
            raise ValueError(f"String must be one of: {', '.join(allowed)}")
    return check


def at_least(low: float) -> Validator:
    def check(name: str, value: Any) -> None:
        if value is not None and value < low:
            raise ValueError(f"Value must be at least {low}")
    return check


def non_empty(name: str, value: Any) -> None:
    if value is not None and str(value).strip() == "":
        raise ValueError("String must be non-empty")


@dataclass(frozen=True, slots=True)
class ConfigKey:
    name: str
    type: str
    default: Any = NO_DEFAULT
    importance: str = MEDIUM
    documentation: str = ""
    validator: Validator | None = None
    group: str | None = None
    order_in_group: int = -1
    width: str = "NONE"
    display_name: str = ""
    dependents: tuple[str, ...] = ()

    @property
    def required(self) -> bool:
        return self.default is NO_DEFAULT

    def info(self) -> dict[str, Any]:
        default = None if self.required or self.default is None else (
            ",".join(self.default) if isinstance(self.default, list | tuple)
            else str(self.default).lower() if isinstance(self.default, bool)
            else str(self.default))
        return {"name": self.name, "type": self.type, "required": self.required,
                "default_value": default, "importance": self.importance,
                "documentation": self.documentation, "group": self.group,
                "order_in_group": self.order_in_group, "width": self.width,
                "display_name": self.display_name or self.name,
                "dependents": list(self.dependents)}


@dataclass(frozen=True)
class ConfigDef:
    keys: tuple[ConfigKey, ...] = ()
    _by_name: dict[str, ConfigKey] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._by_name.update({k.name: k for k in self.keys})

    def define(self, *keys: ConfigKey) -> ConfigDef:
        """A new definition with ``keys`` added (or replacing same-named ones)."""
        names = {k.name for k in keys}
        return ConfigDef(tuple(k for k in self.keys if k.name not in names) + keys)

    def __add__(self, other: ConfigDef) -> ConfigDef:
        return self.define(*other.keys)

    def __contains__(self, name: str) -> bool:
        return name in self._by_name

    def __getitem__(self, name: str) -> ConfigKey:
        return self._by_name[name]

    def parse(self, props: Mapping[str, Any]) -> dict[str, Any]:
        """Every defined key's typed value (the default where unset); raises
        :class:`ConfigError` for the first missing or invalid one."""
        out: dict[str, Any] = {}
        for key in self.keys:
            out[key.name] = self._value(key, props)
        return out

    def _value(self, key: ConfigKey, props: Mapping[str, Any]) -> Any:
        if key.name in props:
            value = parse(key.name, key.type, props[key.name])
        elif key.required:
            raise ConfigError(key.name, f"Missing required configuration \"{key.name}\" "
                              "which has no default value.")
        else:
            value = key.default
        if key.validator is not None:
            try:
                key.validator(key.name, value)
            except ValueError as e:
                raise ConfigError(key.name, f"Invalid value {props.get(key.name)} for "
                                  f"configuration {key.name}: {e}") from None
        return value

    def validate(self, props: Mapping[str, Any]) -> dict[str, list[str]]:
        """Errors by key name (every key listed, most with no errors)."""
        errors: dict[str, list[str]] = {}
        for key in self.keys:
            try:
                self._value(key, props)
                errors[key.name] = []
            except ConfigError as e:
                errors[key.name] = [e.message]
        return errors

    def config_infos(self, props: Mapping[str, Any], name: str,
                     extra_errors: Mapping[str, Iterable[str]] | None = None
                     ) -> dict[str, Any]:
        """The ``/config/validate`` answer for ``props`` (``name``: the plugin's
        class name), with ``extra_errors`` (the connector's own checks) added."""
        errors = self.validate(props)
        for k, errs in (extra_errors or {}).items():
            errors.setdefault(k, []).extend(errs)
        configs = []
        groups: list[str] = []
        for key in self.keys:
            if key.group and key.group not in groups:
                groups.append(key.group)
            raw = props.get(key.name)
            shown = "[hidden]" if key.type == PASSWORD and raw is not None else raw
            configs.append({"definition": key.info(), "value": {
                "name": key.name, "value": shown, "recommended_values": [],
                "errors": errors.get(key.name, []), "visible": True}})
        return {"name": name, "error_count": sum(len(e) for e in errors.values()),
                "groups": groups, "configs": configs}
