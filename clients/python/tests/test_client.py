"""Every method of the sync client against the real daemon."""

from __future__ import annotations

import pytest

import hotq
from hotq import BadRequest, BatchItem, Client


def test_push_pop_peek_stats(daemon) -> None:
    with Client(daemon.url) as client:
        assert client.healthy()
        assert client.push("jobs", b"one").pushed == 1
        assert client.push_batch("jobs", [b"two", b"\x00three\n", b"four"]).pushed == 3
        delayed = client.push("jobs", b"later", delay_ms=60_000)
        assert delayed.visible_at_ms is not None
        stats = client.stats("jobs")
        assert (stats.queue, stats.depth, stats.delayed, stats.leased) == ("jobs", 4, 1, 0)
        peeked = client.peek("jobs")
        assert peeked is not None and peeked.data == b"one"
        [first] = client.pop("jobs")
        assert (first.data, first.receipt, first.delivery_count) == (b"one", None, None)
        rest = client.pop("jobs", max=10)
        # Binary-safe: a NUL and a newline come back as sent.
        assert [m.data for m in rest] == [b"two", b"\x00three\n", b"four"]
        assert client.pop("jobs") == []
        assert client.peek("jobs") is None
        with pytest.raises(ValueError):
            first.ack()  # not leased: nothing to settle


def test_dedup_push_answers_duplicate(daemon) -> None:
    with Client(daemon.url) as client:
        first = client.push("orders", b"x", dedup_id="order-42")
        assert (first.pushed, first.duplicate, first.duplicates) == (1, False, ())
        again = client.push("orders", b"x", dedup_id="order-42")
        assert (again.pushed, again.duplicate) == (0, True)
        assert client.stats("orders").depth == 1


def test_a_group_hands_out_one_item_at_a_time_in_push_order(daemon) -> None:
    with Client(daemon.url) as client:
        for data in (b"g1", b"g2"):
            client.push("invoices", data, group="customer-7")
        client.push("invoices", b"other", group="customer-8")
        first = client.pop("invoices", lease_ms=60_000, max=3)
        # One head per group: g2 waits until g1 is acked.
        assert sorted((m.group, m.data) for m in first) == [
            ("customer-7", b"g1"),
            ("customer-8", b"other"),
        ]
        assert client.pop("invoices", lease_ms=60_000) == []
        for message in first:
            message.ack()
        (second,) = client.pop("invoices", lease_ms=60_000)
        assert (second.group, second.data) == ("customer-7", b"g2")
        second.ack()


def test_leases_ack_nack_extend_and_batch_ack(daemon) -> None:
    with Client(daemon.url) as client:
        client.push_batch("work", [b"a", b"b", b"c"])
        leased = client.pop("work", lease_ms=60_000, max=3)
        assert [m.delivery_count for m in leased] == [1, 1, 1]
        a, b, c = leased
        original = a.lease_expires_at_ms
        assert original is not None
        assert a.extend(120_000) > original
        assert a.lease_expires_at_ms is not None and a.lease_expires_at_ms > original
        a.ack()
        with pytest.raises(hotq.LeaseLost) as late:
            a.ack()
        assert (late.value.status, late.value.code) == (404, "unknown_receipt")
        nacked = b.nack()
        assert (nacked.outcome, nacked.dead_lettered) == ("requeued", False)
        [again] = client.pop("work", lease_ms=60_000)
        assert (again.data, again.delivery_count) == (b"b", 2)
        outcomes = client.ack_batch("work", [again.receipt, c.receipt, "nope"])
        assert outcomes == [(again.receipt, "acked"), (c.receipt, "acked"), ("nope", "invalid")]
        assert client.stats("work").leased == 0


def test_dead_letters_and_redrive(daemon) -> None:
    with Client(daemon.url) as client:
        client.push("poison", b"bad")
        for delivery in (1, 2):
            [message] = client.pop("poison", lease_ms=60_000)
            assert message.delivery_count == delivery
            result = message.nack()
        assert result.dead_lettered and result.dead_letter_queue == "poison.dead"
        [dead] = client.pop("poison.dead", max=5)
        assert (dead.data, dead.dead_letter_from, dead.dead_letter_deliveries) == (
            b"bad", "poison", 2,
        )
        client.push("poison2", b"x")
        [m] = client.pop("poison2", lease_ms=60_000)
        delayed = m.nack(delay_ms=60_000)
        assert delayed.outcome == "delayed" and delayed.visible_at_ms is not None
        assert client.redrive("poison.dead") == 0


