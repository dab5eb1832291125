"""The worker helper against the real daemon, judged by its events."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Callable, List

import hotq
from hotq import Client, Message, Worker, WorkerEvent, WorkerPolicy

BOUND_S = 30.0


class Events:
    """Collects a worker's events; waits for a condition on them."""

    def __init__(self) -> None:
        self.seen: List[WorkerEvent] = []
        self.changed = threading.Condition()

    def __call__(self, event: WorkerEvent) -> None:
        with self.changed:
            self.seen.append(event)
            self.changed.notify_all()

    def kinds(self, kind: str) -> List[WorkerEvent]:
        with self.changed:
            return [e for e in self.seen if e.kind == kind]

    def wait(self, what: str, condition: Callable[[], bool]) -> None:
        with self.changed:
            assert self.changed.wait_for(condition, BOUND_S), f"{what}: {self.seen}"


def test_success_acks_every_item_with_bounded_concurrency(daemon) -> None:
    events = Events()
    handled: List[bytes] = []
    in_flight, most_in_flight = [0], [0]
    lock = threading.Lock()

    def handler(message: Message) -> None:
        with lock:
            in_flight[0] += 1
            most_in_flight[0] = max(most_in_flight[0], in_flight[0])
            handled.append(message.data)
        with lock:
            in_flight[0] -= 1

    with Client(daemon.url) as client:
        items = [f"item-{n}".encode() for n in range(20)]
        client.push_batch("ok", items)
        policy = WorkerPolicy(lease_ms=60_000, wait_ms=200, concurrency=3)
        worker = Worker(client, "ok", handler, policy, on_event=events).start()
        events.wait("20 acks", lambda: len([e for e in events.seen if e.kind == "acked"]) == 20)
        worker.stop(timeout_s=BOUND_S)
        assert not any(t.is_alive() for t in worker._threads)
        assert sorted(handled) == sorted(items)
        assert most_in_flight[0] <= 3
        stats = client.stats("ok")
        assert (stats.depth, stats.leased) == (0, 0)


def test_an_exception_nacks_and_the_item_is_redelivered(daemon) -> None:
    events = Events()
    deliveries: List[int] = []

    def handler(message: Message) -> None:
        deliveries.append(message.delivery_count or 0)
        if message.delivery_count == 1:
            raise RuntimeError("first try fails")

    with Client(daemon.url) as client:
        client.push("flaky", b"job")
        policy = WorkerPolicy(lease_ms=60_000, wait_ms=200, backoff_ms=1)
        worker = Worker(client, "flaky", handler, policy, on_event=events).start()
        events.wait("an ack", lambda: any(e.kind == "acked" for e in events.seen))
        worker.stop(timeout_s=BOUND_S)
        kinds = [e.kind for e in events.seen if e.kind != "extended"]
        assert kinds == ["failed", "nacked", "acked"], events.seen
        assert isinstance(events.kinds("failed")[0].detail, RuntimeError)
        assert events.kinds("nacked")[0].detail.outcome in ("requeued", "delayed")
        assert deliveries == [1, 2]


def test_heartbeats_keep_the_lease_past_its_original_expiry(daemon) -> None:
    events = Events()
    calls: List[Message] = []
    kept = threading.Event()

    def on_event(event: WorkerEvent) -> None:
        events(event)
        message = event.message
        if event.kind == "extended" and message is not None and calls:
            original = calls[0].lease_expires_at_ms
            beats = len(events.kinds("extended"))
            # Three beats, and the original expiry has passed.
            if beats >= 3 and original is not None and time.time() * 1000 > original:
                kept.set()

    def handler(message: Message) -> None:
        calls.append(Message(**{**message.__dict__}))  # its terms as popped
        assert kept.wait(BOUND_S), "no heartbeat outlived the original lease"

    with Client(daemon.url) as client:
        client.push("slow", b"long job")
        # A 600 ms lease, extended every 200 ms; a second poller would get
        # the item if the lease ran out.
        policy = WorkerPolicy(lease_ms=600, wait_ms=200, concurrency=2)
        worker = Worker(client, "slow", handler, policy, on_event=on_event).start()
        events.wait("the ack", lambda: any(e.kind == "acked" for e in events.seen))
        worker.stop(timeout_s=BOUND_S)
        assert len(calls) == 1 and calls[0].delivery_count == 1
        assert not events.kinds("lease_lost")
        assert (client.stats("slow").depth, client.stats("slow").leased) == (0, 0)


