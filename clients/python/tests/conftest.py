"""Starts the real daemon binary (``HOTQ_BIN``, default
``target/debug/hotq`` of the repository) on 127.0.0.1:0 and learns its
port from the "API listening" line of its JSON log, as the Rust tests do."""

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

REPO = Path(__file__).resolve().parents[3]
START_TIMEOUT_S = 60.0

CONFIG = """
[leases.queues.poison]
max_deliveries = 2
"""


class Daemon:
    def __init__(self, data_dir: Path, token: Optional[str] = None) -> None:
        binary = os.environ.get("HOTQ_BIN", str(REPO / "target" / "debug" / "hotq"))
        config = data_dir / "hotq.toml"
        config.write_text(CONFIG)
        args: List[str] = [
            binary, "serve", "--config", str(config), "--listen", "127.0.0.1:0",
            "--metrics-listen", "127.0.0.1:0", "--resp-listen", "127.0.0.1:0", "--data-dir", str(data_dir / "data"),
        ]
        if token:
            args += ["--token", token]
        env = dict(os.environ, RUST_LOG="info")
        self.process = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env
        )
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
                log = json.loads(line)
            except ValueError:
                continue
            fields = log.get("fields", {})
            if fields.get("message") == "RESP listening":
                self.resp_url = f"resp://{fields['address']}"
            if fields.get("message") == "API listening":
                self.url = f"http://{fields['address']}"
                return

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture()
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    (tmp_path / "open").mkdir()
    running = Daemon(tmp_path / "open")
    yield running
    running.stop()


@pytest.fixture()
def secured(tmp_path: Path) -> Iterator[Daemon]:
    (tmp_path / "secured").mkdir()
    running = Daemon(tmp_path / "secured", token="s3cret")
    yield running
    running.stop()
