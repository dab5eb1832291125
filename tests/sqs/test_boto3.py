"""boto3 against the real daemon: every action the SQS API serves, its
limits and error codes, and its mapping onto hotq's queues."""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import threading
import time
import uuid

import pytest
from botocore.exceptions import ClientError

WAIT_BOUND_S = 30.0


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def code_of(error: pytest.ExceptionInfo) -> str:
    return error.value.response["Error"]["Code"]


def md5_of_attributes(attributes: dict) -> str:
    """SQS's digest, written from its documentation, independent of the daemon."""
    encoded = b""
    for name in sorted(attributes):
        value = attributes[name]
        for part in (name.encode(), value["DataType"].encode()):
            encoded += struct.pack(">I", len(part)) + part
        if "StringValue" in value:
            data = value["StringValue"].encode()
            encoded += b"\x01" + struct.pack(">I", len(data)) + data
        else:
            data = value["BinaryValue"]
            encoded += b"\x02" + struct.pack(">I", len(data)) + data
    return hashlib.md5(encoded).hexdigest()


def wait_for(predicate, what: str):
    deadline = time.monotonic() + WAIT_BOUND_S
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_queue_lifecycle(sqs):
    name = unique("life")
    url = sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "45"})["QueueUrl"]
    assert url.endswith(f"/000000000000/{name}")
    # Equal attributes: the same queue; different ones: QueueNameExists.
    assert sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "45"})["QueueUrl"] == url
    with pytest.raises(sqs.exceptions.QueueNameExists) as error:
        sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "50"})
    assert code_of(error) == "QueueAlreadyExists"
    assert sqs.get_queue_url(QueueName=name)["QueueUrl"] == url
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attributes["VisibilityTimeout"] == "45"
    assert attributes["QueueArn"] == f"arn:aws:sqs:us-east-1:000000000000:{name}"
    assert "RedrivePolicy" not in attributes
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"DelaySeconds": "2", "ReceiveMessageWaitTimeSeconds": "1"})
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["DelaySeconds", "ReceiveMessageWaitTimeSeconds"])["Attributes"]
    assert attributes == {"DelaySeconds": "2", "ReceiveMessageWaitTimeSeconds": "1"}
    with pytest.raises(sqs.exceptions.InvalidAttributeValue):
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"MessageRetentionPeriod": "59"})
    with pytest.raises(sqs.exceptions.InvalidAttributeName):
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"Colour": "blue"})
    sqs.tag_queue(QueueUrl=url, Tags={"team": "a", "env": "ci"})
    sqs.untag_queue(QueueUrl=url, TagKeys=["env"])
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "a"}
    sqs.delete_queue(QueueUrl=url)
    with pytest.raises(sqs.exceptions.QueueDoesNotExist) as error:
        sqs.get_queue_url(QueueName=name)
    assert code_of(error) == "AWS.SimpleQueueService.NonExistentQueue"


def test_list_queues_by_prefix_and_page(sqs):
    prefix = unique("list")
    names = [f"{prefix}-{i}" for i in range(5)]
    for name in names:
        sqs.create_queue(QueueName=name)
    sqs.create_queue(QueueName=unique("other"))
    seen, token = [], None
    for _ in range(10):
        kwargs = {"QueueNamePrefix": prefix, "MaxResults": 2}
        if token:
            kwargs["NextToken"] = token
        page = sqs.list_queues(**kwargs)
        seen += [url.rsplit("/", 1)[1] for url in page.get("QueueUrls", [])]
        token = page.get("NextToken")
        if not token:
            break
    assert seen == names


