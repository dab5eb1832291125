"""A redis-cli session against the daemon's RESP listener: connects, runs
hotq's commands and Redis's list commands, and prints their replies."""

from __future__ import annotations

import shutil
import subprocess

import pytest


def cli(daemon, *args: str) -> str:
    return subprocess.run(
        ["redis-cli", "-h", daemon.host, "-p", str(daemon.port), *args],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout


@pytest.mark.skipif(shutil.which("redis-cli") is None, reason="redis-cli is not installed (CI installs redis-tools)")
def test_a_redis_cli_session(daemon) -> None:
    assert cli(daemon, "PING") == "PONG\n"
    assert cli(daemon, "PUSH", "jobs", "build-1", "build-2") == "2\n"
    assert cli(daemon, "LLEN", "jobs") == "2\n"
    assert cli(daemon, "BRPOP", "jobs", "5") == "jobs\nbuild-1\n"
    leased = cli(daemon, "POP", "jobs", "LEASE", "30000").split("\n")
    receipt, count, item = leased[0], leased[1], leased[2]
    assert (len(receipt), count, item) == (32, "1", "build-2")
    assert cli(daemon, "ACK", "jobs", receipt) == "acked\n"
    assert cli(daemon, "POP", "jobs") == "\n"
    # A session on a terminal-less stdin, as scripts pipe it.
    session = subprocess.run(
        ["redis-cli", "-h", daemon.host, "-p", str(daemon.port)],
        input="RPUSH q a b\nLPOP q 2\nSTATS q\nQUIT\n", capture_output=True, text=True, timeout=60,
    )
    assert session.returncode == 0
    assert session.stdout.startswith("2\na\nb\n"), session.stdout
    assert "depth\n0\n" in session.stdout
