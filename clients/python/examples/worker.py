"""A hotq worker: builds each job it is handed, at least once.

    HOTQ_URL=http://127.0.0.1:7070 python examples/worker.py jobs
"""

import os
import signal
import sys

from hotq import Client, Message, Worker, WorkerEvent, WorkerPolicy


def build(message: Message) -> None:
    # Raise to fail the job: it is nacked with backoff and comes back
    # (to `<queue>.dead` after max_deliveries). Returning acks it.
    job = message.data.decode()
    print(f"building {job} (delivery {message.delivery_count})", flush=True)


def log(event: WorkerEvent) -> None:
    if event.kind in ("failed", "lease_lost", "error"):
        print(f"{event.kind}: {event.detail!r}", file=sys.stderr, flush=True)


queue = sys.argv[1] if len(sys.argv) > 1 else "jobs"
with Client(os.environ.get("HOTQ_URL", "http://127.0.0.1:7070"), os.environ.get("HOTQ_TOKEN")) as client:
    # Leases of 30 s, extended every 10 s while build() runs; 4 at once.
    policy = WorkerPolicy(lease_ms=30_000, wait_ms=5_000, concurrency=4)
    worker = Worker(client, queue, build, policy, on_event=log)
    # Ctrl-C or SIGTERM: finish the jobs in hand, settle them, exit.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: worker.stop(timeout_s=0))
    worker.run()
