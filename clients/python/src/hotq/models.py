"""What the client returns: messages, stats and settle outcomes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Optional, Protocol, Tuple


class Settles(Protocol):
    """What a :class:`Message` settles through (a :class:`hotq.Client`).
    A protocol, so this module needs neither client module."""

    def ack(self, queue: str, receipt: str) -> None: ...

    def nack(self, queue: str, receipt: str, delay_ms: Optional[int] = None) -> "NackResult": ...

    def extend(self, queue: str, receipt: str, lease_ms: int) -> int: ...

    def pq_ack(self, queue: str, receipt: str) -> None: ...

    def pq_nack(
        self, queue: str, receipt: str, delay_ms: Optional[int] = None
    ) -> "NackResult": ...

    def pq_extend(self, queue: str, receipt: str, lease_ms: int) -> int: ...


class SettlesAsync(Protocol):
    """What an :class:`AsyncMessage` settles through (a :class:`hotq.AsyncClient`)."""

    async def ack(self, queue: str, receipt: str) -> None: ...

    async def nack(
        self, queue: str, receipt: str, delay_ms: Optional[int] = None
    ) -> "NackResult": ...

    async def extend(self, queue: str, receipt: str, lease_ms: int) -> int: ...

    async def pq_ack(self, queue: str, receipt: str) -> None: ...

    async def pq_nack(
        self, queue: str, receipt: str, delay_ms: Optional[int] = None
    ) -> "NackResult": ...

    async def pq_extend(self, queue: str, receipt: str, lease_ms: int) -> int: ...


@dataclass(frozen=True)
class BatchItem:
    """One item of :meth:`Client.push_batch` with a dedup id, a message
    group or a fairness key of its own (plain ``bytes`` items take the
    batch's ``group`` and ``fair_key``)."""

    data: bytes
    dedup_id: Optional[str] = None
    group: Optional[str] = None
    fair_key: Optional[str] = None


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
    """A queue's stats: ``depth`` visible items, ``waiting`` pops,
    ``leased`` and ``delayed`` items, ``grouped`` items waiting behind their
    message group's head (not in ``depth``), the oldest visible item's age,
    whether the queue is a dead-letter queue (its name ends in
    ``.dead``, or some queue names it as its ``dead_letter_queue``), and
    ``fair_backlog``: its largest fairness keys (at most 10) as
    ``(key, items)``, largest first."""

    queue: str
    depth: int
    waiting: int
    leased: int
    delayed: int
    oldest_item_age_ms: Optional[int]
    grouped: int = 0
    dead_letter: bool = False
    fair_backlog: Tuple[Tuple[str, int], ...] = ()

    @property
    def drained(self) -> bool:
        """Nothing visible, grouped, delayed or leased."""
        return self.depth == self.grouped == self.delayed == self.leased == 0


@dataclass(frozen=True)
class QueuePage:
    """One page of :meth:`Client.queues`: each queue's stats, in name
    order, and the ``after`` of the next page (``None`` on the last)."""

    queues: List[Stats]
    next: Optional[str]


@dataclass(frozen=True)
class Lease:
    """A lease in flight (see :meth:`Client.leases`)."""

    receipt: str
    delivery_count: int
    lease_expires_at_ms: int
    enqueued_at_ms: int
    group: Optional[str] = None


@dataclass(frozen=True)
class LeasePage:
    """One page of leases, in expiry order, and the ``after`` of the next."""

    leases: List[Lease]
    next: Optional[str]


@dataclass(frozen=True)
class QueueSettings:
    """A queue's settings. In :attr:`SettingsResult.settings` (in force):
    ``max_deliveries`` ``None`` means unlimited, ``default_lease_ms``
    ``None`` means pops lease only when asked, ``dead_letter_queue`` ``None``
    means nowhere, ``pop_rate_max``, ``pop_rate_burst``, ``leases_max``,
    ``leases_per_key_max`` and ``pop_rate_per_key_max`` ``None`` mean no
    limit. In :attr:`SettingsResult.stored` (what the
    queue set): ``None`` means the daemon's default (for ``pop_rate_burst``:
    a tenth of a second's worth of ``pop_rate_max``, at least 1)."""

    max_deliveries: Optional[int] = None
    default_lease_ms: Optional[int] = None
    dead_letter_queue: Optional[str] = None
    dedup_window_ms: Optional[int] = None
    delivery_delay_ms: Optional[int] = None
    pop_rate_max: Optional[int] = None
    pop_rate_burst: Optional[int] = None
    leases_max: Optional[int] = None
    leases_per_key_max: Optional[int] = None
    pop_rate_per_key_max: Optional[int] = None


@dataclass(frozen=True)
class SettingsResult:
    """A queue's settings in force, and what the queue set itself."""

    queue: str
    settings: QueueSettings
    stored: QueueSettings


@dataclass(frozen=True)
class PurgeResult:
    """What a purge dropped: ``purged`` = ``items`` (visible) + ``delayed``;
    ``done`` is false when a bound left work (purge again)."""

    purged: int
    items: int
    delayed: int
    done: bool


@dataclass(frozen=True)
class DeleteResult:
    """What a delete dropped; ``held_nothing`` when the queue was empty."""

    items: int
    delayed: int
    leased: int
    results: int

    @property
    def held_nothing(self) -> bool:
        return self.items == self.delayed == self.leased == self.results == 0


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
    kind: str = "fifo"
    _client: Any = field(default=None, repr=False, compare=False)

    def _leased(self) -> str:
        if self.receipt is None:
            raise ValueError("this message was popped without a lease: nothing to settle")
        return self.receipt

    def ack(self) -> None:
        """Done: the item is deleted. Raises :class:`LeaseLost` if too late."""
        client: Settles = self._client
        if self.kind == "priority":
            client.pq_ack(self.queue, self._leased())
        else:
            client.ack(self.queue, self._leased())

    def nack(self, delay_ms: Optional[int] = None) -> NackResult:
        """Back to the queue now, or after ``delay_ms``, or dead-lettered."""
        client: Settles = self._client
        if self.kind == "priority":
            return client.pq_nack(self.queue, self._leased(), delay_ms)
        return client.nack(self.queue, self._leased(), delay_ms)

    def extend(self, lease_ms: int) -> int:
        """The lease now ends ``lease_ms`` from now; returns the new expiry."""
        client: Settles = self._client
        if self.kind == "priority":
            expires = client.pq_extend(self.queue, self._leased(), lease_ms)
        else:
            expires = client.extend(self.queue, self._leased(), lease_ms)
        self.lease_expires_at_ms = expires
        return expires


@dataclass
class AsyncMessage(Message):
    """A :class:`Message` from an :class:`AsyncClient`: settles are awaited."""

    async def ack(self) -> None:  # type: ignore[override]
        client: SettlesAsync = self._client
        if self.kind == "priority":
            await client.pq_ack(self.queue, self._leased())
        else:
            await client.ack(self.queue, self._leased())

    async def nack(self, delay_ms: Optional[int] = None) -> NackResult:  # type: ignore[override]
        client: SettlesAsync = self._client
        if self.kind == "priority":
            return await client.pq_nack(self.queue, self._leased(), delay_ms)
        return await client.nack(self.queue, self._leased(), delay_ms)

    async def extend(self, lease_ms: int) -> int:  # type: ignore[override]
        client: SettlesAsync = self._client
        if self.kind == "priority":
            expires = await client.pq_extend(self.queue, self._leased(), lease_ms)
        else:
            expires = await client.extend(self.queue, self._leased(), lease_ms)
        self.lease_expires_at_ms = expires
        return expires


