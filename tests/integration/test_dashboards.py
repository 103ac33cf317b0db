"""The Grafana dashboard and the Prometheus alert rules under ``deploy/`` name
only metrics a running broker exports.

Every PromQL expression in the dashboard (its panels' ``targets[].expr`` and
its query variables) and in the rules is read by a small tokenizer that keeps
the metric names: identifiers that are not functions or aggregations (an
identifier followed by ``(``), keywords, label names (inside ``{…}`` or a
``by``/``without``/``on``/``ignoring``/``group_left``/``group_right`` list),
strings, numbers or durations. Each name must be a family of a real scrape of
a broker with a topic, a produced record, a consumer group's commit (so the
lag series exist) and a client quota (so the quota sensors do); a histogram's
``_bucket``/``_count``/``_sum`` counts as its family. ``up`` is the one name
Prometheus makes itself. The rules file must also be valid Prometheus rule
YAML, and the dashboard importable JSON with a Prometheus data source variable.
"""

from __future__ import annotations

import json
import re
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer, Producer

from odradek.testing import Broker
from odradek.testing.cluster import wait_for
from odradek.wire.messages.alter_client_quotas_request import (
    AlterClientQuotasRequest,
    EntityData,
    EntryData,
    OpData,
)
from tests.support.rawclient import RawClient

pytestmark = pytest.mark.timeout(180)

DEPLOY = Path(__file__).parents[2] / "deploy"
DASHBOARD = DEPLOY / "grafana" / "odradek-overview.json"
RULES = DEPLOY / "prometheus" / "odradek-alerts.yml"

