"""Errors as typed exceptions, classified by the daemon's JSON error code.

Every answer the daemon refuses carries ``{"error": {"code", "message"}}``;
:func:`error_from_answer` picks the exception class by ``code`` (never by
the message), falling back on the HTTP status.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Type


class HotqError(Exception):
    """A call the daemon refused, or that did not reach it.

    ``status`` is the HTTP status (``None`` when no answer came), ``code``
    the daemon's stable error code, ``message`` its human-readable detail.
    """

    def __init__(self, status: Optional[int], code: str, message: str) -> None:
        super().__init__(f"{message} ({status} {code})" if status else f"{message} ({code})")
        self.status = status
        self.code = code
        self.message = message


class ConnectError(HotqError):
    """The daemon could not be reached (refused, reset, timed out)."""


class BadRequest(HotqError):
    """400: a bad parameter, body, base64 or batch."""


class InvalidQueueName(BadRequest):
    """400 ``invalid_queue_name``."""


class ReceiptQueueMismatch(BadRequest):
    """400 ``receipt_queue_mismatch``: the receipt was issued by another queue."""


class InvalidReceipt(BadRequest):
    """400 ``invalid_receipt``: not a receipt at all (32 hex digits); the
    batch ack calls the same receipt ``invalid``."""


class NotDeadLetterQueue(HotqError):
    """409 ``not_dead_letter_queue``: a redrive of a queue no queue names as
    its dead-letter queue (and whose name does not end in ``.dead``)."""


class Unauthorized(HotqError):
    """401: missing or wrong bearer token."""


class NotFound(HotqError):
    """404 ``not_found``: no such route."""


class LeaseLost(HotqError):
    """The lease is lost and the settle did nothing: 404 ``unknown_receipt``
    (settled already, returned by the timer, or never issued) or 409
    ``lease_expired`` (past its expiry, not yet returned). The daemon
    documents both as one rule: stop; the item is or will be redelivered."""


class TooLarge(HotqError):
    """413: an item or body over the limit."""


class ServerError(HotqError):
    """5xx: the store failed, is busy (``store_busy``) or unavailable."""


_BY_CODE: Dict[str, Type[HotqError]] = {
    "invalid_queue_name": InvalidQueueName,
    "receipt_queue_mismatch": ReceiptQueueMismatch,
    "invalid_receipt": InvalidReceipt,
    "not_dead_letter_queue": NotDeadLetterQueue,
    "unknown_receipt": LeaseLost,
    "lease_expired": LeaseLost,
    "unauthorized": Unauthorized,
    "not_found": NotFound,
}


def _by_status(status: int) -> Type[HotqError]:
    if status == 400:
        return BadRequest
    if status == 401:
        return Unauthorized
    if status == 413:
        return TooLarge
    if status >= 500:
        return ServerError
    return HotqError


def error_from_answer(status: int, body: bytes) -> HotqError:
    """The exception for a refused answer with ``status`` and ``body``."""
    import json

    code, message = "http_error", body.decode("utf-8", "replace")[:500]
    try:
        parsed: Any = json.loads(body)
        code = str(parsed["error"]["code"])
        message = str(parsed["error"]["message"])
    except (ValueError, KeyError, TypeError):
        pass
    cls = _BY_CODE.get(code) or _by_status(status)
    return cls(status, code, message)
