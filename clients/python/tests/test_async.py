"""The asyncio client against the real daemon."""

from __future__ import annotations

import asyncio

import pytest

import hotq
from hotq import AsyncClient


def test_async_client(daemon) -> None:
    async def scenario() -> None:
        async with AsyncClient(daemon.url) as client:
            assert await client.healthy()
            await client.push("jobs", b"one")
            await client.push_batch("jobs", [b"two", b"three"])
            assert (await client.stats("jobs")).depth == 3
            peeked = await client.peek("jobs")
            assert peeked is not None and peeked.data == b"one"
            leased = await client.pop("jobs", lease_ms=60_000, max=2)
            assert [m.data for m in leased] == [b"one", b"two"]
            assert await leased[0].extend(90_000) > 0
            await leased[0].ack()
            assert (await leased[1].nack()).outcome == "requeued"
            # A long poll answered by a push made while it waits.
            waiting = asyncio.ensure_future(client.pop("later", wait_ms=30_000))
            for _ in range(3_000):  # bounded: 30 s
                if (await client.stats("later")).waiting >= 1:
                    break
                await asyncio.sleep(0.01)
            await client.push("later", b"arrived")
            assert [m.data for m in await waiting] == [b"arrived"]
            outcomes = await client.ack_batch("jobs", ["nope"])
            assert outcomes == [("nope", "invalid")]
            with pytest.raises(hotq.LeaseLost):
                await leased[0].ack()
            with pytest.raises(hotq.InvalidQueueName):
                await client.stats("a b")

    asyncio.run(scenario())