def test_stop_finishes_the_item_in_hand(daemon) -> None:
    events = Events()
    started, release = threading.Event(), threading.Event()

    def handler(message: Message) -> None:
        started.set()
        assert release.wait(BOUND_S)

    with Client(daemon.url) as client:
        client.push("stopping", b"in hand")
        worker = Worker(client, "stopping", handler, WorkerPolicy(wait_ms=200), on_event=events)
        worker.start()
        assert started.wait(BOUND_S)
        stopper = threading.Thread(target=worker.stop, args=(BOUND_S,))
        stopper.start()
        release.set()
        stopper.join(BOUND_S)
        assert not stopper.is_alive()
        assert [e.kind for e in events.seen if e.kind != "extended"] == ["acked"]
        assert client.stats("stopping").leased == 0


def test_async_worker(daemon) -> None:
    events = Events()

    async def scenario() -> None:
        async with hotq.AsyncClient(daemon.url) as client:
            await client.push_batch("async", [b"good", b"bad"])

            async def handler(message: hotq.AsyncMessage) -> None:
                if message.data == b"bad" and message.delivery_count == 1:
                    raise ValueError("bad on first delivery")

            policy = WorkerPolicy(lease_ms=60_000, wait_ms=200, concurrency=2, backoff_ms=1)
            worker = hotq.AsyncWorker(client, "async", handler, policy, on_event=events)
            running = asyncio.ensure_future(worker.run())
            for _ in range(3_000):  # bounded: 30 s
                if len(events.kinds("acked")) == 2:
                    break
                await asyncio.sleep(0.01)
            worker.stop()
            await asyncio.wait_for(running, BOUND_S)
            acked = sorted(e.message.data for e in events.kinds("acked") if e.message)
            assert acked == [b"bad", b"good"]
            assert [e.kind for e in events.seen if e.message and e.message.data == b"bad"][:2] == [
                "failed", "nacked",
            ]

    asyncio.run(scenario())


def test_acks_ride_on_the_next_pop_and_the_last_is_flushed_on_stop(daemon) -> None:
    events = Events()
    flushed: List[List[str]] = []

    class Counting(Client):
        def ack_batch(self, queue, receipts):  # type: ignore[no-untyped-def]
            flushed.append(list(receipts))
            return super().ack_batch(queue, receipts)

    with Counting(daemon.url) as client:
        items = [f"ride-{n}".encode() for n in range(6)]
        client.push_batch("ride", items)
        policy = WorkerPolicy(lease_ms=60_000, wait_ms=100, concurrency=1)
        worker = Worker(client, "ride", lambda m: None, policy, on_event=events).start()
        # Five acks ride on pops; the sixth rides on the pop after it, or
        # is flushed by stop.
        events.wait("5 acks", lambda: len([e for e in events.seen if e.kind == "acked"]) >= 5)
        worker.stop(timeout_s=BOUND_S)
        assert len(events.kinds("acked")) == 6, events.seen
        assert all(len(receipts) <= 1 for receipts in flushed), "only the last ack is flushed"
        stats = client.stats("ride")
        assert (stats.depth, stats.leased) == (0, 0)


def test_pop_and_ack_reports_each_receipt_in_order(daemon) -> None:
    with Client(daemon.url) as client:
        client.push_batch("pa", [b"a", b"b"])
        first = client.pop("pa", lease_ms=60_000)[0]
        assert first.receipt
        messages, outcomes = client.pop_and_ack(
            "pa", [first.receipt, "nope", first.receipt], lease_ms=60_000
        )
        assert [m.data for m in messages] == [b"b"]
        assert outcomes == [
            (first.receipt, "acked"),
            ("nope", "invalid"),
            (first.receipt, "unknown_receipt"),
        ]
        messages, outcomes = client.pop_and_ack("pa", [messages[0].receipt or ""])
        assert messages == [] and outcomes[0][1] == "acked"
        stats = client.stats("pa")
        assert (stats.depth, stats.leased) == (0, 0)
