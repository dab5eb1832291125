"""The HTTP calls, shared by the sync and asyncio clients: each call is a
:class:`Call` (what to send) and a parser of the answer."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union
from urllib.parse import quote

from .errors import error_from_answer
from .models import (
    BatchItem,
    DeleteResult,
    Lease,
    LeasePage,
    NackResult,
    PurgeResult,
    PushResult,
    QueuePage,
    QueueSettings,
    SettingsResult,
    Stats,
)

KINDS = ("fifo", "priority")

# Margin on top of a long poll's wait_ms for the HTTP timeout: the daemon
# answers within wait_ms, plus its commit and the network.
POP_TIMEOUT_MARGIN_S = 30.0


@dataclass
class Call:
    """One HTTP request: method, path, query, body, headers, timeout (s)."""

    method: str
    path: str
    params: Dict[str, Any] = field(default_factory=dict)
    content: Optional[bytes] = None
    json: Any = None
    headers: Dict[str, str] = field(default_factory=dict)
    timeout_s: Optional[float] = None


def q(name: str) -> str:
    """A queue name or receipt as one path segment (anything else is
    refused by the daemon with its own error, not misrouted)."""
    return quote(name, safe="")


def check(status: int, body: bytes) -> None:
    """Raises the typed error of a refused answer."""
    if status >= 400:
        raise error_from_answer(status, body)


def push(
    queue: str,
    data: bytes,
    delay_ms: Optional[int],
    dedup_id: Optional[str] = None,
    group: Optional[str] = None,
    fair_key: Optional[str] = None,
) -> Call:
    params: Dict[str, Any] = {} if delay_ms is None else {"delay_ms": delay_ms}
    if group is not None:
        params["group"] = group
    headers = {} if dedup_id is None else {"hotq-dedup-id": dedup_id}
    if fair_key is not None:
        headers["hotq-fair-key"] = fair_key
    return Call(
        "POST", f"/v1/queues/{q(queue)}/items", params, content=bytes(data), headers=headers
    )


def base(queue: str, kind: str = "fifo") -> str:
    """The path of queue ``queue`` of ``kind`` (``fifo`` or ``priority``)."""
    if kind not in KINDS:
        raise ValueError("kind must be 'fifo' or 'priority'")
    return f"/v1/{'queues' if kind == 'fifo' else 'pqueues'}/{q(queue)}"


def _b64(data: bytes) -> str:
    return base64.b64encode(bytes(data)).decode("ascii")


def push_batch(
    queue: str,
    items: Sequence[Union[bytes, BatchItem]],
    delay_ms: Optional[int],
    group: Optional[str] = None,
    fair_key: Optional[str] = None,
) -> Call:
    params: Dict[str, Any] = {} if delay_ms is None else {"delay_ms": delay_ms}
    if group is not None:
        params["group"] = group
    headers = {} if fair_key is None else {"hotq-fair-key": fair_key}
    encoded: List[Any] = []
    for item in items:
        if isinstance(item, BatchItem):
            entry: Dict[str, Any] = {"item": _b64(item.data)}
            if item.dedup_id is not None:
                entry["dedup_id"] = item.dedup_id
            if item.group is not None:
                entry["group"] = item.group
            if item.fair_key is not None:
                entry["fair_key"] = item.fair_key
            encoded.append(entry)
        else:
            encoded.append(_b64(item))
    return Call(
        "POST", f"/v1/queues/{q(queue)}/items:batch", params, json=encoded, headers=headers
    )


def parse_push(body: Any) -> PushResult:
    return PushResult(
        pushed=int(body["pushed"]),
        visible_at_ms=body.get("visible_at_ms"),
        duplicate=bool(body.get("duplicate", False)),
        duplicates=tuple(int(position) for position in body.get("duplicates", [])),
    )


# Most receipts one pop carries in ``ack``.
POP_ACKS_MAX = 1_000


def pop(
    queue: str,
    wait_ms: int,
    lease_ms: Optional[int],
    max: int,
    timeout_s: float,
    ack: Sequence[str] = (),
) -> Call:
    if wait_ms < 0 or max < 1:
        raise ValueError("wait_ms must be >= 0 and max >= 1")
    if len(ack) > POP_ACKS_MAX:
        raise ValueError(f"a pop carries at most {POP_ACKS_MAX} receipts")
    params: Dict[str, Any] = {"wait_ms": wait_ms, "max": max}
    if lease_ms is not None:
        params["lease_ms"] = lease_ms
    if ack:
        # The acks ride on the pop: acked first, in the pop's commit when
        # it can be; their outcomes come back in ``hotq-acked``.
        params["ack"] = ",".join(ack)
    # Always the JSON answer (one shape whatever max and lease are), and a
    # timeout that outlasts the long poll.
    return Call(
        "POST",
        f"/v1/queues/{q(queue)}/pop",
        params,
        headers={"accept": "application/json"},
        timeout_s=wait_ms / 1000.0 + max_timeout(timeout_s),
    )


def max_timeout(timeout_s: float) -> float:
    return max(timeout_s, POP_TIMEOUT_MARGIN_S)


def peek(queue: str) -> Call:
    return Call("GET", f"/v1/queues/{q(queue)}/peek", headers={"accept": "application/json"})


def popped(status: int, body: bytes) -> List[Dict[str, Any]]:
    """The objects of a JSON pop or peek answer; none on 204."""
    if status == 204:
        return []
    import json

    items: List[Dict[str, Any]] = json.loads(body)
    return items


def acked(headers: Any, receipts: Sequence[str]) -> List[Tuple[str, str]]:
    """``(receipt, outcome)`` in order, from a pop's ``hotq-acked``."""
    if not receipts:
        return []
    outcomes = headers.get("hotq-acked", "").split(",")
    if len(outcomes) != len(receipts):
        raise ValueError(f"hotq-acked names {len(outcomes)} outcomes for {len(receipts)} receipts")
    return list(zip(receipts, outcomes))


