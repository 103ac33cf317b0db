"""Screenshots of every page of the web console, for the docs.

Starts a real broker (SASL with ACLs, metrics endpoint on), fills it with a
few topics, records, consumer groups (one with lag, one active), ACLs,
quotas and SCRAM users, starts ``odradek console`` on it with the admin's
client settings and ``--metrics-url``, lets the charts gather samples while
traffic flows, and saves one 1280x800 PNG per page into ``docs/console/``
through Debian's headless Chromium::

    python -m tools.console_screenshots [--out docs/console]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from odradek.client.access import Acl, alter_quota, create_acl
from odradek.client.client import KafkaClient
from odradek.client.security import ClientSecurity
from odradek.console.app import ConsoleServer
from odradek.console.state import Console
from odradek.testing.broker import ADMIN_PASSWORD, Broker

PAGES = [
    ("overview", "/"), ("topics", "/topics"), ("topic", "/topics/orders"),
    ("messages", "/topics/orders/messages?from=start&filter=widget-1&limit=12"),
    ("tail", "/topics/orders/messages?from=end&limit=1"),
    ("groups", "/groups"), ("group", "/groups/shipping"), ("group-active", "/groups/analytics"),
    ("acls", "/acls"), ("quotas", "/quotas"), ("users", "/users"),
]


def _admin_properties() -> dict[str, str]:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
                                f'required username="admin" password="{ADMIN_PASSWORD}";'}


def _fill(broker: Broker, conf: dict[str, str]) -> None:
    broker.create_topic("orders", partitions=3)
    broker.create_topic("payments", partitions=2)
    broker.create_topic("customers", partitions=1, configs={"cleanup.policy": "compact"})
    p = Producer(conf)
    for i in range(60):
        p.produce("orders", key=f"customer-{i % 7}", value=json.dumps(
            {"order": i, "item": f"widget-{i}", "qty": i % 4 + 1, "eur": round(9.5 * i, 2)}),
            headers=[("source", b"web")])
        p.produce("payments", key=f"pay-{i}", value=f"payment {i} accepted")
    for i in range(7):
        p.produce("customers", key=f"customer-{i}", value=json.dumps({"name": f"Customer {i}"}))
    p.flush(30)
    _consume(conf, "orders", "shipping", 90)
    _consume(conf, "payments", "ledger", 120)
    async def access() -> None:
        client = await KafkaClient.connect(
            broker.bootstrap_servers, security=ClientSecurity.from_properties(
                _admin_properties()))
        try:
            # (resource type, name, pattern, principal, host, operation, permission):
            # topic 2, group 3; literal 3, prefixed 4; READ 3, WRITE 4; ALLOW 3
            for acl in (Acl(2, "orders", 3, "User:alice", "*", 3, 3),
                        Acl(3, "shipping", 3, "User:alice", "*", 3, 3),
                        Acl(2, "pay", 4, "User:bob", "*", 4, 3)):
                await create_acl(client, acl)
            await alter_quota(client, [("user", "alice")], "producer_byte_rate", 1048576)
            await alter_quota(client, [("client-id", None)], "consumer_byte_rate", 4194304)
        finally:
            await client.close()

    asyncio.run(access())


def _consume(conf: dict[str, str], topic: str, group: str, count: int) -> None:
    c = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    seen, deadline = 0, time.monotonic() + 30
    while seen < count and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            seen += 1
    c.commit(asynchronous=False)
    c.close()


def _traffic(conf: dict[str, str], stop: threading.Event) -> None:
    p = Producer(conf)
    i = 0
    while not stop.is_set():
        p.produce("orders", key=f"customer-{i % 7}",
                  value=json.dumps({"order": 1000 + i, "item": f"gadget-{i}", "qty": 1}))
        i += 1
        p.poll(0)
        stop.wait(0.02 + (i % 50) / 1000)
    p.flush(10)


def _browser() -> Any:
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,800", "--hide-scrollbars"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    # the page itself 1280x800 (the window size counts the browser's own frame)
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False})
    return driver


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/console"))
    parser.add_argument("--seconds", type=float, default=12.0,
                        help="how long traffic flows before the screenshots")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    metrics_on: dict[str, Any] = {"odradek.metrics.listener": "127.0.0.1:0"}
    with Broker(sasl={"alice": "alice-secret", "bob": "bob-secret"}, acls=True,
                **metrics_on) as broker:
        conf = broker.client_config()
        _fill(broker, conf)
        assert broker.app.endpoint is not None
        metrics_url = f"http://{broker.app.endpoint.address}/metrics"
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()
        state = Console(broker.bootstrap_servers,
                        ClientSecurity.from_properties(_admin_properties()),
                        [metrics_url], sample_interval_s=1.0)
        server = ConsoleServer(state, "127.0.0.1", 0)
        url = asyncio.run_coroutine_threadsafe(server.start(), loop).result(30).rstrip("/")
        stop = threading.Event()
        traffic = threading.Thread(target=_traffic, args=(conf, stop), daemon=True)
        traffic.start()
        time.sleep(args.seconds)  # the charts need samples over time: this is the point
        member = Consumer({**conf, "group.id": "analytics", "auto.offset.reset": "latest"})
        member.subscribe(["orders"])
        deadline = time.monotonic() + 15
        while not member.assignment() and time.monotonic() < deadline:
            member.poll(0.2)
        driver = _browser()
        try:
            for name, path in PAGES:
                driver.get(url + path)
                WebDriverWait(driver, 10).until(
                    lambda d: d.find_elements(By.CSS_SELECTOR, "main h1"))
                if name == "tail":
                    driver.find_element(By.ID, "tail-toggle").click()
                    WebDriverWait(driver, 10).until(
                        lambda d: len(d.find_elements(By.CSS_SELECTOR, "#tail tr.record")) > 3)
                    driver.execute_script(
                        "document.getElementById('tail-toggle').scrollIntoView({block: 'start'})")
                if name == "group":
                    Select(driver.find_element(By.NAME, "to")).select_by_value("earliest")
                driver.save_screenshot(str(args.out / f"{name}.png"))
                print(f"wrote {args.out / (name + '.png')}")
        finally:
            driver.quit()
            member.close()
            stop.set()
            traffic.join(10)
            asyncio.run_coroutine_threadsafe(server.stop(), loop).result(30)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)


if __name__ == "__main__":
    main()
