"""The web console in a real browser (Debian's headless Chromium through
chromedriver) against a real broker: pages load without console errors, the
message browser finds a record by its value, the live tail shows a record
produced after it opened, and the create-topic and reset-offsets forms take
effect in the cluster (checked with confluent-kafka). Skipped when Chromium
or chromedriver is not installed (scripts/test.sh installs them)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from odradek.testing.broker import Broker
from tests.integration.console.support import (
    RunningConsole,
    committed,
    consume_and_commit,
    produce,
    wait_for,
)

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"

pytestmark = [
    pytest.mark.skipif(not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)),
                       reason=f"needs {CHROMIUM} and {CHROMEDRIVER} (Debian's chromium and "
                              f"chromium-driver)"),
]
webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

Setup = tuple[Broker, RunningConsole, Any]


def chrome() -> Any:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,800"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # The driver's path given: Selenium Manager never tries to download one.
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


@pytest.fixture(scope="module")
def setup() -> Iterator[Setup]:
    with Broker() as broker:
        broker.create_topic("orders", partitions=2)
        produce(broker.bootstrap_servers, "orders",
                [f'{{"order": {i}, "item": "widget-{i}"}}' for i in range(20)], key="k")
        consume_and_commit(broker.bootstrap_servers, "orders", "shipping", 20)
        console = RunningConsole(broker.bootstrap_servers)
        driver = chrome()
        try:
            yield broker, console, driver
        finally:
            driver.quit()
            console.close()


def ends(broker: Broker, topic: str, partitions: int) -> int:
    """The sum of the partitions' end offsets."""
    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "probe"})
    try:
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                   for p in range(partitions))
    finally:
        c.close()


def severe(driver: Any) -> list[Any]:
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


PAGES = ["/", "/topics", "/topics/orders", "/topics/orders/messages", "/groups",
         "/groups/shipping", "/acls", "/quotas", "/users"]


@pytest.mark.parametrize("path", PAGES)
def test_page_loads_without_console_errors(setup: Setup, path: str) -> None:
    _, console, driver = setup
    driver.get_log("browser")  # drop what earlier pages logged
    driver.get(console.url + path)
    WebDriverWait(driver, 10).until(lambda d: d.find_elements(By.CSS_SELECTOR, "main h1"))
    assert "Odradek console" in driver.title
    assert severe(driver) == []


def test_message_browser_finds_a_record_by_value_text(setup: Setup) -> None:
    _, console, driver = setup
    driver.get(console.url + "/topics/orders/messages")
    Select(driver.find_element(By.NAME, "from")).select_by_value("start")
    box = driver.find_element(By.NAME, "filter")
    box.clear()
    box.send_keys("widget-13")
    driver.find_element(By.CSS_SELECTOR, "#browse button[type=submit]").click()
    WebDriverWait(driver, 10).until(lambda d: "filter=widget-13" in d.current_url)
    rows = driver.find_elements(By.CSS_SELECTOR, "#records tr.record")
    assert len(rows) == 1
    assert '"item": "widget-13"' in rows[0].text
    assert severe(driver) == []


def test_live_tail_shows_a_record_produced_after_the_page_opened(setup: Setup) -> None:
    broker, console, driver = setup
    driver.get(console.url + "/topics/orders/messages")
    driver.find_element(By.ID, "tail-toggle").click()
    WebDriverWait(driver, 10).until(
        lambda d: "tailing" in d.find_element(By.ID, "tail-status").text)
    produce(broker.bootstrap_servers, "orders", ["tailed while watching"])
    WebDriverWait(driver, 10).until(
        lambda d: "tailed while watching" in d.find_element(By.ID, "tail").text)
    driver.find_element(By.ID, "tail-toggle").click()  # closes the EventSource
    assert severe(driver) == []


def test_creating_a_topic_from_the_page_takes_effect(setup: Setup) -> None:
    broker, console, driver = setup
    driver.get(console.url + "/topics")
    form = driver.find_element(By.ID, "create-topic")
    form.find_element(By.NAME, "name").send_keys("from-the-browser")
    form.find_element(By.NAME, "partitions").send_keys("3")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    WebDriverWait(driver, 15).until(lambda d: "/topics/from-the-browser" in d.current_url)
    assert "created topic from-the-browser" in driver.find_element(By.CSS_SELECTOR,
                                                                   ".banner.ok").text
    meta = AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(timeout=10)
    assert len(meta.topics["from-the-browser"].partitions) == 3
    assert severe(driver) == []


def test_resetting_offsets_from_the_page_takes_effect(setup: Setup) -> None:
    broker, console, driver = setup
    before = committed(broker.bootstrap_servers, "shipping", "orders", 2)
    assert sum(max(0, o) for o in before.values()) == 20
    driver.get(console.url + "/groups/shipping")
    form = driver.find_element(By.ID, "reset")
    Select(form.find_element(By.NAME, "topic")).select_by_visible_text("orders")
    Select(form.find_element(By.NAME, "to")).select_by_value("earliest")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    WebDriverWait(driver, 15).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".banner.ok"))
    wait_for(lambda: committed(broker.bootstrap_servers, "shipping", "orders", 2)
             == {0: 0, 1: 0}, "offsets reset to the start")
    # the whole topic is lag again (20 records, and what the tail test added)
    assert driver.find_element(By.ID, "total-lag").text == str(ends(broker, "orders", 2))
    assert severe(driver) == []