def test_send_receive_with_attributes_and_digests(sqs, daemon):
    url = sqs.create_queue(QueueName=unique("attrs"))["QueueUrl"]
    attributes = {
        "kind": {"DataType": "String", "StringValue": "order"},
        "n": {"DataType": "Number.int", "StringValue": "42"},
        "raw": {"DataType": "Binary", "BinaryValue": b"\x00\xffbytes"},
    }
    sent = sqs.send_message(QueueUrl=url, MessageBody="héllo", MessageAttributes=attributes)
    assert sent["MD5OfMessageBody"] == hashlib.md5("héllo".encode()).hexdigest()
    assert sent["MD5OfMessageAttributes"] == md5_of_attributes(attributes)
    got = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"], AttributeNames=["All"])["Messages"][0]
    assert got["MessageId"] == sent["MessageId"]
    assert got["Body"] == "héllo"
    assert got["MessageAttributes"] == attributes
    assert got["MD5OfMessageAttributes"] == md5_of_attributes(attributes)
    assert got["Attributes"]["ApproximateReceiveCount"] == "1"
    # Only the attributes asked for, and their digest.
    only = {"kind": attributes["kind"]}
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=got["ReceiptHandle"], VisibilityTimeout=0)
    again = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["kind"], WaitTimeSeconds=5)["Messages"][0]
    assert again["MessageAttributes"] == only
    assert again["MD5OfMessageAttributes"] == md5_of_attributes(only)
    # The same queue /v1 shows: one item leased.
    stats = json.loads(daemon.v1("GET", "/v1/queues/" + url.rsplit("/", 1)[1]))
    assert stats["leased"] == 1
    sqs.delete_message(QueueUrl=url, ReceiptHandle=again["ReceiptHandle"])


def test_v1_items_reach_sqs_losslessly(sqs, daemon):
    name = unique("v1")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    daemon.v1("POST", f"/v1/queues/{name}/items", b"plain text")
    daemon.v1("POST", f"/v1/queues/{name}/items", b"\xff\x00binary")
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], WaitTimeSeconds=5)["Messages"]
    got += sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], WaitTimeSeconds=1).get("Messages", [])
    bodies = {m["Body"]: m for m in got}
    assert "plain text" in bodies
    binary = [m for m in got if m.get("MessageAttributes", {}).get("hotq.encoding")]
    assert len(binary) == 1
    assert base64.b64decode(binary[0]["Body"]) == b"\xff\x00binary"


def test_too_long_names_the_limit(sqs):
    url = sqs.create_queue(QueueName=unique("big"))["QueueUrl"]
    size = int(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["MaximumMessageSize"])["Attributes"]["MaximumMessageSize"])
    sqs.send_message(QueueUrl=url, MessageBody="x" * size)
    with pytest.raises(ClientError) as error:
        sqs.send_message(QueueUrl=url, MessageBody="x" * (size + 1))
    assert code_of(error) == "InvalidParameterValue"
    assert str(size) in error.value.response["Error"]["Message"]


def test_visibility_expiry_redelivers_with_receive_count(sqs):
    url = sqs.create_queue(QueueName=unique("vis"))["QueueUrl"]
    sent = sqs.send_message(QueueUrl=url, MessageBody="again")
    first = sqs.receive_message(QueueUrl=url, VisibilityTimeout=1)["Messages"][0]
    second = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=20, AttributeNames=["ApproximateReceiveCount"])["Messages"][0]
    assert second["MessageId"] == first["MessageId"] == sent["MessageId"]
    assert second["ReceiptHandle"] != first["ReceiptHandle"]
    assert second["Attributes"]["ApproximateReceiveCount"] == "2"
    # A stale handle deletes nothing and succeeds.
    sqs.delete_message(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"])
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=second["ReceiptHandle"], VisibilityTimeout=0)
    third = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5, AttributeNames=["All"])["Messages"][0]
    assert third["Attributes"]["ApproximateReceiveCount"] == "3"
    with pytest.raises(ClientError) as error:
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=second["ReceiptHandle"], VisibilityTimeout=10)
    assert code_of(error) == "InvalidParameterValue"
    with pytest.raises(sqs.exceptions.ReceiptHandleIsInvalid):
        sqs.delete_message(QueueUrl=url, ReceiptHandle="not-a-handle")
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=third["ReceiptHandle"], VisibilityTimeout=300)
    assert sqs.receive_message(QueueUrl=url).get("Messages") is None
    sqs.delete_message(QueueUrl=url, ReceiptHandle=third["ReceiptHandle"])
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attributes["ApproximateNumberOfMessages"] == attributes["ApproximateNumberOfMessagesNotVisible"] == "0"


