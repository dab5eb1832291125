"""SQS as AWS documents it (issue 38), through boto3 against the real
daemon: purge of messages in flight, handles past their visibility
timeout, FIFO batches and delays, bare queue names, request ids, attribute
name prefixes, AWS's error texts, and the attributes hotq keeps without
enforcing them (Policy, KMS, SSE). The expected texts are AWS's, as the
SQS API reference and AWS-recorded test snapshots give them."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from botocore.exceptions import ClientError

WAIT_BOUND_S = 30.0


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def error_of(error: pytest.ExceptionInfo) -> tuple:
    return error.value.response["Error"]["Code"], error.value.response["Error"]["Message"]


def counts(sqs, url: str) -> tuple:
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return tuple(int(attributes[name]) for name in names)


def wait_for(predicate, what: str):
    deadline = time.monotonic() + WAIT_BOUND_S
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def fifo_queue(sqs, prefix: str, **attributes) -> str:
    attributes = {"FifoQueue": "true", "ContentBasedDeduplication": "true", **attributes}
    return sqs.create_queue(QueueName=unique(prefix) + ".fifo", Attributes=attributes)["QueueUrl"]


def test_purge_deletes_messages_in_flight_too(sqs):
    url = sqs.create_queue(QueueName=unique("purge"))["QueueUrl"]
    sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": str(i)} for i in range(5)])
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=600)
    in_flight = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2, VisibilityTimeout=600)["Messages"]
    assert len(in_flight) == 2
    assert counts(sqs, url) == (3, 2, 1)
    sqs.purge_queue(QueueUrl=url)
    assert counts(sqs, url) == (0, 0, 0)
    # Their handles delete nothing now, and succeed.
    for message in in_flight:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    sqs.send_message(QueueUrl=url, MessageBody="after")
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=5)["Messages"]
    assert [m["Body"] for m in got] == ["after"]


def test_purge_releases_a_fifo_group_in_flight(sqs):
    url = fifo_queue(sqs, "fpurge")
    for body in ["m1", "m2"]:
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId="g")
    head = sqs.receive_message(QueueUrl=url, VisibilityTimeout=600)["Messages"]
    assert [m["Body"] for m in head] == ["m1"]
    sqs.purge_queue(QueueUrl=url)
    assert counts(sqs, url) == (0, 0, 0)
    # The group is free: a message sent after the purge is received at
    # once, while the purged head's visibility timeout has 10 minutes to go.
    sqs.send_message(QueueUrl=url, MessageBody="m3", MessageGroupId="g")
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=5)["Messages"]
    assert [m["Body"] for m in got] == ["m3"]
    # A group out as a batch of several is released by a purge too.
    for body in ["m4", "m5"]:
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId="g")
    sqs.delete_message(QueueUrl=url, ReceiptHandle=got[0]["ReceiptHandle"])
    batch = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600)["Messages"]
    assert [m["Body"] for m in batch] == ["m4", "m5"]
    sqs.purge_queue(QueueUrl=url)
    assert counts(sqs, url) == (0, 0, 0)
    sqs.send_message(QueueUrl=url, MessageBody="m6", MessageGroupId="g")
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=5)["Messages"]
    assert [m["Body"] for m in got] == ["m6"]


def expire(sqs, url: str) -> dict:
    """Sends one message, receives it with a 1-second visibility timeout,
    and waits until it is visible again (the receive is over)."""
    sqs.send_message(QueueUrl=url, MessageBody=unique("body"), **({"MessageGroupId": "g"} if url.endswith(".fifo") else {}))
    got = sqs.receive_message(QueueUrl=url, VisibilityTimeout=1, WaitTimeSeconds=5)["Messages"][0]
    wait_for(lambda: counts(sqs, url) == (1, 0, 0), "the visibility timeout to end")
    return got


def test_delete_with_an_expired_handle_deletes_if_not_received_since(sqs):
    url = sqs.create_queue(QueueName=unique("stale"))["QueueUrl"]
    got = expire(sqs, url)
    # Not received since: the handle of the last receive still deletes it.
    sqs.delete_message(QueueUrl=url, ReceiptHandle=got["ReceiptHandle"])
    assert counts(sqs, url) == (0, 0, 0)
    assert sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1).get("Messages") is None
    # Received again since: the old handle succeeds and deletes nothing.
    old = expire(sqs, url)
    new = sqs.receive_message(QueueUrl=url, VisibilityTimeout=600, WaitTimeSeconds=5)["Messages"][0]
    assert new["MessageId"] == old["MessageId"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=old["ReceiptHandle"])
    assert counts(sqs, url) == (0, 1, 0)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=new["ReceiptHandle"])
    assert counts(sqs, url) == (0, 0, 0)
    # In a batch too.
    got = expire(sqs, url)
    answer = sqs.delete_message_batch(QueueUrl=url, Entries=[{"Id": "a", "ReceiptHandle": got["ReceiptHandle"]}])
    assert [s["Id"] for s in answer["Successful"]] == ["a"]
    assert counts(sqs, url) == (0, 0, 0)


def test_fifo_delete_with_an_expired_handle_is_refused(sqs):
    url = fifo_queue(sqs, "fstale", VisibilityTimeout="1")
    got = expire(sqs, url)
    with pytest.raises(ClientError) as error:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=got["ReceiptHandle"])
    handle = got["ReceiptHandle"]
    assert error_of(error) == (
        "InvalidParameterValue",
        f"Value {handle} for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired.",
    )
    assert counts(sqs, url) == (1, 0, 0)


def test_change_visibility_with_expired_or_superseded_handles(sqs):
    url = sqs.create_queue(QueueName=unique("cmv"))["QueueUrl"]
    got = expire(sqs, url)
    handle = got["ReceiptHandle"]
    # Expired, not received since: 200, and the message stays visible.
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=600)
    answer = sqs.change_message_visibility_batch(QueueUrl=url, Entries=[{"Id": "a", "ReceiptHandle": handle, "VisibilityTimeout": 5}])
    assert [s["Id"] for s in answer["Successful"]] == ["a"]
    assert counts(sqs, url) == (1, 0, 0)
    # Superseded by a later receive, or deleted: InvalidParameterValue.
    new = sqs.receive_message(QueueUrl=url, VisibilityTimeout=600, WaitTimeSeconds=5)["Messages"][0]
    gone = f"Value {handle} for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not available for visibility timeout change."
    with pytest.raises(ClientError) as error:
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=0)
    assert error_of(error) == ("InvalidParameterValue", gone)
    answer = sqs.change_message_visibility_batch(QueueUrl=url, Entries=[{"Id": "a", "ReceiptHandle": handle, "VisibilityTimeout": 5}])
    assert [(f["Id"], f["Code"], f["Message"]) for f in answer["Failed"]] == [("a", "InvalidParameterValue", gone)]
    assert counts(sqs, url) == (0, 1, 0)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=new["ReceiptHandle"])
    with pytest.raises(ClientError) as error:
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=new["ReceiptHandle"], VisibilityTimeout=5)
    assert error_of(error)[0] == "InvalidParameterValue"


def bodies_by_group(messages: list) -> dict:
    groups: dict = {}
    for message in messages:
        groups.setdefault(message["Attributes"]["MessageGroupId"], []).append(message["Body"])
    return groups


def receive_fifo(sqs, url: str, **options) -> list:
    options = {"MaxNumberOfMessages": 10, "AttributeNames": ["All"], **options}
    return sqs.receive_message(QueueUrl=url, **options).get("Messages", [])


def test_fifo_receive_takes_several_messages_of_one_group_in_order(sqs):
    """AWS: "you can receive up to 10 messages of one group in a batch",
    in order; the group stays locked until all of them are deleted or
    visible again, and then they come again in their order, ahead of the
    group's later messages."""
    url = fifo_queue(sqs, "fbatch")
    a = [f"a{i}" for i in range(1, 6)]
    for body in a:
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId="a")
    for body in ["b1", "b2"]:
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId="b")
    got = receive_fifo(sqs, url, VisibilityTimeout=600, WaitTimeSeconds=5)
    groups = bodies_by_group(got)
    # Each group's messages come in order, a prefix of what was sent, and
    # a group's messages are several, not one at a time.
    assert groups["a"] == a[: len(groups["a"])]
    assert groups.get("b", []) == ["b1", "b2"][: len(groups.get("b", []))]
    assert len(groups["a"]) == 5
    assert len(got) <= 10
    handles = {m["Body"]: m["ReceiptHandle"] for m in got}
    # Locked while any of its messages is in flight: a6, sent now, waits.
    sqs.send_message(QueueUrl=url, MessageBody="a6", MessageGroupId="a")
    sqs.delete_message(QueueUrl=url, ReceiptHandle=handles["a1"])
    locked = receive_fifo(sqs, url, VisibilityTimeout=600, WaitTimeSeconds=1)
    assert "a" not in bodies_by_group(locked)
    handles.update({m["Body"]: m["ReceiptHandle"] for m in locked})
    # a2..a5's visibility timeouts end: they come back in their order,
    # ahead of a6, and only once all of them are visible again.
    entries = [{"Id": body, "ReceiptHandle": handles[body], "VisibilityTimeout": 1} for body in a[1:]]
    assert len(sqs.change_message_visibility_batch(QueueUrl=url, Entries=entries)["Successful"]) == 4
    again = wait_for(lambda: receive_fifo(sqs, url, VisibilityTimeout=600), "a2..a5 to be visible again")
    assert bodies_by_group(again)["a"] == ["a2", "a3", "a4", "a5", "a6"]
    assert all(m["Attributes"]["ApproximateReceiveCount"] == "2" for m in again if m["Body"] in a)
    handles.update({m["Body"]: m["ReceiptHandle"] for m in again})
    # Delete them all: the group moves on to what is sent next.
    for body in ["a2", "a3", "a4", "a5", "a6", "b1", "b2"]:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=handles[body])
    sqs.send_message(QueueUrl=url, MessageBody="a7", MessageGroupId="a")
    last = receive_fifo(sqs, url, VisibilityTimeout=600, WaitTimeSeconds=5)
    assert [m["Body"] for m in last] == ["a7"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=last[0]["ReceiptHandle"])
    assert counts(sqs, url) == (0, 0, 0)


