"""A queue's limits (issue #40) hold through the SQS API too: a receive
of up to 10 messages under `leases_max` gets no more than the places
left, on a standard queue and on a FIFO queue (whose receive leases a
group's next messages in a batch of their own), a receive at the limit
answers no messages rather than an error, and a delete frees a place."""

from __future__ import annotations

import json
import urllib.request
import uuid


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def set_limits(daemon, name: str, change: dict) -> None:
    request = urllib.request.Request(
        f"{daemon.url}/v1/queues/{name}/settings",
        data=json.dumps(change).encode(),
        method="PUT",
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert answer.status == 200


def receive(sqs, url: str) -> list:
    answer = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
    return answer.get("Messages", [])


def test_a_standard_queue_receives_no_more_than_leases_max_allows(sqs, daemon):
    name = unique("capped")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    set_limits(daemon, name, {"leases_max": 2})
    entries = [{"Id": str(n), "MessageBody": f"m{n}"} for n in range(10)]
    sqs.send_message_batch(QueueUrl=url, Entries=entries)
    first = receive(sqs, url)
    assert len(first) == 2, first
    assert receive(sqs, url) == []
    sqs.delete_message(QueueUrl=url, ReceiptHandle=first[0]["ReceiptHandle"])
    assert len(receive(sqs, url)) == 1


def test_a_fifo_queue_group_batch_stays_within_leases_max(sqs, daemon):
    name = unique("capped") + ".fifo"
    url = sqs.create_queue(
        QueueName=name,
        Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"},
    )["QueueUrl"]
    set_limits(daemon, name, {"leases_max": 3})
    entries = [
        {"Id": str(n), "MessageBody": f"m{n}", "MessageGroupId": "g"} for n in range(10)
    ]
    sqs.send_message_batch(QueueUrl=url, Entries=entries)
    first = receive(sqs, url)
    assert [m["Body"] for m in first] == ["m0", "m1", "m2"], first
    assert receive(sqs, url) == []


def test_a_fifo_group_batch_stays_within_leases_per_key_max(sqs, daemon):
    # `fair`: every message joins the tenant "" (a fairness key), so the
    # limit per key holds the batch a receive leases behind the group head.
    name = unique("tenant") + ".fifo"
    url = sqs.create_queue(
        QueueName=name,
        Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"},
    )["QueueUrl"]
    set_limits(daemon, name, {"fair": True, "leases_per_key_max": 2})
    entries = [
        {"Id": str(n), "MessageBody": f"m{n}", "MessageGroupId": "g"} for n in range(10)
    ]
    sqs.send_message_batch(QueueUrl=url, Entries=entries)
    first = receive(sqs, url)
    assert [m["Body"] for m in first] == ["m0", "m1"], first
    assert receive(sqs, url) == []
