"""Fair queues through boto3 against the real daemon: on a standard queue
a message's MessageGroupId is its tenant (as SQS fair queues take it), so
a quiet tenant's messages are received right behind a noisy tenant's
backlog, round-robin between tenants, in send order within one; the
group id comes back as sent, and the queue's stats show each tenant's
backlog."""

from __future__ import annotations

import json
import uuid


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def send(sqs, url: str, group: str, count: int) -> None:
    for first in range(0, count, 10):
        entries = [
            {"Id": str(n), "MessageBody": f"{group}:{n}", "MessageGroupId": group}
            for n in range(first, min(first + 10, count))
        ]
        answer = sqs.send_message_batch(QueueUrl=url, Entries=entries)
        assert "Failed" not in answer or not answer["Failed"], answer


def test_message_group_ids_of_a_standard_queue_are_served_fairly(sqs, daemon):
    name = unique("fair")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    send(sqs, url, "noisy", 30)
    send(sqs, url, "a", 5)
    sqs.send_message(QueueUrl=url, MessageBody="b:0", MessageGroupId="b")
    send_rest = [{"Id": str(n), "MessageBody": f"b:{n}", "MessageGroupId": "b"} for n in range(1, 5)]
    sqs.send_message_batch(QueueUrl=url, Entries=send_rest)
    stats = json.loads(daemon.v1("GET", f"/v1/queues/{name}"))
    backlog = [(row["key"], row["items"]) for row in stats["fair_backlog"]]
    assert backlog == [("noisy", 30), ("a", 5), ("b", 5)], stats
    labels = []
    numbers = {}
    for _ in range(16):
        answer = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=1, WaitTimeSeconds=1,
            MessageSystemAttributeNames=["MessageGroupId"],
        )
        (message,) = answer["Messages"]
        label, number = message["Body"].split(":")
        assert message["Attributes"]["MessageGroupId"] == label
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        labels.append(label)
        numbers.setdefault(label, []).append(int(number))
    # The noisy tenant's first message was the head before the others
    # came; then each round serves every tenant one.
    for m in range(6):
        window = labels[: 1 + 3 * m]
        assert window.count("noisy") == 1 + m, labels
        assert window.count("a") == m, labels
        assert window.count("b") == m, labels
    for label, seen in numbers.items():
        assert seen == sorted(seen), f"{label} out of send order: {seen}"