def test_fifo_delay_zero_accepted_other_delays_refused(sqs):
    url = fifo_queue(sqs, "fdelay")
    sqs.send_message(QueueUrl=url, MessageBody="zero", MessageGroupId="g", DelaySeconds=0)
    with pytest.raises(ClientError) as error:
        sqs.send_message(QueueUrl=url, MessageBody="two", MessageGroupId="g", DelaySeconds=2)
    assert error_of(error) == (
        "InvalidParameterValue",
        "Value 2 for parameter DelaySeconds is invalid. Reason: The request include parameter that is not valid for this queue type.",
    )
    answer = sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "a", "MessageBody": "batched", "MessageGroupId": "g", "DelaySeconds": 0}])
    assert [s["Id"] for s in answer["Successful"]] == ["a"]


def test_fifo_batch_missing_group_or_dedup_fails_whole(sqs):
    url = fifo_queue(sqs, "fbatch", ContentBasedDeduplication="false")
    good = {"Id": "good", "MessageBody": "m", "MessageGroupId": "g", "MessageDeduplicationId": "d1"}
    with pytest.raises(ClientError) as error:
        sqs.send_message_batch(QueueUrl=url, Entries=[good, {"Id": "nogroup", "MessageBody": "m", "MessageDeduplicationId": "d2"}])
    assert error_of(error) == ("InvalidParameterValue", "The request must contain the parameter MessageGroupId.")
    assert error.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    # SQS's shape, under its query code (as AWS-recorded snapshots show both).
    assert error.value.response["Error"]["QueryErrorCode"] == "InvalidParameterValueException"
    with pytest.raises(ClientError) as error:
        sqs.send_message_batch(QueueUrl=url, Entries=[good, {"Id": "nodedup", "MessageBody": "m", "MessageGroupId": "g"}])
    assert error_of(error) == (
        "InvalidParameterValue",
        "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly",
    )
    # Nothing of either batch was sent.
    assert counts(sqs, url) == (0, 0, 0)