PROMETHEUS_MADE = {"up"}
"""Series Prometheus writes itself for each scrape target, not the broker."""
KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left",
            "group_right", "offset", "bool", "inf", "nan", "atan2"}
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\[\]]*\]")
_LABEL_LIST = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_DURATION = re.compile(r"(?<![\w:])(?:\d+(?:ms|s|m|h|d|w|y))+(?![\w:])")
_NUMBER = re.compile(r"(?<![\w:])(?:0x[0-9a-fA-F]+|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+)")
_IDENT = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads (see the module)."""
    text = _STRING.sub(" ", expr)
    text = _MATCHERS.sub(" ", text)
    text = _RANGE.sub(" ", text)
    text = _LABEL_LIST.sub(" ", text)
    text = _DURATION.sub(" ", text)
    text = _NUMBER.sub(" ", text)
    names = set()
    for m in _IDENT.finditer(text):
        name = m.group(0)
        if name.lower() in KEYWORDS or text[m.end():].lstrip().startswith("("):
            continue
        names.add(name)
    return names


def dashboard_exprs(dashboard: dict[str, Any]) -> list[str]:
    exprs = []
    for panel in dashboard["panels"]:
        for sub in [panel, *panel.get("panels", [])]:
            exprs += [t["expr"] for t in sub.get("targets", [])]
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query":
            query = var["query"]
            q = query["query"] if isinstance(query, dict) else query
            # label_values(metric, label): the metric is the first argument.
            exprs.append(re.sub(r"^label_values\((.*),\s*\w+\)$", r"\1", q))
    return exprs


def rules_exprs(rules: dict[str, Any]) -> list[str]:
    return [str(r["expr"]) for g in rules["groups"] for r in g["rules"]]


@pytest.mark.parametrize(("expr", "names"), [
    ('sum by (topic) (rate(kafka_server_brokertopicmetrics_bytesin_total{topic!=""}[5m]))',
     {"kafka_server_brokertopicmetrics_bytesin_total"}),
    ("odradek_log_dir_free_bytes / odradek_log_dir_total_bytes < 0.1",
     {"odradek_log_dir_free_bytes", "odradek_log_dir_total_bytes"}),
    ("deriv(sum by (consumergroup, topic) (kafka_consumergroup_lag_sum)[10m:1m]) > 0 "
     "and sum without (instance) (x_y) > 1e3", {"kafka_consumergroup_lag_sum", "x_y"}),
    ('max by (request) (a{quantile="0.99",instance=~"$instance"}) * on (request) '
     "group_left (version) b offset 5m", {"a", "b"}),
    ("histogram_quantile(0.99, sum by (le) (rate(h_bucket[5m])))", {"h_bucket"}),
    ('absent(up{job="odradek"}) or count(up == bool 0)', {"up"}),
])
def test_the_tokenizer_keeps_only_metric_names(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_the_rules_are_prometheus_rule_yaml() -> None:
    rules = yaml.safe_load(RULES.read_text())
    assert set(rules) == {"groups"} and rules["groups"]
    alerts = []
    for group in rules["groups"]:
        assert set(group) <= {"name", "interval", "rules"} and group["name"] and group["rules"]
        for rule in group["rules"]:
            assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule
            assert isinstance(rule["alert"], str) and re.fullmatch(r"[A-Za-z_]\w*", rule["alert"])
            assert isinstance(rule["expr"], str) and rule["expr"].strip()
            if "for" in rule:
                assert re.fullmatch(r"(\d+(ms|s|m|h|d|w|y))+", rule["for"]), rule["for"]
            for key in ("labels", "annotations"):
                assert all(isinstance(k, str) and isinstance(v, str)
                           for k, v in rule.get(key, {}).items())
            alerts.append(rule["alert"])
    assert len(alerts) == len(set(alerts))
    exprs = " ".join(rules_exprs(rules))
    for needed in ("kafka_server_replicamanager_underreplicatedpartitions",
                   "kafka_controller_kafkacontroller_offlinepartitionscount",
                   "kafka_controller_kafkacontroller_activecontrollercount",
                   "kafka_server_replicamanager_underminisrpartitioncount",
                   "kafka_consumergroup_lag_sum", "odradek_log_dir_free_bytes", "up"):
        assert needed in exprs


def test_the_dashboard_is_importable_with_a_prometheus_data_source_variable() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
    for panel in panels:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel
        assert panel["targets"] and all(t["expr"] for t in panel["targets"])


def _scraped_families(broker: Broker) -> tuple[dict[str, str], set[str]]:
    """({family: type} from the ``# TYPE`` lines, names with a sample line)."""
    assert broker.app.endpoint is not None
    with urllib.request.urlopen(f"http://{broker.app.endpoint.address}/metrics",
                                timeout=30) as resp:
        text = resp.read().decode()
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    sampled = set(re.findall(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]", text, re.M))
    return types, sampled


def test_every_metric_the_dashboard_and_the_rules_name_is_exported() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    rules = yaml.safe_load(RULES.read_text())
    named = set().union(*map(metric_names, dashboard_exprs(dashboard) + rules_exprs(rules)))
    assert len(named) > 25
    topic, group = f"dash-{uuid.uuid4().hex[:8]}", f"dash-{uuid.uuid4().hex[:8]}"
    with Broker(**{"odradek.metrics.listener": "127.0.0.1:0"}) as broker:
        admin = RawClient(broker.bootstrap_servers)
        resp = admin.request(AlterClientQuotasRequest(validate_only=False, entries=[EntryData(
            entity=[EntityData(entity_type="client-id", entity_name="dash")],
            ops=[OpData(key="producer_byte_rate", value=1e9, remove=False)])]), 1)
        admin.sock.close()
        assert [e.error_code for e in resp.entries] == [0]
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "client.id": "dash"})
        producer.produce(topic, b"v")
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe([topic])
        try:
            msg = wait_for("the record consumed", lambda: (
                m if (m := consumer.poll(0.5)) is not None and m.error() is None else None), 60)
            consumer.commit(msg, asynchronous=False)
        finally:
            consumer.close()
        types, sampled = wait_for("the group's lag exported", lambda: (
            got if "kafka_consumergroup_lag_sum" in (got := _scraped_families(broker))[1]
            else None), 60)

    def exported(name: str) -> bool:
        if name in sampled:
            return True
        base = re.sub(r"_(bucket|count|sum)$", "", name)
        return base != name and types.get(base) in ("histogram", "summary") and base in sampled

    missing = sorted(n for n in named - PROMETHEUS_MADE if not exported(n))
    assert missing == [], f"named by deploy/ but not exported: {missing}"
