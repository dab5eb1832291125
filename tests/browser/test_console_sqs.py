"""SQS queues in the console as SQS users know them: a message's body (not
the envelope hotq stores it in), its attributes and MessageGroupId; the
queue's type, URL and ARN; VisibilityTimeout and maxReceiveCount under
their SQS names next to hotq's settings. The messages are sent through the
SQS API (AWS JSON 1.0, unsigned: the daemon has no credentials, on
loopback), and every figure is checked against the API's answer."""

from __future__ import annotations

import json
import urllib.request

from selenium.webdriver.common.by import By

from conftest import Daemon
from test_console import open_queue, wait


def sqs(daemon: Daemon, action: str, body: dict) -> dict:
    request = urllib.request.Request(daemon.url + "/", data=json.dumps(body).encode(), method="POST")
    request.add_header("X-Amz-Target", f"AmazonSQS.{action}")
    request.add_header("Content-Type", "application/x-amz-json-1.0")
    with urllib.request.urlopen(request, timeout=60) as answer:
        return json.loads(answer.read() or b"{}")


def texts(browser, selector: str):
    return [e.text for e in browser.find_elements(By.CSS_SELECTOR, selector)]


def test_an_sqs_fifo_queue_shows_bodies_attributes_groups_and_its_sqs_names(daemon: Daemon, browser) -> None:
    dead = sqs(daemon, "CreateQueue", {"QueueName": "orders-dlq.fifo", "Attributes": {"FifoQueue": "true"}})["QueueUrl"]
    dead_arn = sqs(daemon, "GetQueueAttributes", {"QueueUrl": dead, "AttributeNames": ["QueueArn"]})["Attributes"]["QueueArn"]
    policy = json.dumps({"deadLetterTargetArn": dead_arn, "maxReceiveCount": 4})
    url = sqs(daemon, "CreateQueue", {"QueueName": "orders.fifo", "Attributes": {
        "FifoQueue": "true", "ContentBasedDeduplication": "true", "VisibilityTimeout": "45", "RedrivePolicy": policy}})["QueueUrl"]
    sqs(daemon, "SendMessage", {"QueueUrl": url, "MessageBody": "order for alice", "MessageGroupId": "customer#alice",
                                "MessageAttributes": {"kind": {"DataType": "String", "StringValue": "order"}}})
    sqs(daemon, "SendMessage", {"QueueUrl": url, "MessageBody": "order for bob", "MessageGroupId": "customer#bob"})
    open_queue(browser, daemon, "orders.fifo")

    # The API the page reads: the message as SQS shows it.
    status, listing = daemon.call("GET", "/v1/queues/orders.fifo/items")
    assert status == 200, listing
    shown = {item["sqs"]["body"]: item["sqs"] for item in listing["items"]}
    assert shown["order for alice"]["message_group_id"] == "customer#alice"
    assert shown["order for alice"]["attributes"] == {"kind": {"DataType": "String", "StringValue": "order"}}
    assert not listing["items"][0]["payload"].startswith("order")  # the stored envelope

    # The page: bodies, not envelopes; groups as sent; the attribute.
    bodies = wait(browser, lambda d: sorted(texts(d, "#items .sqs-body")) or None, "the SQS bodies")
    assert bodies == ["order for alice", "order for bob"]
    assert "hotq.sqs/1" not in " ".join(texts(browser, "#items td.payload"))
    assert "kind = order" in texts(browser, '#items [data-attribute="kind"]')
    rows = browser.find_elements(By.CSS_SELECTOR, "#items tr")
    assert any("customer#alice" in row.text for row in rows)

    # Type, URL, ARN and the attributes under their SQS names, next to hotq's.
    status, view = daemon.call("GET", "/v1/queues/orders.fifo/sqs")
    assert status == 200, view
    assert (view["queue_type"], view["max_receive_count"], view["hotq"]["default_lease_ms"]) == ("fifo", 4, 45_000)
    assert view["queue_arn"].endswith(":orders.fifo") and view["queue_url"].endswith("/orders.fifo")
    wait(browser, lambda d: d.find_element(By.ID, "sqs-panel").is_displayed(), "the SQS panel")

    def row(name):
        found = browser.find_elements(By.CSS_SELECTOR, f'#sqs-attributes tr[data-sqs="{name}"] td')
        return [cell.text for cell in found]

    assert wait(browser, lambda d: row("VisibilityTimeout") or None, "VisibilityTimeout") == ["VisibilityTimeout", "45 s", "default_lease_ms", "45,000 ms"]
    assert row("maxReceiveCount") == ["maxReceiveCount", "4", "max_deliveries", "4"]
    assert row("deadLetterTargetArn")[1] == dead_arn and row("deadLetterTargetArn")[3] == "orders-dlq.fifo"
    assert row("QueueUrl")[1] == view["queue_url"] and row("QueueArn")[1] == view["queue_arn"]
    assert row("Type")[1].startswith("FIFO")
    assert browser.find_element(By.ID, "sqs-badge").text == "SQS FIFO"

    # In flight: the lease shows the body too.
    sqs(daemon, "ReceiveMessage", {"QueueUrl": url, "MaxNumberOfMessages": 1})
    wait(browser, lambda d: texts(d, "#leases .sqs-body") in (["order for alice"], ["order for bob"]), "the leased message's body")


def test_a_standard_sqs_queue_and_a_v1_queue(daemon: Daemon, browser) -> None:
    url = sqs(daemon, "CreateQueue", {"QueueName": "mail"})["QueueUrl"]
    sqs(daemon, "SendMessage", {"QueueUrl": url, "MessageBody": "hello"})
    open_queue(browser, daemon, "mail")
    assert wait(browser, lambda d: texts(d, "#items .sqs-body") or None, "the body") == ["hello"]
    assert wait(browser, lambda d: d.find_element(By.ID, "sqs-badge").text, "the badge") == "SQS standard"
    # A queue only used through /v1 shows no SQS panel.
    status, _ = daemon.call("POST", "/v1/queues/plain/items", b"raw")
    assert status == 201
    open_queue(browser, daemon, "plain")
    wait(browser, lambda d: texts(d, "#items td.payload") == ["raw"], "the raw payload")
    assert not browser.find_element(By.ID, "sqs-panel").is_displayed()
    assert browser.find_elements(By.ID, "sqs-badge") == []
