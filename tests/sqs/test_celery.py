"""Celery on its own SQS broker (kombu's transport) against hotq: 1,000
tasks with task_acks_late, one in ten failing once and retried; every task
completes exactly once and the queue ends empty, nothing in flight."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import ACCESS_KEY, SECRET_KEY

TASKS = 1_000
BOUND_S = 150.0
HERE = Path(__file__).resolve().parent


def test_celery_runs_every_task_exactly_once(daemon, tmp_path, sqs):
    done = tmp_path / "done"
    done.mkdir()
    host = daemon.url.split("://", 1)[1]
    env = dict(os.environ, CELERY_BROKER_URL=f"sqs://{ACCESS_KEY}:{SECRET_KEY}@{host}",
               CELERY_QUEUE="celery-hotq", CELERY_DONE_DIR=str(done), PYTHONPATH=str(HERE))
    os.environ.update({k: env[k] for k in ("CELERY_BROKER_URL", "CELERY_QUEUE", "CELERY_DONE_DIR")})
    sys.path.insert(0, str(HERE))
    import celery_app  # noqa: E402  (configured by the environment above)

    celery_app.app.conf.broker_url = env["CELERY_BROKER_URL"]
    celery_app.app.conf.task_default_queue = env["CELERY_QUEUE"]
    celery_app.DONE_DIR = str(done)
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "celery_app", "worker", "--pool", "threads",
         "--concurrency", "16", "--loglevel", "WARNING", "--without-gossip", "--without-mingle", "--without-heartbeat"],
        cwd=HERE, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    try:
        for n in range(TASKS):
            celery_app.work.delay(n)
        deadline = time.monotonic() + BOUND_S
        while time.monotonic() < deadline and len(list(done.glob("[0-9]*"))) < TASKS:
            assert worker.poll() is None, worker.stderr.read().decode(errors="replace")[-2000:]
            time.sleep(0.2)
        completed = sorted(int(p.name) for p in done.glob("[0-9]*"))
        assert completed == list(range(TASKS))
        url = sqs.get_queue_url(QueueName="celery-hotq")["QueueUrl"]
        while time.monotonic() < deadline:
            attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
            counts = [attributes[k] for k in ("ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed")]
            if counts == ["0", "0", "0"]:
                break
            time.sleep(0.2)
        assert counts == ["0", "0", "0"]
        assert not (done / "duplicates").exists(), (done / "duplicates").read_text()
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=60)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
