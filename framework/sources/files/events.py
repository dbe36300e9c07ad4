"""S3 event notifications through an SQS queue: what landed under a source's roots,
without listing them (``listing="notifications"``).

The bucket sends ``s3:ObjectCreated:*`` events to a queue of the source's own (directly,
or through SNS). A run receives every message the queue holds, keeps the created objects
under its roots, and asks each for its size and Last-Modified (one HEAD: an event's own
figures are not the listing's, and the object may be gone). The messages are deleted
once the run has committed (``Events.acknowledge``): a run that fails leaves them to
reappear for the next. Events are not guaranteed, so the source still lists in full every
``reconcile_every``. Needs boto3 (``pip install 'deltamark[sqs]'``); the queue's endpoint
and region come from the AWS environment (``AWS_ENDPOINT_URL_SQS`` or
``AWS_ENDPOINT_URL``, ``AWS_REGION``) or the queue's URL.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_plus

import pyarrow.fs as pafs

from framework.errors import MissingExtraError
from framework.storage import S3_SCHEMES, filesystem

__all__ = ["Events", "is_object_store", "receive", "waiting"]

log = logging.getLogger("deltamark.sources")

#: how long received messages stay hidden from other consumers while a run works
VISIBILITY_TIMEOUT_S = 900
#: messages a run takes at most (the rest wait for the next run)
MAX_MESSAGES = 100_000


@dataclass(frozen=True)
class Events:
    """The objects a queue's messages announced under the roots, found on the store."""

    #: (root index, native path, size, modification time in ns) of each
    found: tuple[tuple[int, str, int, int], ...]
    queue: str
    #: receipt handles of every message taken (deleted by ``acknowledge``)
    receipts: tuple[str, ...]
    #: objects announced outside the roots (their messages are taken all the same)
    elsewhere: int = 0

    def acknowledge(self) -> None:
        """Delete the messages taken: the run that planned from them has committed."""
        client = _client(self.queue)
        for first in range(0, len(self.receipts), 10):
            batch = self.receipts[first:first + 10]
            client.delete_message_batch(QueueUrl=self.queue, Entries=[
                {"Id": str(i), "ReceiptHandle": r} for i, r in enumerate(batch)])


def receive(queue: str, roots: Sequence[str]) -> Events:
    """Every message ``queue`` holds now (up to ``MAX_MESSAGES``), as the objects they
    announce under ``roots`` (``s3://bucket/prefix``, any S3 scheme).

    Raises:
        ValueError: boto3 is absent, or the queue cannot be read (the message says why).
    """
    client = _client(queue)
    receipts: list[str] = []
    keys: list[tuple[str, str]] = []
    while len(receipts) < MAX_MESSAGES:
        try:
            answer = client.receive_message(QueueUrl=queue, MaxNumberOfMessages=10,
                                            VisibilityTimeout=VISIBILITY_TIMEOUT_S,
                                            WaitTimeSeconds=0 if receipts else 1)
        except Exception as exc:  # botocore's errors: one line naming the queue
            raise ValueError(f"cannot read queue {queue}: {exc}") from exc
        messages = answer.get("Messages", [])
        if not messages:
            break
        for message in messages:
            receipts.append(message["ReceiptHandle"])
            keys += _created(message["Body"])
    found, elsewhere = _under(keys, roots)
    return Events(found=tuple(found), queue=queue, receipts=tuple(receipts),
                  elsewhere=elsewhere)


def waiting(queue: str) -> int:
    """About how many messages ``queue`` holds (visible or being worked on)."""
    attributes = _client(queue).get_queue_attributes(
        QueueUrl=queue, AttributeNames=["ApproximateNumberOfMessages",
                                        "ApproximateNumberOfMessagesNotVisible"])
    return sum(int(v) for v in attributes["Attributes"].values())


def _created(body: str) -> list[tuple[str, str]]:
    """(bucket, key) of each object an event message announces as created."""
    try:
        event = json.loads(body)
        if event.get("Type") == "Notification":  # delivered through SNS
            event = json.loads(event["Message"])
    except (ValueError, KeyError, TypeError):
        log.warning("a queue message that is not an S3 event was taken: %s", body[:200])
        return []
    return [(r["s3"]["bucket"]["name"], unquote_plus(r["s3"]["object"]["key"]))
            for r in event.get("Records", [])
            if str(r.get("eventName", "")).startswith("ObjectCreated")]


def _under(keys: list[tuple[str, str]], roots: Sequence[str]
           ) -> tuple[list[tuple[int, str, int, int]], int]:
    scopes = [_bucket_and_prefix(root) for root in roots]
    found, elsewhere, seen = [], 0, set()
    for bucket, key in keys:
        index = next((i for i, (b, prefix) in enumerate(scopes)
                      if b == bucket and key.startswith(prefix)), None)
        if index is None:
            elsewhere += 1
        elif (index, key) not in seen:
            seen.add((index, key))
            fs, path, _ = filesystem(f"{roots[index].split('://')[0]}://{bucket}/{key}")
            info = fs.get_file_info(path)
            if info.type == pafs.FileType.File:  # not deleted since
                found.append((index, path, info.size, info.mtime_ns))
    return found, elsewhere


def _bucket_and_prefix(root: str) -> tuple[str, str]:
    """A root's bucket, and the prefix of the keys under it (``""`` or ``"a/b/"``)."""
    bucket, _, prefix = root.split("://", 1)[1].partition("/")
    return bucket, f"{prefix.strip('/')}/" if prefix.strip("/") else ""


def _client(queue: str) -> Any:
    try:
        import boto3
    except ImportError as exc:
        raise MissingExtraError(exc, f"listing='notifications' (the SQS queue {queue})"
                                ) from None
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if match := re.match(r"https://sqs\.([a-z0-9-]+)\.amazonaws\.com/", queue):
        region = match.group(1)
    endpoint = os.environ.get("AWS_ENDPOINT_URL_SQS") or os.environ.get("AWS_ENDPOINT_URL")
    return boto3.client("sqs", region_name=region, endpoint_url=endpoint)


def is_object_store(root: str) -> bool:
    """Whether ``root`` is on S3 (the only store whose events this module reads)."""
    return root.split("://", 1)[0] in S3_SCHEMES if "://" in root else False
