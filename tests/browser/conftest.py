"""The console's browser tests: the real daemon binary (``HOTQ_BIN``,
default ``target/debug/hotq``) on 127.0.0.1:0, learned from its "API
listening" log line, and Debian's headless Chromium driven by its
chromedriver through selenium."""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60.0


class Daemon:
    def __init__(self, data_dir: Path, token: Optional[str] = None) -> None:
        binary = os.environ.get("HOTQ_BIN", str(REPO / "target" / "debug" / "hotq"))
        args: List[str] = [
            binary, "serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--resp-listen", "127.0.0.1:0",
            "--data-dir", str(data_dir / "data"),
        ]
        if token:
            args += ["--token", token]
        self.token = token
        self.process = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            env=dict(os.environ, RUST_LOG="info"),
        )
        lines: "queue.Queue[Optional[str]]" = queue.Queue()

        def read() -> None:
            assert self.process.stderr is not None
            for raw in self.process.stderr:
                lines.put(raw.decode("utf-8", "replace"))
            lines.put(None)

        threading.Thread(target=read, daemon=True).start()
        while True:
            try:
                line = lines.get(timeout=START_TIMEOUT_S)
            except queue.Empty:
                self.stop()
                raise RuntimeError("the daemon did not log its address in time")
            if line is None:
                raise RuntimeError(f"the daemon exited ({self.process.wait()})")
            try:
                fields = json.loads(line).get("fields", {})
            except ValueError:
                continue
            if fields.get("message") == "metrics exporter listening":
                self.metrics_url = f"http://{fields['address']}"
            if fields.get("message") == "API listening":
                self.url = f"http://{fields['address']}"
                return

    def call(self, method: str, path: str, body: Any = None,
             token: Optional[str] = "default") -> Tuple[int, Any]:
        """One API call as a script makes it: (status, JSON or bytes)."""
        token = self.token if token == "default" else token
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Accept", "application/json")
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, raw = error.code, error.read()
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, raw

    def metric(self, name: str, **labels: str) -> float:
        """The sum of the exporter's samples of `name` whose labels include `labels`."""
        with urllib.request.urlopen(self.metrics_url + "/metrics", timeout=60) as response:
            text = response.read().decode()
        total = 0.0
        for line in text.splitlines():
            if not line.startswith(name + "{") and not line.startswith(name + " "):
                continue
            series, value = line.rsplit(" ", 1)
            if all(f'{key}="{wanted}"' in series for key, wanted in labels.items()):
                total += float(value)
        return total

    def stats(self, queue_name: str) -> Dict[str, Any]:
        status, stats = self.call("GET", f"/v1/queues/{queue_name}")
        assert status == 200, stats
        return stats

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture
def daemon() -> Iterator[Daemon]:
    with tempfile.TemporaryDirectory() as directory:
        running = Daemon(Path(directory))
        yield running
        running.stop()


@pytest.fixture
def daemon_with_token() -> Iterator[Daemon]:
    with tempfile.TemporaryDirectory() as directory:
        running = Daemon(Path(directory), token="s3cret-console-token")
        yield running
        running.stop()


def chromium_binary() -> str:
    return os.environ.get("CHROMIUM_BIN") or shutil.which("chromium") or "/usr/bin/chromium"


def chromedriver_binary() -> str:
    return os.environ.get("CHROMEDRIVER_BIN") or shutil.which("chromedriver") or "/usr/bin/chromedriver"


@pytest.fixture
def browser() -> Iterator[webdriver.Chrome]:
    options = webdriver.ChromeOptions()
    options.binary_location = chromium_binary()
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--window-size=1360,900",
                     "--force-device-scale-factor=1", "--hide-scrollbars"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(chromedriver_binary()), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()
