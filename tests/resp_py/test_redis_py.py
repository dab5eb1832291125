"""redis-py against the daemon's RESP listener: a Redis list worker runs
unchanged; hotq's leased pops with acks riding; RESP3; pipelines; AUTH."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest
import redis

HERE = Path(__file__).resolve().parent


def test_a_list_worker_written_for_redis_runs_unchanged(daemon) -> None:
    r = daemon.client()
    count = 200
    worker = subprocess.Popen(
        [sys.executable, str(HERE / "list_worker.py"), daemon.host, str(daemon.port), "jobs", str(count)],
        stdout=subprocess.PIPE, text=True,
    )
    # Produced the Redis way: LPUSH, one at a time and in batches.
    for i in range(100):
        assert r.lpush("jobs", f"job-{i:03}") >= 1
    r.lpush("jobs", *[f"job-{i:03}" for i in range(100, count)])
    out, _ = worker.communicate(timeout=120)
    assert worker.returncode == 0
    # LPUSH + BRPOP is FIFO in Redis, and in hotq.
    assert out.split() == [f"job-{i:03}" for i in range(count)]
    assert r.llen("jobs") == 0


def test_list_commands_answer_as_redis_does(daemon) -> None:
    r = daemon.client()
    assert r.rpush("l", "a", "b", "c") == 3
    assert r.llen("l") == 3
    assert r.lpop("l") == b"a"
    assert r.rpop("l", 5) == [b"b", b"c"]
    assert r.lpop("l") is None
    assert r.lpop("l", 2) is None
    assert r.blpop(["l", "m"], timeout=0.05) is None
    r.rpush("m", "z")
    assert r.blpop(["l", "m"], timeout=1) == (b"m", b"z")


def test_a_leased_worker_with_acks_riding_drains_exactly_once(daemon) -> None:
    r = daemon.client()
    items = [f"item-{i}" for i in range(300)]
    assert r.execute_command("PUSH", "work", *items) == 300
    seen = []
    lock = threading.Lock()

    def work() -> None:
        con = daemon.client()
        receipt = None
        while True:
            args = ["POP", "work", "LEASE", 30000, "WAIT", 200] + (["ACK", receipt] if receipt else [])
            entries, outcomes = con.execute_command(*args)
            assert outcomes == ([b"acked"] if receipt else [])
            receipt = None
            for receipt, delivery_count, item in entries:
                assert delivery_count == 1
                with lock:
                    seen.append(item.decode())
            if not entries and receipt is None:
                with lock:
                    if len(seen) == len(items):
                        return

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert sorted(seen) == sorted(items)
    stats = r.execute_command("STATS", "work")
    # A map in RESP3 (redis-py 8's default), keys and values in RESP2.
    fields = stats if isinstance(stats, dict) else dict(zip(stats[::2], stats[1::2]))
    assert fields[b"depth"] == 0 and fields[b"leased"] == 0


def test_resp3_pipelines_and_errors(daemon) -> None:
    r = daemon.client(protocol=3)
    assert r.ping()
    r.execute_command("PUSH", "q", "x", "y")
    stats = r.execute_command("STATS", "q")
    assert stats[b"depth"] == 2 and stats[b"paused"] is False
    pipe = r.pipeline(transaction=False)
    pipe.execute_command("POP", "q")
    pipe.execute_command("POP", "q")
    pipe.execute_command("POP", "q")
    assert pipe.execute() == [b"x", b"y", None]
    with pytest.raises(redis.ResponseError, match="^invalid_queue_name"):
        r.execute_command("POP", "app:jobs")
    with pytest.raises(redis.ResponseError, match="unknown command"):
        r.execute_command("FROB")
    assert r.ping()


def test_the_token_is_required_through_auth(daemon_with_token) -> None:
    with pytest.raises(redis.AuthenticationError):
        daemon_with_token.client().ping()
    with pytest.raises(redis.AuthenticationError):
        daemon_with_token.client(password="wrong").ping()
    assert daemon_with_token.client(password="py-secret").ping()
    assert daemon_with_token.client(username="default", password="py-secret", protocol=3).ping()
