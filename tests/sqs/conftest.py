"""Starts the real daemon binary (``HOTQ_BIN``, default ``target/debug/hotq``
of the repository) on 127.0.0.1:0 for the SQS suites, and learns its port
from the "API listening" line of its JSON log, as the Rust tests do."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import urllib.request
from pathlib import Path
from typing import Iterator, List, Optional

import boto3
import pytest
from botocore.config import Config

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60.0
ACCESS_KEY = "AKIDHOTQTEST"
SECRET_KEY = "hotq-test-secret"


class Daemon:
    """A hotq daemon with the given configuration text."""

    def __init__(self, data_dir: Path, config_text: str = "") -> None:
        binary = os.environ.get("HOTQ_BIN", str(REPO / "target" / "debug" / "hotq"))
        config = data_dir / "hotq.toml"
        config.write_text(config_text)
        args: List[str] = [
            binary, "serve", "--config", str(config), "--listen", "127.0.0.1:0",
            "--metrics-listen", "127.0.0.1:0", "--resp-listen", "127.0.0.1:0", "--data-dir", str(data_dir / "data"),
        ]
        env = dict(os.environ, RUST_LOG="info")
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        lines: "queue.Queue[Optional[str]]" = queue.Queue()

        def read() -> None:
            assert self.process.stderr is not None
            for raw in self.process.stderr:
                lines.put(raw.decode("utf-8", "replace"))
            lines.put(None)

        threading.Thread(target=read, daemon=True).start()
        logged: List[str] = []
        self.metrics_url = None
        while True:
            try:
                line = lines.get(timeout=START_TIMEOUT_S)
            except queue.Empty:
                self.stop()
                raise RuntimeError("the daemon did not log its address in time")
            if line is None:
                status = self.process.wait()
                raise RuntimeError(f"the daemon exited ({status}): {''.join(logged[-5:])}")
            logged.append(line)
            try:
                fields = json.loads(line).get("fields", {})
            except ValueError:
                continue
            if fields.get("message") == "metrics exporter listening":
                self.metrics_url = f"http://{fields['address']}/metrics"
            if fields.get("message") == "API listening":
                self.url = f"http://{fields['address']}"
                return

    def client(self, access_key: str = ACCESS_KEY, secret_key: str = SECRET_KEY):
        return boto3.client(
            "sqs", endpoint_url=self.url, region_name="us-east-1",
            aws_access_key_id=access_key, aws_secret_access_key=secret_key,
            config=Config(retries={"max_attempts": 1}, read_timeout=60),
        )

    def v1(self, method: str, path: str, body: Optional[bytes] = None) -> bytes:
        request = urllib.request.Request(self.url + path, data=body, method=method)
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.read()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    running = Daemon(tmp_path_factory.mktemp("hotq-sqs"))
    yield running
    running.stop()


@pytest.fixture
def sqs(daemon: Daemon):
    return daemon.client()
