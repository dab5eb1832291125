"""The synchronous client."""

from __future__ import annotations

from typing import Any, List, Mapping, Optional, Sequence, Tuple, Union

import httpx

from . import _wire as wire
from .errors import ConnectError
from .models import (
    BatchItem,
    DeleteResult,
    LeasePage,
    Message,
    NackResult,
    PurgeResult,
    PushResult,
    QueuePage,
    SettingsResult,
    Stats,
)


class Client:
    """A hotq daemon at ``base_url`` (``http://127.0.0.1:7070``), with an
    optional bearer ``token``. ``timeout_s`` bounds every call; a pop's
    timeout is its ``wait_ms`` plus at least 30 s, so a long poll is never
    cut short. Use as a context manager, or call :meth:`close`.

    A ``resp://host:port`` address is the daemon's Redis-protocol listener:
    the client is then a :class:`hotq.resp.RespClient` (through redis-py),
    with the same methods."""

    def __new__(cls, base_url: str, *args: Any, **kwargs: Any) -> "Client":
        if cls is Client and base_url.startswith("resp://"):
            from .resp import RespClient

            return super().__new__(RespClient)
        return super().__new__(cls)

    def __init__(
        self, base_url: str, token: Optional[str] = None, timeout_s: float = 30.0
    ) -> None:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self._http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout_s)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, call: wire.Call) -> httpx.Response:
        try:
            response = self._http.request(
                call.method,
                call.path,
                params=call.params,
                content=call.content,
                json=call.json,
                headers=call.headers,
                timeout=call.timeout_s if call.timeout_s is not None else self.timeout_s,
            )
        except httpx.TransportError as error:
            raise ConnectError(None, "connect_error", f"{self.base_url}: {error!r}") from error
        wire.check(response.status_code, response.content)
        return response

    def push(
        self,
        queue: str,
        data: bytes,
        delay_ms: Optional[int] = None,
        dedup_id: Optional[str] = None,
        group: Optional[str] = None,
        fair_key: Optional[str] = None,
    ) -> PushResult:
        """Pushes one item (bytes); ``delay_ms`` keeps it invisible that long.
        With ``dedup_id``, a push of an id pushed within the queue's dedup
        window stores nothing and answers ``duplicate=True``. With ``group``
        (FIFO queues), the item joins that message group: its items are
        delivered in push order, one out at a time. With ``fair_key`` (FIFO
        queues), the item is its tenant's: pops serve the queue's keys in
        proportion to their ``fair_weights``, in push order within a key."""
        call = wire.push(queue, data, delay_ms, dedup_id, group, fair_key)
        return wire.parse_push(self._send(call).json())

    def push_batch(
        self,
        queue: str,
        items: Sequence[Union[bytes, BatchItem]],
        delay_ms: Optional[int] = None,
        group: Optional[str] = None,
        fair_key: Optional[str] = None,
    ) -> PushResult:
        """Pushes 1 to 1,000 items in one commit, in order: all or nothing.
        An item is ``bytes``, or a :class:`BatchItem` with its own dedup id,
        message group or fairness key; ``group`` and ``fair_key`` are those
        of items that name none. Items whose dedup id was pushed within the
        dedup window are left out (their positions in ``duplicates``)."""
        call = wire.push_batch(queue, items, delay_ms, group, fair_key)
        return wire.parse_push((self._send(call)).json())

    def pop(
        self, queue: str, wait_ms: int = 0, lease_ms: Optional[int] = None, max: int = 1
    ) -> List[Message]:
        """Up to ``max`` items, waiting up to ``wait_ms`` for the first; with
        ``lease_ms`` they are leased (ack, nack or extend each), otherwise
        deleted as they are handed out. Empty when none came."""
        response = self._send(wire.pop(queue, wait_ms, lease_ms, max, self.timeout_s))
        return self._messages(queue, response)

    def pop_and_ack(
        self,
        queue: str,
        receipts: Sequence[str],
        wait_ms: int = 0,
        lease_ms: Optional[int] = None,
        max: int = 1,
    ) -> Tuple[List[Message], List[Tuple[str, str]]]:
        """Acks ``receipts`` (at most 1,000), then pops as :meth:`pop`, in
        one request (and, when the pop waits in line, one commit with the
        next leases). Returns the items and ``(receipt, outcome)`` in order,
        outcome as :meth:`ack_batch` says; a failed receipt never fails
        the pop."""
        call = wire.pop(queue, wait_ms, lease_ms, max, self.timeout_s, ack=receipts)
        response = self._send(call)
        return self._messages(queue, response), wire.acked(response.headers, receipts)

    def peek(self, queue: str) -> Optional[Message]:
        """The first item, not taken; ``None`` when the queue is empty."""
        messages = self._messages(queue, self._send(wire.peek(queue)))
        return messages[0] if messages else None

    def _messages(
        self, queue: str, response: httpx.Response, kind: str = "fifo"
    ) -> List[Message]:
        return [
            Message(
                queue=queue,
                data=wire.decode_item(o["item"]),
                enqueued_at_ms=o["enqueued_at_ms"],
                receipt=o.get("receipt"),
                delivery_count=o.get("delivery_count"),
                lease_expires_at_ms=o.get("lease_expires_at_ms"),
                dead_letter_from=o.get("dead_letter_from"),
                dead_letter_deliveries=o.get("dead_letter_deliveries"),
                group=o.get("group"),
                kind=kind,
                _client=self,
            )
            for o in wire.popped(response.status_code, response.content)
        ]

    def stats(self, queue: str) -> Stats:
        """Depth, grouped, waiting pops, leased and delayed items, the oldest
        item's age, and whether it is a dead-letter queue."""
        return wire.parse_stats(self._send(wire.stats(queue)).json())

    def ack(self, queue: str, receipt: str) -> None:
        """Acks one lease; raises :class:`LeaseLost` when it is lost."""
        self._send(wire.ack(queue, receipt))

    def ack_batch(self, queue: str, receipts: Sequence[str]) -> List[Tuple[str, str]]:
        """Acks up to 1,000 leases; returns ``(receipt, outcome)`` in order,
        outcome ``acked``, ``unknown_receipt``, ``lease_expired``,
        ``receipt_queue_mismatch`` or ``invalid``."""
        return wire.parse_ack_batch(self._send(wire.ack_batch(queue, receipts)).json())

    def nack(self, queue: str, receipt: str, delay_ms: Optional[int] = None) -> NackResult:
        """Returns a leased item now, after ``delay_ms``, or to the dead letters."""
        return wire.parse_nack(self._send(wire.nack(queue, receipt, delay_ms)).json())

    def extend(self, queue: str, receipt: str, lease_ms: int) -> int:
        """Extends a lease to ``lease_ms`` from now; returns the new expiry (ms)."""
        return wire.parse_extend(self._send(wire.extend(queue, receipt, lease_ms)).json())

    def redrive(self, dead_letter_queue: str, max: Optional[int] = None) -> int:
        """Moves up to ``max`` dead letters back to their queues; returns how many."""
        return int(self._send(wire.redrive(dead_letter_queue, max)).json()["redriven"])

    def pq_push(
        self,
        queue: str,
        data: bytes,
        priority: int,
        delay_ms: Optional[int] = None,
        fair_key: Optional[str] = None,
    ) -> PushResult:
        """Pushes one item to a priority queue; ``delay_ms`` (default: the
        queue's ``delivery_delay_ms``) keeps it invisible that long. With
        ``fair_key``, ``min`` pops serve the keys of one priority in
        proportion to their ``fair_weights``, in push order within a key."""
        call = wire.pq_push(queue, data, priority, delay_ms, fair_key)
        return wire.parse_push((self._send(call)).json())

    def pq_pop(
        self,
        queue: str,
        end: str = "min",
        wait_ms: int = 0,
        max: int = 1,
        lease_ms: Optional[int] = None,
    ) -> List[Message]:
        """Pops the lowest (``end="min"``) or highest priority items; with
        ``lease_ms`` (or the queue's ``default_lease_ms``) they are leased,
        and ``ack()``, ``nack()``, ``extend()`` settle them on this queue."""
        call = wire.pq_pop(queue, end, wait_ms, max, self.timeout_s, lease_ms)
        return self._messages(queue, self._send(call), "priority")

    def pq_stats(self, queue: str) -> Stats:
        """A priority queue's stats."""
        return wire.parse_stats(self._send(wire.stats(queue, "priority")).json())

    def pq_ack(self, queue: str, receipt: str) -> None:
        """Acks a priority queue's lease; raises :class:`LeaseLost` when lost."""
        self._send(wire.ack(queue, receipt, "priority"))

    def pq_nack(self, queue: str, receipt: str, delay_ms: Optional[int] = None) -> NackResult:
        """Returns a priority queue's leased item under its priority."""
        return wire.parse_nack(self._send(wire.nack(queue, receipt, delay_ms, "priority")).json())

    def pq_extend(self, queue: str, receipt: str, lease_ms: int) -> int:
        """Extends a priority queue's lease; returns the new expiry (ms)."""
        call = wire.extend(queue, receipt, lease_ms, "priority")
        return wire.parse_extend(self._send(call).json())

    def queues(self, kind: str = "fifo", limit: int = 20, after: Optional[str] = None) -> QueuePage:
        """One page of queues of ``kind`` (``fifo`` or ``priority``) in name
        order, each with its stats; pass the page's ``next`` as ``after``."""
        return wire.parse_queues(self._send(wire.queues(kind, limit, after)).json())

    def settings(self, queue: str, kind: str = "fifo") -> SettingsResult:
        """The queue's settings in force and what it set itself."""
        return wire.parse_settings(self._send(wire.settings(queue, kind, None)).json())

    def update_settings(
        self, queue: str, change: Mapping[str, Any], kind: str = "fifo"
    ) -> SettingsResult:
        """Changes settings (``max_deliveries``, ``default_lease_ms``,
        ``dead_letter_queue``, ``dedup_window_ms``, ``delivery_delay_ms``,
        and the limits ``pop_rate_max``, ``pop_rate_burst``, ``leases_max``,
        ``leases_per_key_max``, ``pop_rate_per_key_max``:
        a pop a limit holds back waits within its ``wait_ms`` or comes back
        empty, never raises); ``None`` returns one to the default; others
        are kept. Raises
        :class:`BadRequest` (``invalid_settings``) and changes nothing when
        a value is out of range."""
        call = wire.settings(queue, kind, dict(change))
        return wire.parse_settings(self._send(call).json())

    def purge(self, queue: str, kind: str = "fifo") -> PurgeResult:
        """Drops the visible and delayed items pushed before the call;
        leased items stay leased."""
        return wire.parse_purge(self._send(wire.purge(queue, kind)).json())

    def delete(self, queue: str, kind: str = "fifo") -> DeleteResult:
        """Deletes the queue: items, delayed items, leases (their receipts
        are then lost), settings, dedup ids."""
        return wire.parse_delete(self._send(wire.delete(queue, kind)).json())

    def leases(
        self, queue: str, kind: str = "fifo", limit: int = 100, after: Optional[str] = None
    ) -> LeasePage:
        """One page of the queue's leases in flight, in expiry order (it may end short, even empty, with a ``next``)."""
        return wire.parse_leases(self._send(wire.leases(queue, kind, limit, after)).json())

    def healthy(self) -> bool:
        """Whether ``/healthz`` answers 200 (the store answers)."""
        try:
            return self._http.get("/healthz").status_code == 200
        except httpx.TransportError:
            return False