def test_queue_type_attributes_as_aws_answers(sqs):
    name = unique("std")
    with pytest.raises(sqs.exceptions.InvalidAttributeName) as error:
        sqs.create_queue(QueueName=name, Attributes={"FifoQueue": "false"})
    assert error_of(error) == ("InvalidAttributeName", "Unknown Attribute FifoQueue.")
    with pytest.raises(sqs.exceptions.InvalidAttributeName) as error:
        sqs.create_queue(QueueName=name, Attributes={"ContentBasedDeduplication": "false"})
    assert error_of(error) == ("InvalidAttributeName", "Unknown Attribute ContentBasedDeduplication.")
    with pytest.raises(sqs.exceptions.InvalidAttributeName) as error:
        sqs.create_queue(QueueName=name, Attributes={"DeduplicationScope": "queue"})
    assert error_of(error)[1] == "You can specify the DeduplicationScope only when FifoQueue is set to true."
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    with pytest.raises(sqs.exceptions.InvalidAttributeName):
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"FifoQueue": "true"})
    fifo = fifo_queue(sqs, "ftype")
    sqs.set_queue_attributes(QueueUrl=fifo, Attributes={"FifoQueue": "true"})
    with pytest.raises(sqs.exceptions.InvalidAttributeValue) as error:
        sqs.set_queue_attributes(QueueUrl=fifo, Attributes={"FifoQueue": "false"})
    assert error_of(error)[1] == "Invalid value for the parameter FifoQueue. Reason: Modifying queue type is not supported."


