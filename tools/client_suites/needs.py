"""pytest plugin: skip the tests whose security feature is switched off.

The runner passes ``ODRADEK_SUITES_NEEDS`` (``file::test=feature;...``, from
:data:`tools.client_suites.__main__.SUITES`) and ``ODRADEK_SUITES_SECURITY``
(the switches); a test that needs a feature that is off is marked skipped
with the reason, before it starts a broker.
"""

from __future__ import annotations

import os

import pytest

from tools.client_suites.broker import features_from_env


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    needs = dict(item.split("=", 1) for item in
                 filter(None, os.environ.get("ODRADEK_SUITES_NEEDS", "").split(";")))
    on = features_from_env()
    for item in items:
        feature = needs.get(item.nodeid.split("[")[0])
        if feature and feature not in on:
            item.add_marker(pytest.mark.skip(
                reason=f"needs {feature}, off in tools/client_suites/security.py "
                       "(switch it on when it lands)"))
