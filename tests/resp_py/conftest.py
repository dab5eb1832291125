"""Starts the real daemon binary (``HOTQ_BIN``, default ``target/debug/hotq``
of the repository) with its RESP listener on 127.0.0.1:0, and learns the
listener's address from the "RESP listening" line of its JSON log, as the
Rust tests do."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
from pathlib import Path
from typing import Iterator, List, Optional

import pytest
import redis

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60.0


class Daemon:
    """A hotq daemon; ``host`` and ``port`` are its RESP listener's."""

    def __init__(self, data_dir: Path, token: Optional[str] = None) -> None:
        binary = os.environ.get("HOTQ_BIN", str(REPO / "target" / "debug" / "hotq"))
        args: List[str] = [
            binary, "serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
            "--resp-listen", "127.0.0.1:0", "--data-dir", str(data_dir / "data"),
        ]
        if token:
            args += ["--token", token]
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
            if fields.get("message") == "RESP listening":
                self.host, port = fields["address"].rsplit(":", 1)
                self.port = int(port)
                return

    def client(self, **options) -> redis.Redis:
        return redis.Redis(host=self.host, port=self.port, socket_timeout=60, **options)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    running = Daemon(tmp_path)
    yield running
    running.stop()


@pytest.fixture
def daemon_with_token(tmp_path: Path) -> Iterator[Daemon]:
    running = Daemon(tmp_path, token="py-secret")
    yield running
    running.stop()