def test_bare_queue_names_and_request_ids(sqs):
    name = unique("bare")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    sent = sqs.send_message(QueueUrl=name, MessageBody="by name")
    got = sqs.receive_message(QueueUrl=name, WaitTimeSeconds=5)["Messages"][0]
    assert got["MessageId"] == sent["MessageId"]
    sqs.delete_message(QueueUrl=name, ReceiptHandle=got["ReceiptHandle"])
    assert sqs.get_queue_attributes(QueueUrl=name, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"].endswith(":" + name)
    # Every answer names its request, errors too.
    ids = {sent["ResponseMetadata"]["RequestId"], sqs.list_queues()["ResponseMetadata"]["RequestId"]}
    assert len(ids) == 2 and all(len(i) == 36 for i in ids)
    with pytest.raises(sqs.exceptions.QueueDoesNotExist) as error:
        sqs.send_message(QueueUrl=url + "-nope", MessageBody="m")
    assert error.value.response["ResponseMetadata"]["RequestId"]
    assert error.value.response["Error"]["Message"] == "The specified queue does not exist."
    with pytest.raises(sqs.exceptions.QueueDoesNotExist) as error:
        sqs.get_queue_url(QueueName=name + "-nope")
    assert error.value.response["Error"]["Message"] == "The specified queue does not exist."


def test_message_attribute_name_prefixes(sqs):
    url = sqs.create_queue(QueueName=unique("prefix"), Attributes={"VisibilityTimeout": "0"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="msg", MessageAttributes={
        "Help.Me": {"DataType": "String", "StringValue": "Me"},
        "Hello": {"DataType": "String", "StringValue": "There"},
        "General": {"DataType": "String", "StringValue": "Kenobi"},
    })

    def names(asked):
        message = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5, MessageAttributeNames=asked)["Messages"][0]
        return sorted(message.get("MessageAttributes", {}))

    assert names(["Hel.*"]) == ["Hello", "Help.Me"]
    assert names(["*"]) == names(["All"]) == names([".*"]) == ["General", "Hello", "Help.Me"]
    assert names(["Help.*", "General"]) == ["General", "Help.Me"]
    assert names(["Foo", "Help"]) == []


def test_batch_error_texts(sqs):
    url = sqs.create_queue(QueueName=unique("texts"))["QueueUrl"]
    cases = [
        (lambda: sqs.send_message_batch(QueueUrl=url, Entries=[]), "There should be at least one SendMessageBatchRequestEntry in the request."),
        (lambda: sqs.delete_message_batch(QueueUrl=url, Entries=[]), "There should be at least one DeleteMessageBatchRequestEntry in the request."),
        (lambda: sqs.change_message_visibility_batch(QueueUrl=url, Entries=[]), "There should be at least one ChangeMessageVisibilityBatchRequestEntry in the request."),
        (lambda: sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "a:b", "MessageBody": "m"}]),
         "A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long."),
        (lambda: sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": f"e{i}", "MessageBody": "m"} for i in range(20)]),
         "Maximum number of entries per request are 10. You have sent 20."),
    ]
    for call, message in cases:
        with pytest.raises(ClientError) as error:
            call()
        assert error.value.response["Error"]["Message"] == message


