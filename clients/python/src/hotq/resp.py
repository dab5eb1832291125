"""The synchronous client over the daemon's Redis protocol (RESP), through
redis-py: ``Client("resp://127.0.0.1:7379")`` is a :class:`RespClient`.

The same methods as over HTTP, so :class:`~hotq.Worker` runs over RESP
unchanged (a leased pop with the finished items' acks riding on it: one
round trip and one commit per item). What RESP's pop answers is the item,
its receipt and its delivery count: a message popped over RESP has
``enqueued_at_ms`` 0 and no ``lease_expires_at_ms``, ``group`` or
dead-letter fields (``stats``, ``leases`` and HTTP pops have them).

Needs redis-py: ``pip install './clients/python[resp]'``."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Type, Union
from urllib.parse import urlsplit

from . import _wire as wire
from .client import Client
from .errors import (
    BadRequest,
    ConnectError,
    HotqError,
    ServerError,
    TooLarge,
    Unauthorized,
    _BY_CODE,
)
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

# Codes of refusals that are the request's size, or the daemon's state.
_TOO_LARGE = {"item_too_large", "batch_too_large", "body_too_large"}
_SERVER = {"maybe_committed", "pop_unanswered", "queue_busy", "internal_error", "corrupt_item"}


def _error(error: Exception) -> HotqError:
    """The typed error of a redis-py exception: a refusal's first word is
    the daemon's stable code (``-ERR <code> <message>``)."""
    import redis

    if isinstance(error, redis.AuthenticationError):
        return Unauthorized(None, "unauthorized", str(error))
    if isinstance(error, (redis.ConnectionError, redis.TimeoutError)):
        return ConnectError(None, "connect_error", str(error))
    text = str(error)
    code, _, message = text.partition(" ")
    cls: Type[HotqError]
    if code in _BY_CODE:
        cls = _BY_CODE[code]
    elif code in _TOO_LARGE:
        cls = TooLarge
    elif code.startswith("store_") or code in _SERVER:
        cls = ServerError
    elif code.islower() and "_" in code:
        cls = BadRequest
    else:
        code, message, cls = "resp_error", text, HotqError
    return cls(None, code, message or text)


