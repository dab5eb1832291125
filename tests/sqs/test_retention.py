"""MessageRetentionPeriod through boto3 against the real daemon: SQS's
default for a queue CreateQueue makes, set and read back, SQS's bounds,
and a message dropped once its retention ends (SQS's 60 s minimum is
too long for a test: the queue's retention_ms is set through /v1 to a
few hundred ms, the mapping's other side)."""

from __future__ import annotations

import json
import time
import uuid

import pytest

WAIT_BOUND_S = 30.0


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def retention_of(sqs, url: str) -> str:
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["MessageRetentionPeriod"])
    return attributes["Attributes"]["MessageRetentionPeriod"]


def test_message_retention_period_round_trips_within_sqs_bounds(sqs):
    url = sqs.create_queue(QueueName=unique("keep"))["QueueUrl"]
    assert retention_of(sqs, url) == "345600", "SQS's default: 4 days"
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"MessageRetentionPeriod": "60"})
    assert retention_of(sqs, url) == "60"
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"MessageRetentionPeriod": "1209600"})
    all_attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert all_attributes["MessageRetentionPeriod"] == "1209600"
    for bad in ["59", "1209601", "soon"]:
        with pytest.raises(sqs.exceptions.InvalidAttributeValue):
            sqs.set_queue_attributes(QueueUrl=url, Attributes={"MessageRetentionPeriod": bad})
    assert retention_of(sqs, url) == "1209600", "a refused value changes nothing"
    made = sqs.create_queue(QueueName=unique("made"), Attributes={"MessageRetentionPeriod": "120"})
    assert retention_of(sqs, made["QueueUrl"]) == "120"


def test_a_message_past_its_retention_is_dropped(sqs, daemon):
    name = unique("drop")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    daemon.v1("PUT", f"/v1/queues/{name}/settings", json.dumps({"retention_ms": 300}).encode())
    sqs.send_message(QueueUrl=url, MessageBody="short-lived")
    deadline = time.monotonic() + WAIT_BOUND_S
    while True:
        stats = json.loads(daemon.v1("GET", f"/v1/queues/{name}"))
        if stats["expired"] == 1:
            break
        assert time.monotonic() < deadline, f"not expired within {WAIT_BOUND_S} s: {stats}"
        time.sleep(0.05)
    assert stats["depth"] == 0
    assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0)
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attributes["ApproximateNumberOfMessages"] == "0"