def test_redrive_policy_moves_to_the_dead_letter_queue(sqs):
    dead_url = sqs.create_queue(QueueName=unique("dlq"))["QueueUrl"]
    dead_arn = sqs.get_queue_attributes(QueueUrl=dead_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    policy = json.dumps({"deadLetterTargetArn": dead_arn, "maxReceiveCount": "2"})
    url = sqs.create_queue(QueueName=unique("src"), Attributes={"RedrivePolicy": policy})["QueueUrl"]
    shown = json.loads(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["RedrivePolicy"])["Attributes"]["RedrivePolicy"])
    assert shown == {"deadLetterTargetArn": dead_arn, "maxReceiveCount": 2}
    assert sqs.list_dead_letter_source_queues(QueueUrl=dead_url)["queueUrls"] == [url]
    sent = sqs.send_message(QueueUrl=url, MessageBody="poison")
    for _ in range(2):
        got = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"][0]
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=got["ReceiptHandle"], VisibilityTimeout=0)
    dead = sqs.receive_message(QueueUrl=dead_url, WaitTimeSeconds=5, AttributeNames=["All"])["Messages"][0]
    assert dead["MessageId"] == sent["MessageId"]
    assert dead["Body"] == "poison"
    assert dead["Attributes"]["DeadLetterQueueSourceArn"].endswith(url.rsplit("/", 1)[1])
    assert sqs.receive_message(QueueUrl=url).get("Messages") is None
    with pytest.raises(sqs.exceptions.InvalidAttributeValue):
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": json.dumps({"deadLetterTargetArn": dead_arn + "-nope", "maxReceiveCount": 3})})


def test_batches_with_failing_entries(sqs):
    url = sqs.create_queue(QueueName=unique("batch"))["QueueUrl"]
    answer = sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": "a", "MessageBody": "one"},
        {"Id": "b", "MessageBody": "two", "MessageAttributes": {"bad": {"DataType": "Colour", "StringValue": "x"}}},
        {"Id": "c", "MessageBody": "three", "DelaySeconds": 0},
    ])
    assert sorted(s["Id"] for s in answer["Successful"]) == ["a", "c"]
    assert [(f["Id"], f["Code"], f["SenderFault"]) for f in answer["Failed"]] == [("b", "InvalidParameterValue", True)]
    with pytest.raises(sqs.exceptions.BatchEntryIdsNotDistinct):
        sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "x", "MessageBody": "1"}, {"Id": "x", "MessageBody": "2"}])
    with pytest.raises(sqs.exceptions.TooManyEntriesInBatchRequest):
        sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": f"e{i}", "MessageBody": "m"} for i in range(11)])
    with pytest.raises(sqs.exceptions.EmptyBatchRequest):
        sqs.delete_message_batch(QueueUrl=url, Entries=[])
    with pytest.raises(sqs.exceptions.InvalidBatchEntryId):
        sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "bad id!", "MessageBody": "m"}])
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=5)["Messages"]
    while len(got) < 2:
        got += sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=5).get("Messages", [])
    assert sorted(m["Body"] for m in got) == ["one", "three"]
    changed = sqs.change_message_visibility_batch(QueueUrl=url, Entries=[
        {"Id": "k", "ReceiptHandle": got[0]["ReceiptHandle"], "VisibilityTimeout": 600},
        {"Id": "bad", "ReceiptHandle": "garbage", "VisibilityTimeout": 600},
    ])
    assert [s["Id"] for s in changed["Successful"]] == ["k"]
    assert changed["Failed"][0]["Code"] == "ReceiptHandleIsInvalid"
    deleted = sqs.delete_message_batch(QueueUrl=url, Entries=[
        {"Id": "m1", "ReceiptHandle": got[0]["ReceiptHandle"]},
        {"Id": "m2", "ReceiptHandle": got[1]["ReceiptHandle"]},
        {"Id": "m3", "ReceiptHandle": "garbage"},
    ])
    assert sorted(s["Id"] for s in deleted["Successful"]) == ["m1", "m2"]
    assert deleted["Failed"][0]["Id"] == "m3"
    with pytest.raises(ClientError) as error:
        sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=11)
    assert code_of(error) == "InvalidParameterValue"


