"""hotq: a Python client for the hotq queue service.

>>> from hotq import Client
>>> with Client("http://127.0.0.1:7070") as client:
...     client.push("jobs", b"build-1")
...     for message in client.pop("jobs", wait_ms=5000, lease_ms=30000):
...         message.ack()
"""

from .aio import AsyncClient
from .client import Client
from .errors import (
    BadRequest,
    ConnectError,
    HotqError,
    InvalidQueueName,
    InvalidReceipt,
    LeaseLost,
    NotDeadLetterQueue,
    NotFound,
    ReceiptQueueMismatch,
    ServerError,
    TooLarge,
    Unauthorized,
)
from .models import (
    AsyncMessage,
    BatchItem,
    DeleteResult,
    Lease,
    LeasePage,
    Message,
    NackResult,
    PurgeResult,
    PushResult,
    QueuePage,
    QueueSettings,
    SettingsResult,
    Stats,
)
from .worker import AsyncWorker, Worker, WorkerEvent, WorkerPolicy

__all__ = [
    "AsyncClient",
    "AsyncMessage",
    "AsyncWorker",
    "BadRequest",
    "BatchItem",
    "DeleteResult",
    "InvalidReceipt",
    "Lease",
    "LeasePage",
    "NotDeadLetterQueue",
    "PurgeResult",
    "QueuePage",
    "QueueSettings",
    "SettingsResult",
    "Client",
    "ConnectError",
    "HotqError",
    "InvalidQueueName",
    "LeaseLost",
    "Message",
    "NackResult",
    "NotFound",
    "PushResult",
    "ReceiptQueueMismatch",
    "ServerError",
    "Stats",
    "TooLarge",
    "Unauthorized",
    "Worker",
    "WorkerEvent",
    "WorkerPolicy",
]