def _text(value: Any) -> Any:
    """Bulk strings as text, recursively (admin answers: the HTTP API's
    JSON as a map, a flat key-value array in RESP2)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, list):
        return [_text(v) for v in value]
    if isinstance(value, dict):
        return {_text(k): _text(v) for k, v in value.items()}
    return value


def _map(value: Any) -> Dict[str, Any]:
    """A map reply as a dict (a RESP2 flat array of keys and values, or a
    RESP3 map), nested maps too, bulk strings as text."""
    if isinstance(value, dict):
        return {str(_text(k)): _nested(v) for k, v in value.items()}
    pairs = list(value)
    return {str(_text(pairs[i])): _nested(pairs[i + 1]) for i in range(0, len(pairs), 2)}


def _nested(value: Any) -> Any:
    if isinstance(value, dict):
        return _map(value)
    if isinstance(value, list) and value and isinstance(value[0], (list, dict)):
        return [_map(v) if _is_map(v) else _nested(v) for v in value]
    if isinstance(value, list) and _is_map(value):
        return _map(value)
    return _text(value)


def _is_map(value: Any) -> bool:
    """A RESP2 flat array of text keys and values (admin answers only)."""
    if isinstance(value, dict):
        return True
    return (
        isinstance(value, list)
        and len(value) % 2 == 0
        and len(value) > 0
        and all(isinstance(k, bytes) and k.isascii() and k.islower() for k in value[::2])
    )


class RespClient(Client):
    """A hotq daemon's RESP listener at ``resp://host:port``, with an
    optional ``token`` (sent with ``AUTH``). ``timeout_s`` bounds every
    call beyond a pop's own wait. Built by ``Client("resp://…")``."""

    def __init__(self, base_url: str, token: Optional[str] = None, timeout_s: float = 30.0) -> None:
        import redis

        parts = urlsplit(base_url)
        if parts.scheme != "resp" or not parts.hostname:
            raise ValueError(f"expected resp://host:port, got {base_url!r}")
        self.base_url = base_url
        self.timeout_s = timeout_s
        # A socket timeout past the longest wait a pop may ask (60 s by default).
        self._redis = redis.Redis(
            host=parts.hostname,
            port=parts.port or 7379,
            password=token or parts.password,
            socket_timeout=timeout_s + wire.POP_TIMEOUT_MARGIN_S + 60.0,
            protocol=2,
        )

    def close(self) -> None:
        self._redis.close()

    def _call(self, *args: Any) -> Any:
        import redis

        try:
            return self._redis.execute_command(*args)
        except redis.RedisError as error:
            raise _error(error) from error

    # Pushes and pops.

    def push(
        self,
        queue: str,
        data: bytes,
        delay_ms: Optional[int] = None,
        dedup_id: Optional[str] = None,
        group: Optional[str] = None,
        fair_key: Optional[str] = None,
    ) -> PushResult:
        args: List[Any] = ["PUSH", queue]
        if delay_ms is not None:
            args += ["DELAY", delay_ms]
        if group is not None:
            args += ["GROUP", group]
        if dedup_id is not None:
            args += ["DEDUP", dedup_id]
        if fair_key is not None:
            args += ["FAIR", fair_key]
        pushed = int(self._call(*args, "ITEMS", data))
        return PushResult(pushed=pushed, duplicate=pushed == 0)

    def push_batch(
        self,
        queue: str,
        items: Sequence[Union[bytes, BatchItem]],
        delay_ms: Optional[int] = None,
        group: Optional[str] = None,
        fair_key: Optional[str] = None,
    ) -> PushResult:
        if any(isinstance(item, BatchItem) for item in items):
            raise ValueError(
                "over RESP a batch's items are bytes (one group, one fairness key, no dedup ids)"
            )
        args: List[Any] = ["PUSH", queue]
        if delay_ms is not None:
            args += ["DELAY", delay_ms]
        if group is not None:
            args += ["GROUP", group]
        if fair_key is not None:
            args += ["FAIR", fair_key]
        pushed = int(self._call(*args, "ITEMS", *items))
        return PushResult(pushed=pushed, duplicate=pushed == 0)

    def _pop(
        self,
        command: List[Any],
        queue: str,
        kind: str,
        wait_ms: int,
        lease_ms: Optional[int],
        max: int,
        receipts: Sequence[str],
    ) -> Tuple[List[Message], List[Tuple[str, str]]]:
        if wait_ms < 0 or max < 1:
            raise ValueError("wait_ms must be >= 0 and max >= 1")
        args = command + ["WAIT", wait_ms, "MAX", max]
        if lease_ms is not None:
            args += ["LEASE", lease_ms]
        # The long answer ([entries, outcomes]) whatever the queue's default
        # lease: an ACK with no receipt is none.
        args += ["ACK", *receipts]
        entries, outcomes = self._call(*args)
        messages = [
            Message(
                queue=queue,
                data=item,
                enqueued_at_ms=0,
                receipt=_text(receipt),
                delivery_count=count,
                kind=kind,
                _client=self,
            )
            for receipt, count, item in entries
        ]
        return messages, list(zip(receipts, _text(outcomes)))

    def pop(
        self, queue: str, wait_ms: int = 0, lease_ms: Optional[int] = None, max: int = 1
    ) -> List[Message]:
        return self._pop(["POP", queue], queue, "fifo", wait_ms, lease_ms, max, ())[0]

    def pop_and_ack(
        self,
        queue: str,
        receipts: Sequence[str],
        wait_ms: int = 0,
        lease_ms: Optional[int] = None,
        max: int = 1,
    ) -> Tuple[List[Message], List[Tuple[str, str]]]:
        if len(receipts) > wire.POP_ACKS_MAX:
            raise ValueError(f"a pop carries at most {wire.POP_ACKS_MAX} receipts")
        return self._pop(["POP", queue], queue, "fifo", wait_ms, lease_ms, max, receipts)

    def peek(self, queue: str) -> Optional[Message]:
        item = self._call("PEEK", queue)
        return None if item is None else Message(queue=queue, data=item, enqueued_at_ms=0, _client=self)

    def pq_push(
        self, queue: str, data: bytes, priority: int, delay_ms: Optional[int] = None
    ) -> PushResult:
        args: List[Any] = ["PQ", "PUSH", queue, priority]
        if delay_ms is not None:
            args += ["DELAY", delay_ms]
        pushed = int(self._call(*args, "ITEMS", data))
        return PushResult(pushed=pushed, duplicate=pushed == 0)

    def pq_pop(
        self,
        queue: str,
        end: str = "min",
        wait_ms: int = 0,
        max: int = 1,
        lease_ms: Optional[int] = None,
    ) -> List[Message]:
        command = ["PQ", "POP", queue, end.upper()]
        return self._pop(command, queue, "priority", wait_ms, lease_ms, max, ())[0]

    # Leases.

    def ack(self, queue: str, receipt: str) -> None:
        self._settled(queue, receipt, self._call("ACK", queue, receipt))

    def pq_ack(self, queue: str, receipt: str) -> None:
        self._settled(queue, receipt, self._call("PQ", "ACK", queue, receipt))

    @staticmethod
    def _settled(queue: str, receipt: str, outcomes: Any) -> None:
        """Raises as an HTTP ack of one receipt does when it did not take."""
        outcome = _text(outcomes[0])
        if outcome != "acked":
            cls = _BY_CODE.get(outcome, BadRequest)
            raise cls(None, outcome, f"receipt {receipt} of queue {queue}: {outcome}")

    def ack_batch(self, queue: str, receipts: Sequence[str]) -> List[Tuple[str, str]]:
        return list(zip(receipts, _text(self._call("ACK", queue, *receipts))))

    def nack(self, queue: str, receipt: str, delay_ms: Optional[int] = None) -> NackResult:
        delay = [] if delay_ms is None else ["DELAY", delay_ms]
        return wire.parse_nack(_map(self._call("NACK", queue, receipt, *delay)))

    def pq_nack(self, queue: str, receipt: str, delay_ms: Optional[int] = None) -> NackResult:
        delay = [] if delay_ms is None else ["DELAY", delay_ms]
        return wire.parse_nack(_map(self._call("PQ", "NACK", queue, receipt, *delay)))

    def extend(self, queue: str, receipt: str, lease_ms: int) -> int:
        return int(self._call("EXTEND", queue, receipt, lease_ms))

    def pq_extend(self, queue: str, receipt: str, lease_ms: int) -> int:
        return int(self._call("PQ", "EXTEND", queue, receipt, lease_ms))

    def redrive(self, dead_letter_queue: str, max: Optional[int] = None) -> int:
        limit = [] if max is None else ["MAX", max]
        return int(self._call("REDRIVE", dead_letter_queue, *limit))

    # Stats and administration: the HTTP API's JSON objects, as maps.

    def stats(self, queue: str) -> Stats:
        return wire.parse_stats(_map(self._call("STATS", queue)))

    def pq_stats(self, queue: str) -> Stats:
        return wire.parse_stats(_map(self._call("PQ", "STATS", queue)))

    def _admin(self, kind: str, *args: Any) -> Dict[str, Any]:
        prefix = ["PQ"] if kind == "priority" else []
        return _map(self._call(*prefix, *args))

    def queues(self, kind: str = "fifo", limit: int = 20, after: Optional[str] = None) -> QueuePage:
        args: List[Any] = ["QUEUES", "KIND", kind, "LIMIT", limit]
        if after is not None:
            args += ["AFTER", after]
        return wire.parse_queues(_map(self._call(*args)))

    def settings(self, queue: str, kind: str = "fifo") -> SettingsResult:
        return wire.parse_settings(self._admin(kind, "SETTINGS", queue))

    def update_settings(
        self, queue: str, change: Mapping[str, Any], kind: str = "fifo"
    ) -> SettingsResult:
        import json

        return wire.parse_settings(self._admin(kind, "SETTINGS", queue, json.dumps(dict(change))))

    def purge(self, queue: str, kind: str = "fifo") -> PurgeResult:
        return wire.parse_purge(self._admin(kind, "PURGE", queue))

    def delete(self, queue: str, kind: str = "fifo") -> DeleteResult:
        return wire.parse_delete(self._admin(kind, "DELETE", queue))

    def leases(
        self, queue: str, kind: str = "fifo", limit: int = 100, after: Optional[str] = None
    ) -> LeasePage:
        page = [] if after is None else ["AFTER", after]
        return wire.parse_leases(self._admin(kind, "LEASES", queue, "LIMIT", limit, *page))

    def healthy(self) -> bool:
        try:
            return bool(self._call("PING"))
        except HotqError:
            return False
