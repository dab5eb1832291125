"""What the client returns: messages, stats and settle outcomes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Protocol, Tuple


class Settles(Protocol):
    """What a :class:`Message` settles through (a :class:`hotq.Client`).
    A protocol, so this module needs neither client module."""

    def ack(self, queue: str, receipt: str) -> None: ...

    def nack(self, queue: str, receipt: str, delay_ms: Optional[int] = None) -> "NackResult": ...

    def extend(self, queue: str, receipt: str, lease_ms: int) -> int: ...


class SettlesAsync(Protocol):
    """What an :class:`AsyncMessage` settles through (a :class:`hotq.AsyncClient`)."""

    async def ack(self, queue: str, receipt: str) -> None: ...

    async def nack(
        self, queue: str, receipt: str, delay_ms: Optional[int] = None
    ) -> "NackResult": ...

    async def extend(self, queue: str, receipt: str, lease_ms: int) -> int: ...


@dataclass(frozen=True)
class PushResult:
    """Items pushed (in one commit), and when delayed ones become visible.
    ``duplicate`` is true when nothing was stored because every item's
    dedup id was pushed within the queue's dedup window; ``duplicates``
    holds the positions (0-based) of the items left out as duplicates."""

    pushed: int
    visible_at_ms: Optional[int] = None
    duplicate: bool = False
    duplicates: Tuple[int, ...] = ()


@dataclass(frozen=True)
class Stats:
    """A queue's stats."""

    queue: str
    depth: int
    waiting: int
    leased: int
    delayed: int
    oldest_item_age_ms: Optional[int]


@dataclass(frozen=True)
class NackResult:
    """Where a nacked item went: ``outcome`` is ``requeued``, ``delayed``
    (visible again at ``visible_at_ms``) or ``dead_lettered`` (now in
    ``dead_letter_queue``)."""

    outcome: str
    visible_at_ms: Optional[int] = None
    dead_letter_queue: Optional[str] = None

    @property
    def dead_lettered(self) -> bool:
        return self.outcome == "dead_lettered"


@dataclass
class Message:
    """One popped item. ``receipt``, ``delivery_count`` and
    ``lease_expires_at_ms`` are set when it was popped with a lease; then
    ``ack()``, ``nack()`` and ``extend()`` settle it on its queue."""

    queue: str
    data: bytes
    enqueued_at_ms: int
    receipt: Optional[str] = None
    delivery_count: Optional[int] = None
    lease_expires_at_ms: Optional[int] = None
    dead_letter_from: Optional[str] = None
    dead_letter_deliveries: Optional[int] = None
    group: Optional[str] = None
    _client: Any = field(default=None, repr=False, compare=False)

    def _leased(self) -> str:
        if self.receipt is None:
            raise ValueError("this message was popped without a lease: nothing to settle")
        return self.receipt

    def ack(self) -> None:
        """Done: the item is deleted. Raises :class:`LeaseLost` if too late."""
        client: Settles = self._client
        client.ack(self.queue, self._leased())

    def nack(self, delay_ms: Optional[int] = None) -> NackResult:
        """Back to the queue now, or after ``delay_ms``, or dead-lettered."""
        client: Settles = self._client
        return client.nack(self.queue, self._leased(), delay_ms)

    def extend(self, lease_ms: int) -> int:
        """The lease now ends ``lease_ms`` from now; returns the new expiry."""
        client: Settles = self._client
        expires = client.extend(self.queue, self._leased(), lease_ms)
        self.lease_expires_at_ms = expires
        return expires


@dataclass
class AsyncMessage(Message):
    """A :class:`Message` from an :class:`AsyncClient`: settles are awaited."""

    async def ack(self) -> None:  # type: ignore[override]
        client: SettlesAsync = self._client
        await client.ack(self.queue, self._leased())

    async def nack(self, delay_ms: Optional[int] = None) -> NackResult:  # type: ignore[override]
        client: SettlesAsync = self._client
        return await client.nack(self.queue, self._leased(), delay_ms)

    async def extend(self, lease_ms: int) -> int:  # type: ignore[override]
        client: SettlesAsync = self._client
        expires = await client.extend(self.queue, self._leased(), lease_ms)
        self.lease_expires_at_ms = expires
        return expires


