"""Run a handler over a queue's items under leases: heartbeats extend the
lease while the handler runs, success acks, an exception nacks with
exponential backoff (the daemon dead-letters after ``max_deliveries``),
at most ``concurrency`` items at once, and :meth:`stop` finishes the items
in hand before returning. With ``WorkerPolicy(stop_when_drained=True)``
the worker stops by itself once the queue is drained (see
:attr:`WorkerPolicy.stop_when_drained`)."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, List, Optional

from .aio import AsyncClient
from .client import Client
from .errors import HotqError, LeaseLost
from .models import AsyncMessage, Message


@dataclass(frozen=True)
class WorkerEvent:
    """What a worker did. ``kind`` is one of ``acked``, ``nacked`` (detail:
    the :class:`NackResult`), ``extended`` (detail: the new expiry),
    ``failed`` (the handler raised; detail: the exception), ``lease_lost``
    (a heartbeat or settle found the lease gone; the item will come back)
    ``error`` (a call to the daemon failed; detail: the exception) or
    ``drained`` (``stop_when_drained``: the queue held nothing; message
    ``None``, detail: the :class:`Stats` that said so)."""

    kind: str
    message: Optional[Message]
    detail: Any = None


@dataclass(frozen=True)
class WorkerPolicy:
    """How a worker leases, beats and backs off (all in ms).

    - ``lease_ms`` (30 s): each item's lease, renewed by heartbeats.
    - ``wait_ms`` (1 s): how long each pop waits for an item.
    - ``concurrency`` (1): items handled at once (one poller each).
    - ``heartbeat_fraction`` (1/3): extend when this fraction of the lease
      has passed, so two beats can be missed before it runs out.
    - ``backoff_ms`` (1 s), ``backoff_max_ms`` (60 s): a failed item is
      nacked with a delay of ``backoff_ms * 2^(deliveries - 1)``, at most
      ``backoff_max_ms``.
    - ``stop_when_drained`` (False): after a pop that found nothing, ask
      the queue's stats; when nothing is visible, grouped, delayed or
      leased (by anyone), emit ``drained`` and stop. Items nacked with a
      backoff are delayed, so they are waited for.
    """

    lease_ms: int = 30_000
    wait_ms: int = 1_000
    concurrency: int = 1
    heartbeat_fraction: float = 1 / 3
    backoff_ms: int = 1_000
    backoff_max_ms: int = 60_000
    stop_when_drained: bool = False

    def __post_init__(self) -> None:
        if self.lease_ms < 1 or self.concurrency < 1 or self.wait_ms < 0:
            raise ValueError("lease_ms and concurrency must be >= 1, wait_ms >= 0")
        if not 0 < self.heartbeat_fraction < 1:
            raise ValueError("heartbeat_fraction must be between 0 and 1")

    def heartbeat_s(self) -> float:
        return self.lease_ms * self.heartbeat_fraction / 1000.0

    def nack_delay_ms(self, delivery_count: Optional[int]) -> int:
        """Backoff before the next delivery: doubles with each delivery."""
        exponent = max((delivery_count or 1) - 1, 0)
        return int(min(self.backoff_max_ms, self.backoff_ms * 2 ** min(exponent, 32)))


EventHook = Callable[[WorkerEvent], None]


class Worker:
    """Runs ``handler(message)`` for items of ``queue``, on threads."""

    def __init__(
        self,
        client: Client,
        queue: str,
        handler: Callable[[Message], None],
        policy: WorkerPolicy = WorkerPolicy(),
        on_event: Optional[EventHook] = None,
    ) -> None:
        self.client, self.queue, self.handler, self.policy = client, queue, handler, policy
        self.on_event = on_event
        self._stop = threading.Event()
        self._threads: List[threading.Thread] = []

    def _emit(self, kind: str, message: Optional[Message], detail: Any = None) -> None:
        if self.on_event is not None:
            self.on_event(WorkerEvent(kind, message, detail))

    def start(self) -> "Worker":
        """Starts ``concurrency`` pollers and returns."""
        for n in range(self.policy.concurrency):
            thread = threading.Thread(target=self._poll, name=f"hotq-worker-{n}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def run(self) -> None:
        """Starts and blocks until :meth:`stop` (from a handler, a signal
        handler or another thread)."""
        self.start()
        for thread in self._threads:
            thread.join()

    def stop(self, timeout_s: Optional[float] = None) -> None:
        """Stops polling; items in hand are finished and settled. Waits up
        to ``timeout_s`` (``None``: until done; at most one ``wait_ms`` plus
        the slowest handler)."""
        self._stop.set()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout_s)

    def _poll(self) -> None:
        policy = self.policy
        while not self._stop.is_set():
            try:
                messages = self.client.pop(
                    self.queue, wait_ms=policy.wait_ms, lease_ms=policy.lease_ms
                )
            except HotqError as error:
                self._emit("error", None, error)
                # A failing daemon is retried after a pause, not hammered.
                self._stop.wait(policy.backoff_ms / 1000.0)
                continue
            for message in messages:
                self._handle(message)
            if not messages and policy.stop_when_drained:
                self._stop_if_drained()

    def _stop_if_drained(self) -> None:
        try:
            stats = self.client.stats(self.queue)
        except HotqError as error:
            self._emit("error", None, error)
            return
        if stats.drained and not self._stop.is_set():
            self._stop.set()
            self._emit("drained", None, stats)

    def _handle(self, message: Message) -> None:
        done, lost = threading.Event(), threading.Event()
        beat = threading.Thread(target=self._heartbeat, args=(message, done, lost), daemon=True)
        beat.start()
        try:
            self.handler(message)
            failure: Optional[BaseException] = None
        except Exception as error:  # the handler's failure is the item's, not the worker's
            failure = error
        finally:
            done.set()
            beat.join()
        if lost.is_set():
            return
        try:
            if failure is None:
                message.ack()
                self._emit("acked", message)
            else:
                self._emit("failed", message, failure)
                delay_ms = self.policy.nack_delay_ms(message.delivery_count)
                self._emit("nacked", message, message.nack(delay_ms))
        except LeaseLost as error:
            self._emit("lease_lost", message, error)
        except HotqError as error:
            # The lease runs out and the item comes back: at least once.
            self._emit("error", message, error)

    def _heartbeat(self, message: Message, done: threading.Event, lost: threading.Event) -> None:
        while not done.wait(self.policy.heartbeat_s()):
            try:
                self._emit("extended", message, message.extend(self.policy.lease_ms))
            except LeaseLost as error:
                lost.set()
                self._emit("lease_lost", message, error)
                return
            except HotqError as error:
                self._emit("error", message, error)


class AsyncWorker:
    """Runs ``await handler(message)`` for items of ``queue``, as tasks."""

    def __init__(
        self,
        client: AsyncClient,
        queue: str,
        handler: Callable[[AsyncMessage], Awaitable[None]],
        policy: WorkerPolicy = WorkerPolicy(),
        on_event: Optional[EventHook] = None,
    ) -> None:
        self.client, self.queue, self.handler, self.policy = client, queue, handler, policy
        self.on_event = on_event
        self._stop = asyncio.Event()

    def _emit(self, kind: str, message: Optional[Message], detail: Any = None) -> None:
        if self.on_event is not None:
            self.on_event(WorkerEvent(kind, message, detail))

    async def run(self) -> None:
        """Polls with ``concurrency`` tasks until :meth:`stop`."""
        await asyncio.gather(*(self._poll() for _ in range(self.policy.concurrency)))

    def stop(self) -> None:
        """Stops polling after the items in hand; :meth:`run` then returns."""
        self._stop.set()

    async def _poll(self) -> None:
        policy = self.policy
        while not self._stop.is_set():
            try:
                messages = await self.client.pop(
                    self.queue, wait_ms=policy.wait_ms, lease_ms=policy.lease_ms
                )
            except HotqError as error:
                self._emit("error", None, error)
                try:
                    await asyncio.wait_for(self._stop.wait(), policy.backoff_ms / 1000.0)
                except asyncio.TimeoutError:
                    pass
                continue
            for message in messages:
                await self._handle(message)
            if not messages and policy.stop_when_drained:
                await self._stop_if_drained()

    async def _stop_if_drained(self) -> None:
        try:
            stats = await self.client.stats(self.queue)
        except HotqError as error:
            self._emit("error", None, error)
            return
        if stats.drained and not self._stop.is_set():
            self._stop.set()
            self._emit("drained", None, stats)

    async def _handle(self, message: AsyncMessage) -> None:
        lost = asyncio.Event()
        beat = asyncio.ensure_future(self._heartbeat(message, lost))
        try:
            await self.handler(message)
            failure: Optional[BaseException] = None
        except Exception as error:
            failure = error
        finally:
            beat.cancel()
            try:
                await beat
            except asyncio.CancelledError:
                pass
        if lost.is_set():
            return
        try:
            if failure is None:
                await message.ack()
                self._emit("acked", message)
            else:
                self._emit("failed", message, failure)
                delay_ms = self.policy.nack_delay_ms(message.delivery_count)
                self._emit("nacked", message, await message.nack(delay_ms))
        except LeaseLost as error:
            self._emit("lease_lost", message, error)
        except HotqError as error:
            self._emit("error", message, error)

    async def _heartbeat(self, message: AsyncMessage, lost: asyncio.Event) -> None:
        while True:
            await asyncio.sleep(self.policy.heartbeat_s())
            try:
                self._emit("extended", message, await message.extend(self.policy.lease_ms))
            except LeaseLost as error:
                lost.set()
                self._emit("lease_lost", message, error)
                return
            except HotqError as error:
                self._emit("error", message, error)