def test_long_poll_is_answered_by_a_later_send(sqs, daemon):
    name = unique("poll")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    received = {}

    def receive():
        received["answer"] = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=20)

    receiver = threading.Thread(target=receive)
    receiver.start()
    wait_for(lambda: json.loads(daemon.v1("GET", f"/v1/queues/{name}"))["waiting"] >= 1, "the receive to wait")
    sqs.send_message(QueueUrl=url, MessageBody="late")
    receiver.join(timeout=WAIT_BOUND_S)
    assert received["answer"]["Messages"][0]["Body"] == "late"
    # An empty queue answers no messages once the wait is over.
    assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)


def test_fifo_dedup_and_sequence_numbers(sqs):
    url = sqs.create_queue(QueueName=unique("dedup") + ".fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    with pytest.raises(ClientError) as error:
        sqs.send_message(QueueUrl=url, MessageBody="m", MessageGroupId="g")
    assert code_of(error) == "InvalidParameterValue"
    with pytest.raises(ClientError) as error:
        sqs.send_message(QueueUrl=url, MessageBody="m", MessageDeduplicationId="d")
    assert code_of(error) == "MissingParameter"
    first = sqs.send_message(QueueUrl=url, MessageBody="m", MessageGroupId="g!1", MessageDeduplicationId="d1")
    sqs.send_message(QueueUrl=url, MessageBody="m", MessageGroupId="g!1", MessageDeduplicationId="d1")
    second = sqs.send_message(QueueUrl=url, MessageBody="n", MessageGroupId="g!1", MessageDeduplicationId="d2")
    assert int(second["SequenceNumber"]) > int(first["SequenceNumber"])
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"ContentBasedDeduplication": "true"})
    sqs.send_message(QueueUrl=url, MessageBody="same", MessageGroupId="h")
    sqs.send_message(QueueUrl=url, MessageBody="same", MessageGroupId="h")
    bodies = []
    for _ in range(10):
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"], WaitTimeSeconds=1).get("Messages", [])
        for message in got:
            bodies.append((message["Attributes"]["MessageGroupId"], message["Body"]))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        if len(bodies) >= 3:
            break
    assert sorted(bodies) == [("g!1", "m"), ("g!1", "n"), ("h", "same")]
    with pytest.raises(ClientError):
        sqs.create_queue(QueueName=unique("nofifo") + ".fifo")


