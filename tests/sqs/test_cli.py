"""The AWS CLI (`aws sqs … --endpoint-url`): a send/receive/delete round trip."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ACCESS_KEY, SECRET_KEY


def aws(daemon, *args: str) -> dict:
    # The CLI installed beside this interpreter (the CI's venv), else PATH's.
    local = Path(sys.executable).parent / "aws"
    binary = str(local) if local.exists() else shutil.which("aws")
    if binary is None:
        pytest.fail("the AWS CLI is not installed (pip install awscli)")
    env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY,
               AWS_DEFAULT_REGION="us-east-1", AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull)
    done = subprocess.run([binary, "sqs", *args, "--endpoint-url", daemon.url, "--output", "json"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout) if done.stdout.strip() else {}


def test_cli_round_trip(daemon):
    url = aws(daemon, "create-queue", "--queue-name", "cli-jobs")["QueueUrl"]
    sent = aws(daemon, "send-message", "--queue-url", url, "--message-body", "from the cli")
    got = aws(daemon, "receive-message", "--queue-url", url, "--wait-time-seconds", "5")["Messages"][0]
    assert got["MessageId"] == sent["MessageId"]
    assert got["Body"] == "from the cli"
    aws(daemon, "delete-message", "--queue-url", url, "--receipt-handle", got["ReceiptHandle"])
    attributes = aws(daemon, "get-queue-attributes", "--queue-url", url, "--attribute-names", "All")["Attributes"]
    assert attributes["ApproximateNumberOfMessages"] == "0"
    assert attributes["ApproximateNumberOfMessagesNotVisible"] == "0"
