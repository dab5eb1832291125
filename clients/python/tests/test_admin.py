"""The client covers the API: administration, priority leases, batch
pushes with groups and dedup ids, grouped items in stats, dead-letter
queues by role, and a Worker that stops once the queue is drained; all
against the real daemon."""

from __future__ import annotations

import asyncio
import threading
from typing import List

import pytest

import hotq
from hotq import AsyncClient, BatchItem, Client, Worker, WorkerEvent, WorkerPolicy


def test_admin_list_settings_leases_purge_delete(daemon) -> None:
    with Client(daemon.url) as client:
        client.push_batch("adm", [b"a", b"b", b"c"])
        changed = client.update_settings("adm", {"max_deliveries": 3, "dead_letter_queue": "adm-dlq"})
        assert changed.stored.max_deliveries == 3
        assert changed.settings.dead_letter_queue == "adm-dlq"
        assert client.settings("adm").stored.default_lease_ms is None
        with pytest.raises(hotq.BadRequest) as refused:
            client.update_settings("adm", {"max_deliveries": 0})
        assert refused.value.code == "invalid_settings"

        [leased] = client.pop("adm", lease_ms=60_000)
        page = client.leases("adm")
        assert [lease.receipt for lease in page.leases] == [leased.receipt]
        assert page.leases[0].delivery_count == 1 and page.next is None

        listed = client.queues(limit=10)
        assert [(q.queue, q.depth, q.leased) for q in listed.queues] == [("adm", 2, 1)]
        first = client.queues(limit=1)
        assert first.next == "adm" or first.next is None

        purged = client.purge("adm")
        assert (purged.purged, purged.items, purged.done) == (2, 2, True)
        deleted = client.delete("adm")
        assert (deleted.leased, deleted.held_nothing) == (1, False)
        assert client.delete("never-used").held_nothing
        with pytest.raises(hotq.InvalidReceipt):
            client.ack("adm", "nope")


def test_batch_pushes_carry_groups_and_dedup_ids_and_stats_count_grouped(daemon) -> None:
    with Client(daemon.url) as client:
        result = client.push_batch(
            "orders",
            [
                BatchItem(b"o1", dedup_id="order-1", group="customer-7"),
                BatchItem(b"o2", group="customer-7"),
                b"plain",
            ],
            group="default-group",
        )
        assert result.pushed == 3
        again = client.push_batch("orders", [BatchItem(b"o1 again", dedup_id="order-1")])
        assert (again.pushed, again.duplicate) == (0, True)
        stats = client.stats("orders")
        # o1 and "plain" (in its own group) are heads; o2 waits behind o1.
        assert (stats.depth, stats.grouped) == (2, 1)
        assert stats.dead_letter is False


def test_priority_leases_settle_on_the_priority_queue(daemon) -> None:
    with Client(daemon.url) as client:
        client.pq_push("pq", b"low", priority=1)
        client.pq_push("pq", b"high", priority=9)
        [first] = client.pq_pop("pq", end="max", lease_ms=60_000)
        assert (first.data, first.kind, first.delivery_count) == (b"high", "priority", 1)
        assert first.extend(120_000) > 0
        assert [lease.receipt for lease in client.leases("pq", kind="priority").leases] == [
            first.receipt
        ]
        assert first.nack().outcome == "requeued"
        [again] = client.pq_pop("pq", end="max", lease_ms=60_000)
        assert (again.data, again.delivery_count) == (b"high", 2)
        again.ack()
        with pytest.raises(hotq.LeaseLost):
            again.ack()
        client.update_settings("pq", {"default_lease_ms": 60_000}, kind="priority")
        [leased_by_default] = client.pq_pop("pq")
        assert leased_by_default.receipt is not None
        assert client.pq_stats("pq").leased == 1
        assert client.purge("pq", kind="priority").purged == 0
        assert client.delete("pq", kind="priority").leased == 1


def test_a_named_dead_letter_queue_redrives(daemon) -> None:
    with Client(daemon.url) as client:
        with pytest.raises(hotq.NotDeadLetterQueue):
            client.redrive("graveyard")
        client.update_settings("gy", {"max_deliveries": 1, "dead_letter_queue": "graveyard"})
        client.push("gy", b"x")
        [message] = client.pop("gy", lease_ms=60_000)
        assert message.nack().dead_letter_queue == "graveyard"
        assert client.stats("graveyard").dead_letter
        assert client.redrive("graveyard") == 1
        assert client.stats("gy").depth == 1


def test_a_worker_stops_once_the_queue_is_drained(daemon) -> None:
    handled: List[bytes] = []
    events: List[WorkerEvent] = []
    failed_once = threading.Event()

    def handler(message: hotq.Message) -> None:
        # One failure: its retry is delayed, and the worker waits for it.
        if message.data == b"flaky" and not failed_once.is_set():
            failed_once.set()
            raise RuntimeError("transient")
        handled.append(message.data)

    with Client(daemon.url) as client:
        client.push_batch("drain", [b"a", b"flaky", b"c"])
        policy = WorkerPolicy(
            lease_ms=30_000, wait_ms=50, backoff_ms=100, concurrency=2, stop_when_drained=True
        )
        worker = Worker(client, "drain", handler, policy, on_event=events.append)
        runner = threading.Thread(target=worker.run)
        runner.start()
        runner.join(timeout=60)
        assert not runner.is_alive(), "the worker did not stop once drained"
        assert sorted(handled) == [b"a", b"c", b"flaky"]
        drained = [event for event in events if event.kind == "drained"]
        assert len(drained) == 1 and drained[0].detail.drained
        assert client.stats("drain").drained


def test_async_client_admin_and_drain(daemon) -> None:
    async def run() -> None:
        async with AsyncClient(daemon.url) as client:
            await client.push_batch("aq", [BatchItem(b"x", dedup_id="d1"), b"y"])
            assert (await client.stats("aq")).depth == 2
            assert (await client.settings("aq")).queue == "aq"
            seen: List[bytes] = []

            async def handler(message: hotq.AsyncMessage) -> None:
                seen.append(message.data)

            policy = WorkerPolicy(wait_ms=50, stop_when_drained=True)
            await asyncio.wait_for(hotq.AsyncWorker(client, "aq", handler, policy).run(), 60)
            assert sorted(seen) == [b"x", b"y"]
            assert (await client.queues()).queues[0].queue == "aq"
            assert (await client.delete("aq")).held_nothing

    asyncio.run(run())