def test_fifo_dead_letters_redriven_keep_their_group_and_its_order(sqs, daemon):
    """A FIFO message dead-lettered after its receives and redriven comes
    back in its MessageGroupId, behind the group's message in flight, and
    nothing of the group is received while that one is (issue #35, defect
    4)."""
    dead_name = unique("rdlq") + ".fifo"
    dead_url = sqs.create_queue(QueueName=dead_name, Attributes={"FifoQueue": "true"})["QueueUrl"]
    dead_arn = sqs.get_queue_attributes(QueueUrl=dead_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    policy = json.dumps({"deadLetterTargetArn": dead_arn, "maxReceiveCount": "1"})
    url = sqs.create_queue(QueueName=unique("rsrc") + ".fifo", Attributes={"FifoQueue": "true", "RedrivePolicy": policy})["QueueUrl"]
    for body in ["m1", "m2", "m3"]:
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId="g", MessageDeduplicationId=body)
    first = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1)["Messages"]
    assert [m["Body"] for m in first] == ["m1"]
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=first[0]["ReceiptHandle"], VisibilityTimeout=0)
    dead = sqs.receive_message(QueueUrl=dead_url, MaxNumberOfMessages=10, AttributeNames=["All"])["Messages"]
    assert [(m["Body"], m["Attributes"]["MessageGroupId"]) for m in dead] == [("m1", "g")]
    # Back into the dead-letter queue at once (a dead-letter queue does not dead-letter again).
    sqs.change_message_visibility(QueueUrl=dead_url, ReceiptHandle=dead[0]["ReceiptHandle"], VisibilityTimeout=0)
    second = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1)["Messages"]
    assert [m["Body"] for m in second] == ["m2"]
    redriven = json.loads(daemon.v1("POST", f"/v1/queues/{dead_name}/redrive"))
    assert redriven == {"redriven": 1}
    assert sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages") is None
    sqs.delete_message(QueueUrl=url, ReceiptHandle=second[0]["ReceiptHandle"])
    # The group's rest in one receive (a FIFO receive takes several of one
    # group), in order: m3, then the redriven m1 at the group's tail.
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"])["Messages"]
    attributes = [m["Attributes"] for m in got]
    assert [(m["Body"], a["MessageGroupId"], a["ApproximateReceiveCount"]) for m, a in zip(got, attributes)] == [
        ("m3", "g", "1"),
        ("m1", "g", "1"),
    ]
    for message in got:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    assert sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages") is None


def test_fifo_order_within_groups_under_concurrent_receivers(sqs):
    url = sqs.create_queue(QueueName=unique("order") + ".fifo", Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"})["QueueUrl"]
    groups, per_group = 4, 25
    for i in range(per_group):
        sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": f"g{g}", "MessageBody": f"{g}:{i}", "MessageGroupId": f"group-{g}"} for g in range(groups)
        ])
    log, lock = [], threading.Lock()
    deadline = time.monotonic() + WAIT_BOUND_S * 4

    def worker():
        client = sqs
        while time.monotonic() < deadline:
            with lock:
                if len(log) >= groups * per_group:
                    return
            got = client.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages", [])
            for message in got:
                group, index = message["Body"].split(":")
                with lock:
                    log.append((group, int(index)))
                client.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(log) == groups * per_group
    for g in range(groups):
        assert [i for group, i in log if group == str(g)] == list(range(per_group))


def test_a_mebibyte_message_sends_and_receives_whole(sqs):
    # SQS's limit since 2025: 1 MiB, the default MaximumMessageSize.
    url = sqs.create_queue(QueueName=unique("mib"))["QueueUrl"]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["MaximumMessageSize"])["Attributes"]
    assert attributes["MaximumMessageSize"] == "1048576"
    body = "".join(chr(ord("a") + i % 26) for i in range(1_048_576))
    sent = sqs.send_message(QueueUrl=url, MessageBody=body)
    assert sent["MD5OfMessageBody"] == hashlib.md5(body.encode()).hexdigest()
    got = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=20)["Messages"]
    assert len(got) == 1 and got[0]["Body"] == body
    sqs.delete_message(QueueUrl=url, ReceiptHandle=got[0]["ReceiptHandle"])
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    # A queue may set any size from 1 KiB to 1 MiB, and keeps to it.
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"MaximumMessageSize": "262144"})
    with pytest.raises(ClientError) as error:
        sqs.send_message(QueueUrl=url, MessageBody="x" * 262_145)
    assert code_of(error) == "InvalidParameterValue"
    with pytest.raises(ClientError) as error:
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"MaximumMessageSize": "1048577"})
    assert code_of(error) == "InvalidAttributeValue"
