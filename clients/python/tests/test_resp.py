"""The client over the daemon's Redis protocol: ``Client("resp://…")``
is a RespClient (through redis-py) with the same methods, and the Worker
runs over it unchanged, its acks riding on the next pop."""

from __future__ import annotations

import threading
from typing import List

import pytest

from hotq import Client, LeaseLost, Message, Worker, WorkerPolicy
from hotq.resp import RespClient


def test_a_resp_address_gives_the_same_client_over_redis_py(daemon) -> None:
    with Client(daemon.resp_url) as client:
        assert isinstance(client, RespClient)
        assert client.push("jobs", b"one").pushed == 1
        assert client.push_batch("jobs", [b"two", b"DELAY", b"four"]).pushed == 3
        assert client.stats("jobs").depth == 4
        assert client.peek("jobs").data == b"one"
        assert [m.data for m in client.pop("jobs", max=2)] == [b"one", b"two"]
        leased = client.pop("jobs", lease_ms=30_000)
        assert leased[0].data == b"DELAY" and leased[0].delivery_count == 1
        assert client.extend("jobs", leased[0].receipt, 60_000) > 0
        assert client.nack("jobs", leased[0].receipt).outcome == "requeued"
        messages, outcomes = client.pop_and_ack("jobs", [], wait_ms=10, lease_ms=30_000, max=5)
        assert [m.data for m in messages] == [b"DELAY", b"four"] and outcomes == []
        receipts = [m.receipt for m in messages]
        _, outcomes = client.pop_and_ack("jobs", receipts + ["junk"], wait_ms=10, lease_ms=30_000)
        assert outcomes == [(receipts[0], "acked"), (receipts[1], "acked"), ("junk", "invalid")]
        with pytest.raises(LeaseLost):
            client.ack("jobs", receipts[0])
        assert client.leases("jobs").leases == []
        assert client.queues().queues[0].queue == "jobs"
        assert client.update_settings("jobs", {"max_deliveries": 3}).settings.max_deliveries == 3
        assert client.pq_push("p", b"low", -1).pushed == 1
        assert [m.data for m in client.pq_pop("p", "min")] == [b"low"]
        assert client.purge("jobs").done
        assert client.healthy()


def test_the_worker_runs_over_resp(daemon) -> None:
    with Client(daemon.resp_url) as client:
        items = [f"item-{i}".encode() for i in range(60)]
        client.push_batch("work", items)
        seen: List[bytes] = []
        lock = threading.Lock()

        def handle(message: Message) -> None:
            with lock:
                seen.append(message.data)

        policy = WorkerPolicy(lease_ms=30_000, wait_ms=100, concurrency=3, stop_when_drained=True)
        Worker(client, "work", handle, policy).run()
        assert sorted(seen) == sorted(items)
        stats = client.stats("work")
        assert stats.depth == 0 and stats.leased == 0


def test_resp_push_takes_a_fairness_key(daemon) -> None:
    with Client(daemon.resp_url) as client:
        assert client.push_batch("fair-resp", [b"n"] * 5, fair_key="noisy").pushed == 5
        assert client.push("fair-resp", b"q", fair_key="quiet").pushed == 1
        assert client.stats("fair-resp").fair_backlog == (("noisy", 5), ("quiet", 1))
        first = [m.data for m in client.pop("fair-resp", max=3)]
        assert first[0] == b"n" and b"q" in first[1:], first