def test_policy_and_encryption_attributes_kept_as_set(sqs):
    url = sqs.create_queue(QueueName=unique("kept"))["QueueUrl"]
    kms = {"KmsMasterKeyId": "testKeyId", "KmsDataKeyReusePeriodSeconds": "6000", "SqsManagedSseEnabled": "false"}
    sqs.set_queue_attributes(QueueUrl=url, Attributes=kms)
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=list(kms))["Attributes"] == kms
    with pytest.raises(sqs.exceptions.InvalidAttributeName):
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"KmsMasterKeyId": "k", "SqsManagedSseEnabled": "true"})
    sse = sqs.create_queue(QueueName=unique("sse"), Attributes={"SqsManagedSseEnabled": "true"})["QueueUrl"]
    assert sqs.get_queue_attributes(QueueUrl=sse, AttributeNames=list(kms))["Attributes"] == {"SqsManagedSseEnabled": "true"}
    policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": "*", "Action": "sqs:SendMessage", "Resource": "*"}]}
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": json.dumps(policy)})
    shown = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert json.loads(shown["Policy"]) == policy
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": ""})
    assert "Policy" not in sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    with pytest.raises(sqs.exceptions.InvalidAttributeValue):
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": "not json"})


def test_permissions_lifecycle(sqs):
    url = sqs.create_queue(QueueName=unique("perm"))["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sqs.add_permission(QueueUrl=url, Label="cross", AWSAccountIds=["111111111111", "668614515564"], Actions=["ReceiveMessage"])
    policy = json.loads(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])["Attributes"]["Policy"])
    assert policy == {
        "Version": "2008-10-17", "Id": f"{arn}/SQSDefaultPolicy",
        "Statement": [{
            "Sid": "cross", "Effect": "Allow",
            "Principal": {"AWS": ["arn:aws:iam::111111111111:root", "arn:aws:iam::668614515564:root"]},
            "Action": "SQS:ReceiveMessage", "Resource": arn,
        }],
    }
    with pytest.raises(ClientError) as error:
        sqs.add_permission(QueueUrl=url, Label="cross", AWSAccountIds=["668614515564"], Actions=["SendMessage"])
    assert error_of(error) == ("InvalidParameterValue", "Value cross for parameter Label is invalid. Reason: Already exists.")
    sqs.remove_permission(QueueUrl=url, Label="cross")
    assert "Attributes" not in sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])
    with pytest.raises(ClientError) as error:
        sqs.remove_permission(QueueUrl=url, Label="cross")
    assert error_of(error) == ("InvalidParameterValue", "Value cross for parameter Label is invalid. Reason: can't find label.")


def dead_letter_pair(sqs, prefix: str):
    """A FIFO source queue whose messages go to a FIFO dead-letter queue
    after one receive; returns (source url, dead url, dead arn)."""
    dead_url = fifo_queue(sqs, prefix + "-dlq")
    dead_arn = sqs.get_queue_attributes(QueueUrl=dead_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    policy = json.dumps({"deadLetterTargetArn": dead_arn, "maxReceiveCount": "1"})
    url = fifo_queue(sqs, prefix, RedrivePolicy=policy)
    return url, dead_url, dead_arn


def dead_letter(sqs, url: str, dead_url: str, count: int):
    """Receives `count` messages once each and makes them visible again: to
    the dead-letter queue they go."""
    for _ in range(count):
        got = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"][0]
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=got["ReceiptHandle"], VisibilityTimeout=0)
    wait_for(lambda: counts(sqs, dead_url)[0] == count, "the dead letters")