def decode_item(encoded: str) -> bytes:
    return base64.b64decode(encoded, validate=True)


def stats(queue: str, kind: str = "fifo") -> Call:
    return Call("GET", base(queue, kind))


def parse_stats(body: Any) -> Stats:
    return Stats(
        queue=body["queue"],
        depth=int(body["depth"]),
        waiting=int(body["waiting"]),
        leased=int(body["leased"]),
        delayed=int(body["delayed"]),
        oldest_item_age_ms=body.get("oldest_item_age_ms"),
        grouped=int(body.get("grouped", 0)),
        dead_letter=bool(body.get("dead_letter", False)),
        fair_backlog=tuple(
            (str(row["key"]), int(row["items"])) for row in body.get("fair_backlog") or ()
        ),
    )


def queues(kind: str, limit: int, after: Optional[str]) -> Call:
    if kind not in KINDS:
        raise ValueError("kind must be 'fifo' or 'priority'")
    params: Dict[str, Any] = {"kind": kind, "limit": limit}
    if after is not None:
        params["after"] = after
    return Call("GET", "/v1/queues", params)


def parse_queues(body: Any) -> QueuePage:
    return QueuePage(queues=[parse_stats(q) for q in body["queues"]], next=body.get("next"))


def settings(queue: str, kind: str, change: Optional[Dict[str, Any]]) -> Call:
    path = f"{base(queue, kind)}/settings"
    if change is None:
        return Call("GET", path)
    return Call("PUT", path, json=change)


def _settings(body: Any) -> QueueSettings:
    return QueueSettings(
        max_deliveries=body.get("max_deliveries"),
        default_lease_ms=body.get("default_lease_ms"),
        dead_letter_queue=body.get("dead_letter_queue"),
        dedup_window_ms=body.get("dedup_window_ms"),
        delivery_delay_ms=body.get("delivery_delay_ms"),
        pop_rate_max=body.get("pop_rate_max"),
        pop_rate_burst=body.get("pop_rate_burst"),
        leases_max=body.get("leases_max"),
        leases_per_key_max=body.get("leases_per_key_max"),
        pop_rate_per_key_max=body.get("pop_rate_per_key_max"),
    )


def parse_settings(body: Any) -> SettingsResult:
    return SettingsResult(
        queue=body["queue"], settings=_settings(body["settings"]), stored=_settings(body["stored"])
    )