def test_priority_queue(daemon) -> None:
    with Client(daemon.url) as client:
        client.pq_push("tasks", b"routine", priority=5)
        client.pq_push("tasks", b"urgent", priority=-3)
        assert [m.data for m in client.pq_pop("tasks", end="min")] == [b"urgent"]
        assert [m.data for m in client.pq_pop("tasks", end="max", max=5)] == [b"routine"]


def test_errors_are_typed_by_code(daemon, secured) -> None:
    with Client(daemon.url) as client:
        with pytest.raises(hotq.InvalidQueueName) as bad:
            client.push("a b", b"x")
        assert (bad.value.status, bad.value.code) == (400, "invalid_queue_name")
        client.push("left", b"x")
        [m] = client.pop("left", lease_ms=60_000)
        assert m.receipt is not None
        with pytest.raises(hotq.ReceiptQueueMismatch):
            client.ack("right", m.receipt)
        with pytest.raises(hotq.BadRequest) as param:
            client.pop("left", lease_ms=0)
        assert param.value.code == "bad_parameter"
        with pytest.raises(hotq.TooLarge):
            client.push("left", b"x" * (1_048_576 + 1))
    with Client(secured.url) as anonymous:
        with pytest.raises(hotq.Unauthorized):
            anonymous.stats("jobs")
    with Client(secured.url, token="s3cret") as client:
        assert client.stats("jobs").depth == 0
    # Nothing listens on a port the daemon just left.
    daemon.stop()
    with Client(daemon.url, timeout_s=5) as gone:
        with pytest.raises(hotq.ConnectError):
            gone.stats("jobs")


def test_the_pop_timeout_outlasts_wait_ms(daemon) -> None:
    # A client timeout shorter than the wait: the pop still waits it out
    # and answers empty instead of timing out.
    with Client(daemon.url, timeout_s=0.2) as client:
        assert client.pop("idle", wait_ms=1_000) == []


def test_fairness_keys_share_pops_by_weight(daemon) -> None:
    """A noisy key's backlog pushed first, then two keys of weights 3 and
    2 (one by the batch's ``fair_key``, one per BatchItem): each round
    after the noisy head serves noisy 1, ``a`` 3, ``b`` 2."""
    with Client(daemon.url) as client:
        client.update_settings("tenants", {"fair_weights": {"a": 3, "b": 2}})
        client.push_batch("tenants", [b"noisy"] * 20, fair_key="noisy")
        for _ in range(6):
            client.push("tenants", b"a", fair_key="a")
        client.push_batch("tenants", [BatchItem(b"b", fair_key="b") for _ in range(4)])
        stats = client.stats("tenants")
        assert stats.fair_backlog == (("noisy", 20), ("a", 6), ("b", 4))
        labels = [client.pop("tenants")[0].data.decode() for _ in range(13)]
        for m in range(3):
            window = labels[: 1 + 6 * m]
            counts = (window.count("noisy"), window.count("a"), window.count("b"))
            assert counts == (1 + m, 3 * m, 2 * m), labels
        with pytest.raises(BadRequest) as refused:
            client.push("tenants", b"x", fair_key="two words")
        assert refused.value.code == "bad_fair_key"


def test_priority_fairness_keys_share_one_priority(daemon) -> None:
    """A noisy key's backlog at priority 5, then a quiet key there: a min
    pop takes the quiet item one step past the noisy head; a lower
    priority still comes first."""
    with Client(daemon.url) as client:
        for _ in range(5):
            client.pq_push("pq-tenants", b"noisy", 5, fair_key="noisy")
        client.pq_push("pq-tenants", b"quiet", 5, fair_key="quiet")
        client.pq_push("pq-tenants", b"urgent", 1)
        labels = [client.pq_pop("pq-tenants")[0].data.decode() for _ in range(4)]
        assert labels[:2] == ["urgent", "noisy"], labels
        assert "quiet" in labels[2:], labels
        with pytest.raises(BadRequest) as refused:
            client.pq_push("pq-tenants", b"x", 5, fair_key="two words")
        assert refused.value.code == "bad_fair_key"