def test_message_move_task_keeps_groups_order_and_dedup_ids(sqs):
    url, dead_url, dead_arn = dead_letter_pair(sqs, "move")
    sent = [("g", "g1"), ("g", "g2"), ("h", "h1"), ("g", "g3")]
    for group, body in sent:
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId=group, MessageDeduplicationId=f"d-{body}")
    dead_letter(sqs, url, dead_url, len(sent))
    with pytest.raises(ClientError) as error:
        sqs.start_message_move_task(SourceArn=sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"])
    assert error_of(error) == ("InvalidParameterValue", "Source queue must be configured as a Dead Letter Queue.")
    handle = sqs.start_message_move_task(SourceArn=dead_arn)["TaskHandle"]
    assert handle

    def finished():
        results = sqs.list_message_move_tasks(SourceArn=dead_arn)["Results"]
        return results if results[0]["Status"] == "COMPLETED" else None

    results = wait_for(finished, "the move task to complete")
    assert results[0]["ApproximateNumberOfMessagesMoved"] == results[0]["ApproximateNumberOfMessagesToMove"] == 4
    assert "TaskHandle" not in results[0]
    assert counts(sqs, dead_url) == (0, 0, 0)
    # Back in their source queue: each group in order, group ids and dedup
    # ids kept, none dropped as a duplicate of its own first send.
    received = []
    for _ in range(len(sent) * 4):
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1, AttributeNames=["All"]).get("Messages", [])
        for message in got:
            received.append((message["Attributes"]["MessageGroupId"], message["Body"], message["Attributes"]["MessageDeduplicationId"]))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        if len(received) == len(sent):
            break
    assert sorted(received) == sorted((g, b, f"d-{b}") for g, b in sent)
    assert [b for g, b, _ in received if g == "g"] == ["g1", "g2", "g3"]


def test_message_move_task_one_at_a_time_and_cancel(sqs):
    url, dead_url, dead_arn = dead_letter_pair(sqs, "movecancel")
    for i in range(20):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{i}", MessageGroupId=f"g{i}")
    dead_letter(sqs, url, dead_url, 20)
    # One message a second: twenty seconds of work, cancelled long before.
    handle = sqs.start_message_move_task(SourceArn=dead_arn, MaxNumberOfMessagesPerSecond=1)["TaskHandle"]
    with pytest.raises(ClientError) as error:
        sqs.start_message_move_task(SourceArn=dead_arn)
    assert error_of(error)[0] == "InvalidParameterValue"
    running = sqs.list_message_move_tasks(SourceArn=dead_arn, MaxResults=10)["Results"]
    assert [(r["Status"], r["TaskHandle"], r["MaxNumberOfMessagesPerSecond"]) for r in running] == [("RUNNING", handle, 1)]
    moved = sqs.cancel_message_move_task(TaskHandle=handle)["ApproximateNumberOfMessagesMoved"]
    assert moved < 20
    results = wait_for(lambda: [r for r in sqs.list_message_move_tasks(SourceArn=dead_arn)["Results"] if r["Status"] == "CANCELLED"], "the cancel")
    left = counts(sqs, dead_url)[0]
    assert results[0]["ApproximateNumberOfMessagesMoved"] + left == 20 and left > 0
    with pytest.raises(ClientError) as error:
        sqs.cancel_message_move_task(TaskHandle="bm90IGEgaGFuZGxl")
    assert error_of(error)[0] == "InvalidParameterValue"
    # A new task may start once the last one is over, and moves the rest.
    sqs.start_message_move_task(SourceArn=dead_arn)
    wait_for(lambda: sqs.list_message_move_tasks(SourceArn=dead_arn)["Results"][0]["Status"] == "COMPLETED", "the second task")
    assert counts(sqs, dead_url) == (0, 0, 0)
    assert counts(sqs, url)[0] == 20
