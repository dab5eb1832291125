"""A Celery app on Celery's own SQS broker (kombu's transport) pointed at
hotq, for test_celery.py: tasks with acks_late, one in ten failing on its
first run and retried; each run that completes marks its task in
CELERY_DONE_DIR, and a second completion of one task is recorded."""

from __future__ import annotations

import os

from celery import Celery

app = Celery("hotq_sqs_celery", broker=os.environ.get("CELERY_BROKER_URL", "sqs://x:y@127.0.0.1:1"))
app.conf.update(
    task_acks_late=True,
    task_default_queue=os.environ.get("CELERY_QUEUE", "celery"),
    worker_prefetch_multiplier=4,
    broker_connection_retry_on_startup=True,
    broker_transport_options={
        "region": "us-east-1",
        "is_secure": False,
        "visibility_timeout": 120,
        "polling_interval": 0.1,
        "wait_time_seconds": 1,
    },
)
DONE_DIR = os.environ.get("CELERY_DONE_DIR", "/nonexistent")


@app.task(bind=True, acks_late=True, max_retries=5)
def work(self, n: int) -> None:
    if n % 10 == 0 and self.request.retries == 0:
        raise self.retry(countdown=1, exc=RuntimeError(f"task {n} fails on its first run"))
    try:
        os.close(os.open(os.path.join(DONE_DIR, str(n)), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        with open(os.path.join(DONE_DIR, "duplicates"), "a") as duplicates:
            duplicates.write(f"{n}\n")