def purge(queue: str, kind: str) -> Call:
    return Call("POST", f"{base(queue, kind)}/purge")


def parse_purge(body: Any) -> PurgeResult:
    return PurgeResult(
        purged=int(body["purged"]),
        items=int(body["items"]),
        delayed=int(body["delayed"]),
        done=bool(body["done"]),
    )


def delete(queue: str, kind: str) -> Call:
    return Call("DELETE", base(queue, kind))


def parse_delete(body: Any) -> DeleteResult:
    return DeleteResult(
        items=int(body["items"]),
        delayed=int(body["delayed"]),
        leased=int(body["leased"]),
        results=int(body["results"]),
    )


def leases(queue: str, kind: str, limit: int, after: Optional[str]) -> Call:
    params: Dict[str, Any] = {"limit": limit}
    if after is not None:
        params["after"] = after
    return Call("GET", f"{base(queue, kind)}/leases", params)


def parse_leases(body: Any) -> LeasePage:
    return LeasePage(
        leases=[
            Lease(
                receipt=lease["receipt"],
                delivery_count=int(lease["delivery_count"]),
                lease_expires_at_ms=int(lease["lease_expires_at_ms"]),
                enqueued_at_ms=int(lease["enqueued_at_ms"]),
                group=lease.get("group"),
            )
            for lease in body["leases"]
        ],
        next=body.get("next"),
    )


def ack(queue: str, receipt: str, kind: str = "fifo") -> Call:
    return Call("POST", f"{base(queue, kind)}/ack/{q(receipt)}")


def ack_batch(queue: str, receipts: Sequence[str]) -> Call:
    return Call("POST", f"/v1/queues/{q(queue)}/ack", json=list(receipts))


def parse_ack_batch(body: Any) -> List[Tuple[str, str]]:
    return [(r["receipt"], r["outcome"]) for r in body["results"]]


def nack(queue: str, receipt: str, delay_ms: Optional[int], kind: str = "fifo") -> Call:
    params = {} if delay_ms is None else {"delay_ms": delay_ms}
    return Call("POST", f"{base(queue, kind)}/nack/{q(receipt)}", params)


def parse_nack(body: Any) -> NackResult:
    return NackResult(
        outcome=body["outcome"],
        visible_at_ms=body.get("visible_at_ms"),
        dead_letter_queue=body.get("dead_letter_queue"),
    )


def extend(queue: str, receipt: str, lease_ms: int, kind: str = "fifo") -> Call:
    return Call("POST", f"{base(queue, kind)}/extend/{q(receipt)}", {"lease_ms": lease_ms})


def parse_extend(body: Any) -> int:
    return int(body["lease_expires_at_ms"])


def redrive(queue: str, max: Optional[int]) -> Call:
    params = {} if max is None else {"max": max}
    return Call("POST", f"/v1/queues/{q(queue)}/redrive", params)


def pq_push(
    queue: str,
    data: bytes,
    priority: int,
    delay_ms: Optional[int] = None,
    fair_key: Optional[str] = None,
) -> Call:
    params: Dict[str, Any] = {"priority": priority}
    if delay_ms is not None:
        params["delay_ms"] = delay_ms
    headers = {} if fair_key is None else {"hotq-fair-key": fair_key}
    return Call(
        "POST", f"/v1/pqueues/{q(queue)}/items", params, content=bytes(data), headers=headers
    )


def pq_pop(
    queue: str,
    end: str,
    wait_ms: int,
    max: int,
    timeout_s: float,
    lease_ms: Optional[int] = None,
) -> Call:
    if end not in ("min", "max"):
        raise ValueError("end must be 'min' or 'max'")
    params: Dict[str, Any] = {"end": end, "wait_ms": wait_ms, "max": max}
    if lease_ms is not None:
        params["lease_ms"] = lease_ms
    return Call(
        "POST",
        f"/v1/pqueues/{q(queue)}/pop",
        params,
        headers={"accept": "application/json"},
        timeout_s=wait_ms / 1000.0 + max_timeout(timeout_s),
    )
