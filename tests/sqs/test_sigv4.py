"""SigV4 with credentials configured: the right secret is served, a wrong
one, an unknown key and an unsigned request answer 403 with SQS's codes."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
from botocore.exceptions import ClientError

from conftest import ACCESS_KEY, SECRET_KEY, Daemon


@pytest.fixture(scope="module")
def signed(tmp_path_factory):
    config = f'[sqs.credentials]\n{ACCESS_KEY} = "{SECRET_KEY}"\n'
    running = Daemon(tmp_path_factory.mktemp("hotq-sigv4"), config)
    yield running
    running.stop()


def test_signatures_are_verified(signed):
    good = signed.client()
    url = good.create_queue(QueueName="signed")["QueueUrl"]
    good.send_message(QueueUrl=url, MessageBody="ok")
    for client, code in [
        (signed.client(secret_key="wrong-secret"), "SignatureDoesNotMatch"),
        (signed.client(access_key="AKIDUNKNOWN"), "InvalidClientTokenId"),
    ]:
        with pytest.raises(ClientError) as error:
            client.receive_message(QueueUrl=url)
        assert error.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
        assert error.value.response["Error"]["Code"] == code
    request = urllib.request.Request(
        signed.url + "/", data=b"{}", method="POST",
        headers={"X-Amz-Target": "AmazonSQS.ListQueues", "Content-Type": "application/x-amz-json-1.0"},
    )
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(request, timeout=30)
    assert error.value.code == 403
    assert error.value.headers["x-amzn-query-error"] == "MissingAuthenticationToken;Sender"
    # Nothing was received by the refused calls.
    assert good.receive_message(QueueUrl=url)["Messages"][0]["Body"] == "ok"
