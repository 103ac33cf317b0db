"""API keys, their message classes and the header-version rules.

Header versions (Kafka's protocol guide, KIP-482):

* request header v2 (client id, then tagged fields) for flexible versions, v1
  otherwise (v0, no client id, only for ControlledShutdown v0);
* response header v1 (correlation id, then tagged fields) for flexible
  versions, v0 otherwise; ApiVersions responses always use v0, so a client
  that does not yet know the broker's versions can read them.
"""

from __future__ import annotations

import importlib
from functools import cache

from odradek.wire.messages.api_table import APIS
from odradek.wire.schema import Message, in_range

API_VERSIONS_KEY = 18
CONTROLLED_SHUTDOWN_KEY = 7


def api_name(api_key: int) -> str:
    entry = APIS.get(api_key)
    return entry[0] if entry else f"Unknown({api_key})"


def is_known(api_key: int) -> bool:
    return api_key in APIS


def spec_versions(api_key: int) -> tuple[int, int]:
    """The versions Kafka's spec defines (not what the broker advertises)."""
    return APIS[api_key][3]


def is_flexible(api_key: int, api_version: int) -> bool:
    return in_range(api_version, APIS[api_key][4])


def request_header_version(api_key: int, api_version: int) -> int:
    if api_key == CONTROLLED_SHUTDOWN_KEY and api_version == 0:
        return 0
    return 2 if is_flexible(api_key, api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == API_VERSIONS_KEY:
        return 0
    return 1 if is_flexible(api_key, api_version) else 0


@cache
def _load(module: str) -> type[Message]:
    mod = importlib.import_module(f"odradek.wire.messages.{module}")
    for name in mod.__all__:
        obj = getattr(mod, name)
        if isinstance(obj, type) and issubclass(obj, Message) and obj.MESSAGE_TYPE:
            return obj
    raise LookupError(f"no message class in {module}")


def request_class(api_key: int) -> type[Message]:
    return _load(APIS[api_key][1])


def response_class(api_key: int) -> type[Message]:
    return _load(APIS[api_key][2])
