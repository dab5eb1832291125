"""A queue's limits through the client: ``leases_max`` and ``pop_rate_max``
set, read back and refused out of range; a leased pop the lease limit
holds back comes back empty (never an error) until an ack frees a place;
against the real daemon."""

from __future__ import annotations

import threading
import time
from typing import List

import pytest

import hotq
from hotq import Client

WAIT_S = 30


def test_leases_max_holds_a_leased_pop_back_until_an_ack(daemon) -> None:
    with Client(daemon.url) as client:
        changed = client.update_settings("lim", {"leases_max": 1, "pop_rate_max": 1000})
        assert (changed.stored.leases_max, changed.stored.pop_rate_max) == (1, 1000)
        # The burst nobody set: a tenth of a second's worth.
        assert changed.stored.pop_rate_burst is None
        assert changed.settings.pop_rate_burst == 100
        read = client.settings("lim")
        assert (read.settings.leases_max, read.settings.pop_rate_max) == (1, 1000)

        client.push_batch("lim", [b"first", b"second"])
        [first] = client.pop("lim", lease_ms=60_000)
        assert first.data == b"first"
        # At the limit: a no-wait leased pop answers empty, not an error.
        assert client.pop("lim", lease_ms=60_000) == []
        assert client.stats("lim").leased == 1
        # A long-poll at the limit waits in line (stats count it) until an
        # ack frees the place, then gets the next item.
        popped: List[List[hotq.Message]] = []
        waiter = threading.Thread(
            target=lambda: popped.append(client.pop("lim", lease_ms=60_000, wait_ms=30_000))
        )
        waiter.start()
        deadline = time.monotonic() + WAIT_S
        while client.stats("lim").waiting < 1:
            assert time.monotonic() < deadline, "the held pop never waited"
            time.sleep(0.01)
        assert popped == []
        client.ack("lim", first.receipt)
        waiter.join(timeout=WAIT_S)
        [[second]] = popped
        assert second.data == b"second"
        client.ack("lim", second.receipt)


def test_limits_out_of_range_are_refused_and_reset_with_none(daemon) -> None:
    with Client(daemon.url) as client:
        client.update_settings("lim2", {"leases_max": 10, "pop_rate_max": 50, "pop_rate_burst": 5})
        for bad in ({"leases_max": 0}, {"pop_rate_max": 1_000_001}, {"pop_rate_burst": 0}):
            with pytest.raises(hotq.BadRequest) as refused:
                client.update_settings("lim2", bad)
            assert refused.value.code == "invalid_settings"
        stored = client.settings("lim2").stored
        assert (stored.leases_max, stored.pop_rate_max, stored.pop_rate_burst) == (10, 50, 5)
        reset = client.update_settings("lim2", {"leases_max": None, "pop_rate_max": None, "pop_rate_burst": None})
        assert (reset.settings.leases_max, reset.settings.pop_rate_max, reset.settings.pop_rate_burst) == (None, None, None)


def test_a_tenant_at_its_lease_limit_is_passed_over(daemon) -> None:
    with Client(daemon.url) as client:
        changed = client.update_settings("lim3", {"leases_per_key_max": 1})
        assert changed.settings.leases_per_key_max == 1
        client.push_batch("lim3", [b"a1", b"a2"], fair_key="a")
        client.push_batch("lim3", [b"b1", b"b2"], fair_key="b")
        first = client.pop("lim3", lease_ms=60_000)
        second = client.pop("lim3", lease_ms=60_000)
        # One item of each tenant (their first items tie in the fair order).
        assert sorted(m.data for m in first + second) == [b"a1", b"b1"]
        # Both tenants hold their one lease: nothing more, not an error.
        assert client.pop("lim3", lease_ms=60_000) == []
        client.ack("lim3", first[0].receipt)
        [third] = client.pop("lim3", lease_ms=60_000)
        assert third.data[:1] == first[0].data[:1]
