"""Device Fleet's dashboard and ingest paths as a Python + boto3 Lambda: the reference peer.

Written the way a competent Python team would write these two Lambdas, so the benchmark
compares Rust with a fair alternative, not a straw man:

- one boto3 client per execution environment (module level), standard retry mode with the
  same attempts and timeouts as the Rust client, and a small thread pool that sends the
  BatchWriteItem chunks of one request concurrently (as the Rust handler does);
- BatchWriteItem with UnprocessedItems retried under full-jitter backoff, so a partial
  failure names exactly the events to resend;
- a warm-Lambda cache of registrations (30 s) and of devices' live states, like the Rust one.

Same table, same keys, same item attributes, same statuses and response bodies as
`functions/dashboard` (GET /me/dashboard, AP-DASH) and `functions/ingest`
(POST /devices/{deviceId}/events, AP-14); `tests/python_peer.rs` checks that. Configuration
comes from the same environment: TABLE_NAME, RETENTION_DAYS, EVENT_TYPE_SHARDS,
SEARCHABLE_EVENT_TYPES, REGISTRATION_CACHE_SECONDS, MAX_CLOCK_SKEW_SECONDS, INGEST_RETRY_MS,
and the standard AWS variables (AWS_REGION, AWS_ENDPOINT_URL_DYNAMODB).
"""

import base64
import datetime as dt
import hashlib
import hmac
import json
import math
import os
import random
import re
import struct
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import boto3
import xxhash
from botocore.config import Config
from botocore.exceptions import ClientError, ConnectionError as BotoConnectionError
from botocore.exceptions import ReadTimeoutError

# ---------------------------------------------------------------------------------------------
# Configuration and clients: once per execution environment.


def _number(name, default, low, high):
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        raise RuntimeError(f"{name}={raw!r} is not a number in {low}..={high}")
    return value


TABLE_NAME = os.environ.get("TABLE_NAME", "").strip()
RETENTION_DAYS = _number("RETENTION_DAYS", 90, 1, 3650)
EVENT_TYPE_SHARDS = _number("EVENT_TYPE_SHARDS", 8, 1, 1000)


def _searchable(text):
    """SEARCHABLE_EVENT_TYPES: `alarm,error:16` -> {type: shards} (shared::config::parse_searchable)."""
    types = {}
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        name, _, count = entry.partition(":")
        shards = int(count) if count.strip() else EVENT_TYPE_SHARDS
        if not 1 <= shards <= 1000 or name.strip() in types:
            raise RuntimeError(f"SEARCHABLE_EVENT_TYPES={text!r} is not valid")
        types[name.strip()] = shards
    return types


SEARCHABLE_EVENT_TYPES = _searchable(os.environ.get("SEARCHABLE_EVENT_TYPES", "alarm,error,fault"))
REGISTRATION_CACHE_SECONDS = _number("REGISTRATION_CACHE_SECONDS", 30, 0, 10**9)
MAX_CLOCK_SKEW_SECONDS = _number("MAX_CLOCK_SKEW_SECONDS", 300, 0, 10**9)
INGEST_RETRY_MS = _number("INGEST_RETRY_MS", 5000, 0, 10**9)

MAX_EVENTS_PER_BATCH = 100
BATCH_WRITE_SIZE = 25
MAX_TEXT_VALUE = 64
MAX_STATE_TYPES = 8
RECENT_EVENTS = 10
SEEN_GRANULARITY_SECONDS = 15 * 60
STATE_ATTEMPTS = 16
MAX_INGEST_BODY_BYTES = 64 * 1024
CACHE_CAPACITY = 10_000
RETRY_AFTER_SECONDS = 1
ANSWER_MARGIN_SECONDS = 0.5

# The endpoint comes from AWS_ENDPOINT_URL_DYNAMODB (botocore reads it), like the Rust SDK.
DYNAMODB = boto3.client(
    "dynamodb",
    region_name=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"),
    config=Config(
        retries={"max_attempts": 4, "mode": "standard"},
        connect_timeout=3,
        read_timeout=3,
        max_pool_connections=16,
    ),
)
WRITERS = ThreadPoolExecutor(max_workers=4)

# ---------------------------------------------------------------------------------------------
# The error contract: {"error": {"code", "message", "field"?}} with its status.


class ApiError(Exception):
    def __init__(self, status, code, message, field=None, retry_after=None):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.field, self.retry_after = field, retry_after

    def response(self):
        error = {"code": self.code, "message": self.message}
        if self.field is not None:
            error["field"] = self.field
        headers = {}
        if self.retry_after is not None:
            headers["retry-after"] = str(self.retry_after)
        return json_response(self.status, {"error": error}, headers)


def invalid(field, reason):
    return ApiError(400, "invalid_request", f"{field}: {reason}", field=field)


def device_unauthorized():
    return ApiError(401, "unauthorized", "unknown device or wrong token")


def busy():
    return ApiError(503, "unavailable", "the service is busy, retry later",
                    retry_after=RETRY_AFTER_SECONDS)


def json_response(status, body, headers=None):
    return {
        "statusCode": status,
        "headers": {"content-type": "application/json", **(headers or {})},
        "body": json.dumps(body, separators=(",", ":"), ensure_ascii=False),
        "isBase64Encoded": False,
    }


# ---------------------------------------------------------------------------------------------
# Validated ids and timestamps (shared/src/ids.rs, timestamp.rs).

ID_PUNCTUATION = set("-_.:@+")


def is_control(c):
    # Rust's char::is_control: the Unicode Cc category.
    o = ord(c)
    return o < 0x20 or 0x7F <= o <= 0x9F


def check_token(field, value, max_len):
    if not isinstance(value, str):
        raise invalid(field, "must be a string")
    if value == "":
        raise invalid(field, "must not be empty")
    if len(value) > max_len:
        raise invalid(field, f"must be at most {max_len} characters")
    if "#" in value:
        raise invalid(field, "must not contain '#'")
    if any(is_control(c) for c in value):
        raise invalid(field, "must not contain control characters")
    for c in value:
        if not ((c.isascii() and c.isalnum()) or c in ID_PUNCTUATION):
            raise invalid(field, f"must not contain {rust_char_debug(c)}: "
                                 "use letters, digits and - _ . : @ +")
    return value


def rust_char_debug(c):
    if c == "'":
        return "'\\''"
    if c == "\\":
        return "'\\\\'"
    return f"'{c}'"


RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$"
)
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


class Timestamp:
    """UTC, millisecond precision; renders as 2024-04-10T10:00:00.000Z (string order = time)."""

    __slots__ = ("millis",)

    def __init__(self, millis):
        self.millis = millis

    @staticmethod
    def now():
        return Timestamp(time.time_ns() // 1_000_000)

    @staticmethod
    def parse(field, value):
        bad = invalid(field, "must be an RFC 3339 timestamp such as 2024-04-10T10:00:00.000Z")
        m = RFC3339.match(value) if isinstance(value, str) else None
        if not m:
            raise bad
        y, mo, d, h, mi, s, frac, _z, sign, oh, om = m.groups()
        try:
            local = dt.datetime(int(y), int(mo), int(d), int(h), int(mi), int(s),
                                tzinfo=dt.timezone.utc)
        except ValueError:
            raise bad from None
        if int(oh or 0) > 23 or int(om or 0) > 59:
            raise bad
        offset = (int(oh or 0) * 60 + int(om or 0)) * 60 * (-1 if sign == "-" else 1)
        millis = int((local - EPOCH).total_seconds()) * 1000 - offset * 1000
        millis += int((frac or "0")[:3].ljust(3, "0"))
        at = Timestamp(millis)
        if not 0 <= at.datetime().year <= 9999:
            raise invalid(field, "year must be 0000..9999")
        return at

    def datetime(self):
        return EPOCH + dt.timedelta(milliseconds=self.millis)

    def epoch_seconds(self):
        return self.millis // 1000

    def plus_seconds(self, seconds):
        return Timestamp(self.millis + seconds * 1000)

    def day(self):
        return self.datetime().strftime("%Y-%m-%d")

    def __str__(self):
        d = self.datetime()
        return d.strftime("%Y-%m-%dT%H:%M:%S.") + f"{self.millis % 1000:03d}Z"

    def __eq__(self, other):
        return isinstance(other, Timestamp) and self.millis == other.millis

    def __lt__(self, other):
        return self.millis < other.millis

    def __hash__(self):
        return hash(self.millis)


# ---------------------------------------------------------------------------------------------
# Event values: a number, a string or a boolean, typed so True never equals 1.0.
# Numbers are stored and hashed exactly as the Rust code writes an f64.


def _digits(value):
    """Shortest round-trip digits and exponent of a finite, non-zero |value|:
    |value| = int(digits) * 10**k, digits without leading or trailing zeros."""
    mantissa, _, exp = repr(abs(value)).partition("e")
    whole, _, frac = mantissa.partition(".")
    stripped = (whole + frac).lstrip("0")
    digits = stripped.rstrip("0")
    return digits, int(exp or 0) - len(frac) + len(stripped) - len(digits)


def rust_display(value):
    """Rust's `f64::to_string()` (what serde_dynamo stores in N): never an exponent."""
    if value == 0:
        return "-0" if str(value).startswith("-") else "0"
    digits, k = _digits(value)
    sign = "-" if value < 0 else ""
    if k >= 0:
        return sign + digits + "0" * k
    point = len(digits) + k
    if point > 0:
        return sign + digits[:point] + "." + digits[point:]
    return sign + "0." + "0" * (-point) + digits


def serde_json_f64(value):
    """serde_json's rendering of an f64 (1.0.154, zmij): integral values keep `.0`; from 1e16
    up and below 1e-5 an exponent, written `1e+16`, `1.5e-7`."""
    if value == 0:
        return "-0.0" if str(value).startswith("-") else "0.0"
    digits, k = _digits(value)
    sign = "-" if value < 0 else ""
    n = len(digits)
    kk = n + k
    if 0 <= k and kk <= 16:
        return sign + digits + "0" * k + ".0"
    if 0 < kk <= 16:
        return sign + digits[:kk] + "." + digits[kk:]
    if -5 < kk <= 0:
        return sign + "0." + "0" * (-kk) + digits
    exp = kk - 1
    body = digits if n == 1 else digits[0] + "." + digits[1:]
    return f"{sign}{body}e{'+' if exp > 0 else ''}{exp}"


def value_to_attr(value):
    kind, v = value
    if kind == "b":
        return {"BOOL": v}
    if kind == "n":
        return {"N": rust_display(v)}
    return {"S": v}


def value_from_attr(attr):
    if "BOOL" in attr:
        return ("b", attr["BOOL"])
    if "N" in attr:
        return ("n", float(attr["N"]))
    return ("s", attr["S"])


def value_to_json(value):
    return value[1]


def canonical_json(value):
    kind, v = value
    if kind == "b":
        return "true" if v else "false"
    if kind == "n":
        return serde_json_f64(v)
    return json.dumps(v, ensure_ascii=False)


STORABLE_NUMBER = "must be a number of magnitude from 1e-130 to below 1e126, or 0 (what DynamoDB stores)"


def event_value(field, value):
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, (int, float)):
        try:
            number = float(value)
        except OverflowError:
            raise invalid(field, STORABLE_NUMBER) from None
        if number != number or number in (float("inf"), float("-inf")):
            raise invalid(field, STORABLE_NUMBER)
        # DynamoDB stores magnitudes from 1e-130 to below 1e126 (and 0): refuse the rest here,
        # as the Rust handler does, rather than answer a valid JSON number with a 500.
        if number != 0 and not (1e-130 <= abs(number) < 1e126):
            raise invalid(field, STORABLE_NUMBER)
        return ("n", number)
    if isinstance(value, str):
        if len(value) > MAX_TEXT_VALUE:
            raise invalid(field, f"text is over {MAX_TEXT_VALUE} characters")
        if any(is_control(c) for c in value):
            raise invalid(field, "text must not contain control characters")
        return ("s", value)
    raise invalid(field, "must be a JSON number, string or boolean")


def derive_event_id(event_type, value, at):
    canonical = canonical_json(value)
    digest = hashlib.sha256(f"{event_type}\n{at}\n{canonical}".encode()).hexdigest()
    return "d-" + digest[:24]


def shard_of(text, count):
    return xxhash.xxh3_64_intdigest(text.encode()) % max(count, 1)


# ---------------------------------------------------------------------------------------------
# Request plumbing (API Gateway HTTP API, payload 2.0).


def headers_of(event):
    return {k.lower(): v for k, v in (event.get("headers") or {}).items()}


def body_bytes(event):
    body = event.get("body") or ""
    if event.get("isBase64Encoded"):
        return base64.b64decode(body)
    return body.encode()


def _reject_constant(name):
    raise ValueError(f"{name} is not JSON")


def json_body(event, max_bytes):
    raw = body_bytes(event)
    if len(raw) > max_bytes:
        raise ApiError(413, "payload_too_large", f"request body is over {max_bytes} bytes")
    if raw.strip() == b"":
        raise invalid("body", "a JSON object is required")
    try:
        return json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, UnicodeDecodeError) as err:
        raise invalid("body", str(err)) from None


def route_key(event):
    ctx = event.get("requestContext") or {}
    if ctx.get("routeKey"):
        return ctx["routeKey"]
    http = ctx.get("http") or {}
    return f"{http.get('method', '')} {event.get('rawPath', '')}"


def serve(event, context, handler):
    """Runs `handler`, turns errors into the contract, logs one JSON line like the Rust one."""
    started = time.perf_counter()
    route = route_key(event)
    try:
        response = handler(event, context)
    except ApiError as err:
        response = err.response()
    except Exception as err:  # noqa: BLE001 - a 500 never shows internals
        print(json.dumps({"level": "ERROR", "message": "internal error", "error": repr(err)}))
        response = ApiError(500, "internal", "internal error").response()
    print(json.dumps({
        "level": "INFO",
        "message": "request",
        "route": route,
        "status": response["statusCode"],
        "latency_ms": (time.perf_counter() - started) * 1000.0,
        "request_id": (event.get("requestContext") or {}).get("requestId", ""),
    }))
    return response


def sdk_error(err):
    """Throttling and timeouts past the client's retries are a 503 with Retry-After."""
    code = err.response.get("Error", {}).get("Code", "") if isinstance(err, ClientError) else ""
    if isinstance(err, (BotoConnectionError, ReadTimeoutError)) or code in THROTTLING:
        return busy()
    return ApiError(500, "internal", "internal error")


THROTTLING = {
    "ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded",
    "TransactionConflictException", "ThrottlingError",
}


def backoff(attempt):
    ceiling = min(0.025 * (2 ** max(attempt - 1, 0)), 1.0)
    time.sleep(random.uniform(0, ceiling))


# ---------------------------------------------------------------------------------------------
# GET /me/dashboard (AP-DASH): one Query, PK = USER#u AND SK BETWEEN 'DEVICE#' AND 'PROFILE'.


def _s(item, name):
    return item[name]["S"] if name in item else None


def profile_json(item):
    return {
        "userId": _s(item, "userId"),
        "name": _s(item, "name"),
        "email": _s(item, "email"),
        "createdAt": _s(item, "createdAt"),
        "updatedAt": _s(item, "updatedAt"),
    }


def _ts(millis):
    return str(Timestamp(int(millis)))


def device_id_of(item):
    """A device item's id, from its key (DEVICE#{deviceId}): it is stored there only."""
    return item["SK"]["S"][len("DEVICE#"):]


SEVERITY_RANK = {"warning": 0, "minor": 1, "major": 2, "critical": 3}


def alarm_summary(state):
    """Connectivity and open alarms from the live state's `alarms` statuses (shared::model::alarm):
    a status with `r` is an open alarm of severity `s`; an open `offline` one means offline."""
    statuses = state.get("alarms", {}).get("M", {})
    open_ = {k: v["M"] for k, v in statuses.items() if "r" in v["M"]}
    severities = [v["s"]["S"] for v in open_.values() if "s" in v]
    if "offline" in open_:
        connectivity = "offline"
    elif "lastSeen" in state:
        connectivity = "online"
    else:
        connectivity = "unknown"
    highest = max(severities, key=SEVERITY_RANK.get) if severities else None
    return connectivity, {"active": len(severities), "highestSeverity": highest}


def device_json(item, state):
    """A device as the API shows it: the device item with its live state's readings."""
    state = state or {}
    connectivity, alarms = alarm_summary(state)
    readings = state_from_item(state)
    versions = twin_versions(state)
    latest = {
        t: {"at": _ts(r[0]), "value": value_to_json(r[1])}
        for t, r in sorted(readings["latest"].items())
    }
    recent = [
        {"id": r[1], "type": r[2], "value": value_to_json(r[3]), "at": _ts(r[0])}
        for r in readings["recent"]
    ]
    return {
        "deviceId": device_id_of(item),
        "name": _s(item, "name"),
        "type": _s(item, "type"),
        "status": _s(item, "status"),
        "tags": [t["S"] for t in item.get("tags", {}).get("L", [])],
        "version": int(item["version"]["N"]),
        "createdAt": _s(item, "createdAt"),
        "updatedAt": _s(item, "updatedAt"),
        "lastSeen": _s(state, "lastSeen"),
        "latest": latest,
        "recent": recent,
        "connectivity": connectivity,
        "alarms": alarms,
        # Offline detection: the declared interval, and the learned one once known.
        **({"reportEverySeconds": int(item["reportEverySeconds"]["N"])}
           if "reportEverySeconds" in item else {}),
        **({"learnedEverySeconds": readings["learned"]}
           if readings["learned"] is not None else {}),
        **({"offlineDetection": "tight"}
           if item.get("offlineDetection", {}).get("S") == "tight" else {}),
        **({"twin": twin_summary(versions)} if any(versions.values()) else {}),
        **({"trail": trail} if (trail := device_trail(readings)) else {}),
    }


def device_trail(readings):
    """The dashboard's sparkline (shared::ops::devices::view::DeviceTrail::of_state): the first
    type (alphabetically) whose latest reading is a number and whose summaries hold a numeric
    hour; its trail updated with the open buckets' hours, the 24 up to the newest."""
    for event_type in sorted(readings["latest"]):
        s = readings["series"].get(event_type)
        if readings["latest"][event_type][1][0] != "n" or s is None:
            continue
        hours = dict(s["trail"])
        trail_update(hours, coarsen(s["open"], HOUR_MS))
        if hours:
            return {"type": event_type,
                    "hours": [{"start": _ts(h), "avg": hours[h]} for h in sorted(hours)]}
    return None


def twin_versions(item):
    """The device twin's versions on a live state (shared::model::twin::TwinVersions)."""
    return {name: int(item[name]["N"]) if name in (item or {}) else 0
            for name in ("desiredVersion", "reportedVersion", "commandSeq", "commandsDone")}


def twin_summary(v):
    return {
        "desiredVersion": v["desiredVersion"],
        "reportedVersion": v["reportedVersion"],
        "inSync": not v["desiredVersion"] > v["reportedVersion"],
        "openCommands": max(v["commandSeq"] - v["commandsDone"], 0),
    }


def state_key(user, shard, device):
    """The live state's key (shared::keys::state_pk / state_sk)."""
    pk = f"USER#{user}" if shard == 0 else f"USER#{user}#SHARD#{shard}"
    return {"PK": {"S": pk}, "SK": {"S": f"DEVICE#{device}#STATE"}}


def cursor_error():
    return invalid("cursor", "is not a cursor this request issued")


def decode_cursor(text, user_pk):
    if len(text) > 4096:
        raise cursor_error()
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        envelope = json.loads(raw)
        keys = envelope["k"]
        if envelope["p"] != "AP-DASH" or len(keys) != 1 or not isinstance(keys[0], dict):
            raise ValueError
        key = keys[0]
    except (ValueError, KeyError, TypeError):
        raise cursor_error() from None
    if set(key) != {"PK", "SK"} or key["PK"] != user_pk or not isinstance(key["SK"], str):
        raise cursor_error()
    return {"PK": {"S": key["PK"]}, "SK": {"S": key["SK"]}}


def encode_cursor(last_key):
    if not last_key:
        return None
    start = {k: v["S"] for k, v in sorted(last_key.items())}
    envelope = json.dumps({"p": "AP-DASH", "k": [start]}, separators=(",", ":"))
    return base64.urlsafe_b64encode(envelope.encode()).decode().rstrip("=")


def caller(event):
    authorizer = (event.get("requestContext") or {}).get("authorizer") or {}
    claims = (authorizer.get("jwt") or {}).get("claims")
    if not claims or "sub" not in claims:
        raise ApiError(401, "unauthorized", "authentication required")
    try:
        return check_token("sub", claims["sub"], 128)
    except ApiError:
        raise ApiError(401, "unauthorized", "authentication required") from None


def _dashboard(event, _context):
    user = caller(event)
    route = route_key(event)
    if route != "GET /me/dashboard":
        raise ApiError(404, "no_route", f"no route {route}")
    pk = f"USER#{user}"
    request = {
        "TableName": TABLE_NAME,
        "KeyConditionExpression": "PK = :pk AND SK BETWEEN :first AND :last",
        "ExpressionAttributeValues": {
            ":pk": {"S": pk}, ":first": {"S": "DEVICE#"}, ":last": {"S": "PROFILE"},
        },
        "Limit": 100,
        "ReturnConsumedCapacity": "TOTAL",
    }
    cursor = (event.get("queryStringParameters") or {}).get("cursor")
    if cursor is not None:
        request["ExclusiveStartKey"] = decode_cursor(cursor, pk)
    try:
        out = DYNAMODB.query(**request)
    except (ClientError, BotoConnectionError, ReadTimeoutError) as err:
        raise sdk_error(err) from None
    profile, devices = None, []  # devices: [device item, its state or None]
    for item in out.get("Items", []):
        kind = _s(item, "entityType")
        if kind == "profile":
            profile = profile_json(item)
        elif kind == "device":
            if "deletingAt" not in item:
                devices.append([item, None])
        elif kind == "deviceState":
            if devices and item["SK"]["S"] == f"DEVICE#{device_id_of(devices[-1][0])}#STATE":
                devices[-1][1] = item
        elif kind != "fleet":
            raise RuntimeError(f"unexpected {kind!r} item in the dashboard range")
    # States placed on the owner's other partitions (a large fleet): one BatchGetItem.
    missing = [state_key(user, int(d["shard"]["N"]) if "shard" in d else 0, device_id_of(d))
               for d, st in devices if st is None]
    placed = {}
    while missing:
        try:
            got = DYNAMODB.batch_get_item(
                RequestItems={TABLE_NAME: {"Keys": missing}}, ReturnConsumedCapacity="TOTAL")
        except (ClientError, BotoConnectionError, ReadTimeoutError) as err:
            raise sdk_error(err) from None
        for item in got.get("Responses", {}).get(TABLE_NAME, []):
            placed[item["SK"]["S"]] = item
        missing = got.get("UnprocessedKeys", {}).get(TABLE_NAME, {}).get("Keys", [])
    body = {"profile": profile,
            "devices": [device_json(d, st or placed.get(f"DEVICE#{device_id_of(d)}#STATE"))
                        for d, st in devices],
            "cursor": encode_cursor(out.get("LastEvaluatedKey"))}
    return json_response(200, body)


def dashboard_handler(event, context):
    """GET /me/dashboard."""
    return serve(event, context, _dashboard)


# ---------------------------------------------------------------------------------------------
# POST /devices/{deviceId}/events (AP-14).

_lock = threading.Lock()
_registrations = {}  # deviceId -> (registration, fetched monotonic seconds)
_states = {}  # deviceId -> live state dict


def _forget(device):
    with _lock:
        _registrations.pop(device, None)
        _states.pop(device, None)


def token_matches(presented, stored_sha256_hex):
    digest = hashlib.sha256(presented.encode()).hexdigest()
    return hmac.compare_digest(digest.encode(), stored_sha256_hex.encode())


def _registration_item(device, consistent):
    try:
        out = DYNAMODB.get_item(
            TableName=TABLE_NAME,
            Key={"PK": {"S": f"DEVICE#{device}"}, "SK": {"S": "REGISTRATION"}},
            ConsistentRead=consistent,
            ReturnConsumedCapacity="TOTAL",
        )
    except (ClientError, BotoConnectionError, ReadTimeoutError) as err:
        raise sdk_error(err) from None
    return out.get("Item")


def _accepts(item, token):
    # A released registration (the device was deleted) authenticates nothing.
    return bool(item) and item["entityType"]["S"] == "registration" \
        and token_matches(token, item["tokenSha256"]["S"])


def authenticate(device, token):
    with _lock:
        cached = _registrations.get(device)
    if cached and time.monotonic() - cached[1] < REGISTRATION_CACHE_SECONDS:
        if token_matches(token, cached[0]["tokenSha256"]):
            return cached[0]
    # Eventually consistent first (half the units); a miss or a mismatch may be a registration
    # or rotation of the last second, so it is read consistently before refusing.
    item = _registration_item(device, consistent=False)
    if not _accepts(item, token):
        item = _registration_item(device, consistent=True)
    if _accepts(item, token):
        registration = {k: item[k]["S"] for k in
                        ("deviceId", "userId", "tokenSha256", "deviceName", "deviceType")}
        registration["shard"] = int(item["shard"]["N"]) if "shard" in item else 0
        # The registration's stamp (`reg`) on every event and summary item it writes: its
        # createdAt in epoch ms, as shared::model::entities::event::registration_stamp.
        registration["stamp"] = Timestamp.parse("createdAt", item["createdAt"]["S"]).millis
        # The owner's raw retention for the device's type (PUT /me/retention), never past
        # RETENTION_DAYS: events, type marks and 5-minute blocks expire by it, as in
        # shared::ops::ingest::raw_retention_days.
        registration["rawDays"] = (min(max(int(item["rawRetentionDays"]["N"]), 1), RETENTION_DAYS)
                                   if "rawRetentionDays" in item else RETENTION_DAYS)
        with _lock:
            if len(_registrations) >= CACHE_CAPACITY:
                _registrations.clear()
            _registrations[device] = (registration, time.monotonic())
        return registration
    _forget(device)
    raise device_unauthorized()


def bearer_token(event):
    value = headers_of(event).get("authorization")
    if not value or " " not in value:
        return None
    scheme, _, token = value.partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


EVENT_FIELDS = {"id", "type", "value", "at"}


def validate_batch(body, now):
    if not isinstance(body, dict):
        raise invalid("body", "expected a JSON object")
    unknown = set(body) - {"events", "reported", "acks"}
    if unknown:
        raise invalid("body", f"unknown field `{sorted(unknown)[0]}`, expected one of "
                              "`events`, `reported`, `acks`")
    events = body.get("events")
    if not isinstance(events, list):
        raise invalid("events" if "events" in body else "body",
                      "missing field `events`" if "events" not in body else "expected a sequence")
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            raise invalid(f"events[{i}]", "expected a struct SubmittedEvent")
        unknown = set(e) - EVENT_FIELDS
        if unknown:
            raise invalid(f"events[{i}]", f"unknown field `{sorted(unknown)[0]}`")
        for required in ("type", "value", "at"):
            if required not in e:
                raise invalid(f"events[{i}]", f"missing field `{required}`")
        for name in ("type", "at") + (("id",) if e.get("id") is not None else ()):
            if not isinstance(e[name], str):
                raise invalid(f"events[{i}].{name}", "expected a string")
    if not 1 <= len(events) <= MAX_EVENTS_PER_BATCH:
        raise invalid("events", f"send 1 to {MAX_EVENTS_PER_BATCH} events per request")
    oldest = now.plus_seconds(-RETENTION_DAYS * 86_400)
    newest = now.plus_seconds(MAX_CLOCK_SKEW_SECONDS)
    seen, valid = set(), []
    for i, e in enumerate(events):
        event_type = check_token(f"events[{i}].type", e["type"], 32)
        value = event_value(f"events[{i}].value", e["value"])
        at = Timestamp.parse(f"events[{i}].at", e["at"])
        if newest < at:
            raise invalid(f"events[{i}].at", f"is more than {MAX_CLOCK_SKEW_SECONDS}s in the future")
        if at < oldest:
            raise invalid(f"events[{i}].at",
                          f"is older than the {RETENTION_DAYS}-day retention window")
        if e.get("id") is not None:
            event_id = check_token(f"events[{i}].id", e["id"], 64)
        else:
            event_id = derive_event_id(event_type, value, at)
        if (at, event_id) not in seen:
            seen.add((at, event_id))
            valid.append({"id": event_id, "type": event_type, "value": value, "at": at})
    return valid


def _stored_by(item, registration):
    """Whether an item belongs to `registration`: its stamp, or none (stored before stamps)."""
    return "reg" not in item or int(item["reg"]["N"]) == registration["stamp"]


def event_item(registration, e):
    user, device = registration["userId"], registration["deviceId"]
    at = str(e["at"])
    item = {
        "PK": {"S": f"USER#{user}#DEVICE#{device}"},
        "SK": {"S": f"EVENT#{at}#{e['id']}"},
        "entityType": {"S": "event"},
        "userId": {"S": user},
        "deviceId": {"S": device},
        "id": {"S": e["id"]},
        "type": {"S": e["type"]},
        "value": value_to_attr(e["value"]),
        "at": {"S": at},
        "deviceName": {"S": registration["deviceName"]},
        "deviceType": {"S": registration["deviceType"]},
        "ttl": {"N": str(e["at"].epoch_seconds() + registration["rawDays"] * 86_400)},
        "reg": {"N": str(registration["stamp"])},
    }
    # Only the types operators search are on GSI1, under the device and type; every other
    # event is one item.
    if e["type"] in SEARCHABLE_EVENT_TYPES:
        item["GSI1PK"] = {"S": f"DEVICETYPE#{user}#{device}#{e['type']}"}
        item["GSI1SK"] = {"S": f"{at}#{device}#{e['id']}"}
    return item


TYPE_WINDOW_SECONDS = 3600


def type_mark_item(registration, event_type, window_seconds):
    """The type mark of a searchable type and window (shared::model::items::TypeMarkItem)."""
    user, device = registration["userId"], registration["deviceId"]
    window = Timestamp(window_seconds * 1000)
    shards = SEARCHABLE_EVENT_TYPES[event_type]
    return {
        "PK": {"S": f"USER#{user}#DEVICE#{device}"},
        "SK": {"S": f"TYPEMARK#{event_type}#{window}"},
        "entityType": {"S": "typeMark"},
        "userId": {"S": user},
        "deviceId": {"S": device},
        "type": {"S": event_type},
        "at": {"S": str(window)},
        "deviceName": {"S": registration["deviceName"]},
        "ttl": {"N": str(window_seconds + TYPE_WINDOW_SECONDS
                         + registration["rawDays"] * 86_400)},
        "GSI1PK": {"S": f"TYPE#{event_type}#{window.day()}#{shard_of(f'{user}#{device}', shards)}"},
        "GSI1SK": {"S": f"{window}#{user}#{device}"},
    }


def _retryable(err):
    if isinstance(err, (BotoConnectionError, ReadTimeoutError)):
        return True
    code = err.response.get("Error", {}).get("Code", "")
    status = err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
    return code in THROTTLING or status >= 500


def write_chunk(chunk, deadline):
    """One BatchWriteItem of up to 25 items, retrying UnprocessedItems and throttling until
    `deadline`. Returns the keys (lists of event (at, id)) of the items not written."""
    pending = chunk
    attempt = 0
    while pending:
        attempt += 1
        if attempt > 1:
            if time.monotonic() >= deadline:
                break
            backoff(attempt - 1)
        try:
            out = DYNAMODB.batch_write_item(
                RequestItems={TABLE_NAME: [{"PutRequest": {"Item": item}} for _, item in pending]},
                ReturnConsumedCapacity="TOTAL",
            )
        except (ClientError, BotoConnectionError, ReadTimeoutError) as err:
            if isinstance(err, ClientError) and not _retryable(err):
                raise sdk_error(err) from None
            continue
        unprocessed = {
            (w["PutRequest"]["Item"]["PK"]["S"], w["PutRequest"]["Item"]["SK"]["S"])
            for w in out.get("UnprocessedItems", {}).get(TABLE_NAME, [])
        }
        pending = [(k, item) for k, item in pending
                   if (item["PK"]["S"], item["SK"]["S"]) in unprocessed]
    return [key for key, _ in pending]


# Offline detection (shared::model::offline): the rhythm learned once per SEEN bucket and the
# live state's due entry on GSI3, which moves only when the SEEN bucket does.
DUE_SHARDS = 64
MIN_GRACE_SECONDS = 60
MAX_REPORT_EVERY_SECONDS = 7 * 86_400


def seen_bucket(at, device):
    """The start of `device`'s offset 15-minute bucket holding `at` (shared::keys::seen_bucket)."""
    offset = xxhash.xxh3_64_intdigest(device.encode()) % SEEN_GRANULARITY_SECONDS
    secs = at.epoch_seconds() + offset
    start = Timestamp((secs - secs % SEEN_GRANULARITY_SECONDS - offset) * 1000)
    return min(start, at, key=lambda t: t.millis)


def learned_after(state, gap, ended_offline):
    """(learned, jitter) after a gap between reports (shared::model::offline::Rhythm::learned_after)."""
    mean, jitter = state["learned"], state["jitter"]
    if gap <= 0:
        return mean, jitter
    gap = min(gap, MAX_REPORT_EVERY_SECONDS)
    expected = state["reportEvery"] if state["reportEvery"] is not None else mean
    if ended_offline and expected is not None:
        gap = min(gap, expected * 2)
    if mean is not None:
        j = jitter or 0
        next_mean = max((7 * mean + gap + 4) // 8, 1)
        next_jitter = max((3 * j + abs(gap - mean) + 2) // 4, 0)
    else:
        next_mean, next_jitter = max(gap, 1), gap // 2
    return min(next_mean, MAX_REPORT_EVERY_SECONDS), min(next_jitter, MAX_REPORT_EVERY_SECONDS)


def learn_rhythm(before, after, device):
    """The rhythm after `before` -> `after`, learned only when the SEEN bucket changes."""
    then, now = before["lastSeen"], after["lastSeen"]
    if then is None or now is None or seen_bucket(then, device) == seen_bucket(now, device):
        return before["learned"], before["jitter"]
    return learned_after(before, now.epoch_seconds() - then.epoch_seconds(), before["offline"])


def due_at(state, device):
    """When a watched device is offline (shared::model::items::DeviceStateItem::due_at)."""
    if state["status"] != "active" or state["offline"] or state["lastSeen"] is None:
        return None
    declared = state["reportEvery"]
    expected = declared if declared is not None else state["learned"]
    if expected is None:
        return None
    if state["tight"]:
        # offlineDetection "tight": from the last report itself, a minute's grace; the entry
        # moves with every batch that moves lastSeen (shared::model::offline::due_at).
        return state["lastSeen"].plus_seconds(expected + MIN_GRACE_SECONDS)
    jitter = 0 if declared is not None else (state["jitter"] or 0) * 4
    grace = min(max(MIN_GRACE_SECONDS, expected // 2, jitter), MAX_REPORT_EVERY_SECONDS)
    bucket = seen_bucket(state["lastSeen"], device)
    return bucket.plus_seconds(SEEN_GRANULARITY_SECONDS + expected + grace)


def merged(state, events):
    """The live state with `events` folded in (shared::ops::ingest::merged)."""
    last_seen = state["lastSeen"]
    latest = dict(state["latest"])  # type -> (at millis, value)
    recent = list(state["recent"])  # (at millis, id, type, value), newest first
    for e in events:
        if last_seen is None or last_seen < e["at"]:
            last_seen = e["at"]
        current = latest.get(e["type"])
        if current is None or current[0] < e["at"].millis:
            latest[e["type"]] = (e["at"].millis, e["value"])
        if not any(r[0] == e["at"].millis and r[1] == e["id"] for r in recent):
            recent.append((e["at"].millis, e["id"], e["type"], e["value"]))
    # No type is dropped past MAX_STATE_TYPES (racing batches): its latest reading is its
    # readings' newness to the summaries (issue 38).
    recent.sort(key=lambda r: (r[0], r[1]), reverse=True)
    nxt = {**state, "lastSeen": last_seen, "latest": latest, "recent": recent[:RECENT_EVENTS]}
    nxt["learned"], nxt["jitter"] = learn_rhythm(state, nxt, state["deviceId"])
    return nxt


def same_state(a, b):
    return (a["lastSeen"] == b["lastSeen"] and a["latest"] == b["latest"]
            and a["recent"] == b["recent"])


def state_from_item(item):
    """A live state item's fields; its readings from the compact `readings` attribute, or from
    the lists of a state written before it (shared::items::DeviceStateItem::from_item)."""
    if "readings" in item:
        latest, recent = decode_readings(item["readings"]["B"])
    else:
        latest = {t: (int(r["L"][0]["N"]), value_from_attr(r["L"][1]))
                  for t, r in item.get("latest", {}).get("M", {}).items()}
        recent = [(int(r["L"][0]["N"]), r["L"][1]["S"], r["L"][2]["S"],
                   value_from_attr(r["L"][3]))
                  for r in item.get("recent", {}).get("L", [])]
    number = lambda name: int(item[name]["N"]) if name in item and "N" in item[name] else None
    due_key = item.get("GSI3SK", {}).get("S")
    return {
        "deviceId": item.get("SK", {}).get("S", "DEVICE##STATE")[len("DEVICE#"):-len("#STATE")],
        "status": item.get("status", {}).get("S", "active"),
        "offline": "offline" in item.get("alarms", {}).get("M", {}),
        "reportEvery": number("reportEverySeconds"),
        "tight": item.get("offlineDetection", {}).get("S") == "tight",
        "learned": number("learnedEverySeconds"),
        "jitter": number("learnedJitterSeconds"),
        "indexedDue": Timestamp.parse("GSI3SK", due_key.split("#")[0]) if due_key else None,
        "ingestSeq": int(item["ingestSeq"]["N"]) if "ingestSeq" in item else 0,
        "lastSeen": Timestamp.parse("lastSeen", item["lastSeen"]["S"]) if "lastSeen" in item else None,
        "latest": latest,
        "recent": recent,
        "series": decode_series(item["series"]["B"]) if "series" in item else {},
        # The item as stored, for its size (a flush when it would pass one write unit); the
        # seeding's timestamps are not fields of the Rust state.
        "item": {k: v for k, v in item.items() if k not in ("createdAt", "updatedAt")},
    }


# The live state's readings in their stored form (shared::readings): postcard's encoding of
# enum StoredForm { V1 { newest: i64, types: Vec<String>,
#   latest: Vec<(u32, i64, CompactValue)>, recent: Vec<(u32, i64, CompactValue, Option<String>)> } }
# with times as `newest - at`, and enum CompactValue { Flag(bool), Whole(i64), Single(f32),
# Double(f64), Text(String) }: varints (LEB128), i64 zigzag, floats little-endian.

_EXACT_WHOLE = 2.0 ** 53


def _varint(n, out):
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return


def _zigzag(n, out):
    _varint(n * 2 if n >= 0 else -n * 2 - 1, out)


def _text(t, out):
    raw = t.encode()
    _varint(len(raw), out)
    out.extend(raw)


def _compact_value(value, out):
    kind, v = value
    if kind == "b":
        out.append(0)
        out.append(1 if v else 0)
    elif kind == "s":
        out.append(4)
        _text(v, out)
    elif v.is_integer() and abs(v) < _EXACT_WHOLE and not (v == 0 and math.copysign(1, v) < 0):
        out.append(1)
        _zigzag(int(v), out)
    else:
        try:
            single = struct.pack("<f", v)
        except OverflowError:
            single = None
        if single is not None and struct.pack("<d", struct.unpack("<f", single)[0]) == struct.pack("<d", v):
            out.append(2)
            out.extend(single)
        else:
            out.append(3)
            out.extend(struct.pack("<d", v))


def encode_readings(latest, recent):
    """`latest` (type -> (at millis, value)) and `recent` ((at millis, id, type, value), newest
    first) as the bytes of the `readings` attribute; a derived event id is left out."""
    newest = max([r[0] for r in latest.values()] + [r[0] for r in recent], default=0)
    types = []

    def position(t):
        if t not in types:
            types.append(t)
        return types.index(t)

    rows_latest = [(position(t), newest - r[0], r[1]) for t, r in sorted(latest.items())]
    rows_recent = [(position(r[2]), newest - r[0], r[3],
                    None if derive_event_id(r[2], r[3], Timestamp(r[0])) == r[1] else r[1])
                   for r in recent]
    out = bytearray([0])  # StoredForm::V1
    _zigzag(newest, out)
    _varint(len(types), out)
    for t in types:
        _text(t, out)
    _varint(len(rows_latest), out)
    for position_, delta, value in rows_latest:
        _varint(position_, out)
        _zigzag(delta, out)
        _compact_value(value, out)
    _varint(len(rows_recent), out)
    for position_, delta, value, event_id in rows_recent:
        _varint(position_, out)
        _zigzag(delta, out)
        _compact_value(value, out)
        if event_id is None:
            out.append(0)
        else:
            out.append(1)
            _text(event_id, out)
    return bytes(out)


def decode_readings(raw):
    """The (latest, recent) the bytes of a `readings` attribute hold."""
    pos = 0

    def byte():
        nonlocal pos
        if pos >= len(raw):
            raise ValueError("live readings end early")
        pos += 1
        return raw[pos - 1]

    def varint():
        n, shift = 0, 0
        while True:
            b = byte()
            n |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return n

    def zigzag():
        n = varint()
        return (n >> 1) ^ -(n & 1)

    def text():
        nonlocal pos
        length = varint()
        if pos + length > len(raw):
            raise ValueError("live readings end early")
        pos += length
        return raw[pos - length:pos].decode()

    def compact_value():
        nonlocal pos
        kind = varint()
        if kind == 0:
            return ("b", byte() == 1)
        if kind == 1:
            return ("n", float(zigzag()))
        if kind in (2, 3):
            size, fmt = (4, "<f") if kind == 2 else (8, "<d")
            if pos + size > len(raw):
                raise ValueError("live readings end early")
            pos += size
            return ("n", struct.unpack(fmt, raw[pos - size:pos])[0])
        if kind == 4:
            return ("s", text())
        raise ValueError(f"unknown value kind {kind}")

    if varint() != 0:
        raise ValueError("unknown live readings form")
    newest = zigzag()
    types = [text() for _ in range(varint())]
    latest = {}
    for _ in range(varint()):
        t, at, value = types[varint()], newest - zigzag(), compact_value()
        latest[t] = (at, value)
    recent = []
    for _ in range(varint()):
        t, at, value = types[varint()], newest - zigzag(), compact_value()
        event_id = text() if byte() == 1 else derive_event_id(t, value, Timestamp(at))
        recent.append((at, event_id, t, value))
    return latest, recent


def seen_key(at, device):
    """SEEN#{bucket start}#{device}: 15-minute buckets offset per device (shared::keys::seen_bucket)."""
    offset = xxhash.xxh3_64_intdigest(device.encode()) % SEEN_GRANULARITY_SECONDS
    secs = at.epoch_seconds() + offset
    start = Timestamp((secs - secs % SEEN_GRANULARITY_SECONDS - offset) * 1000)
    return f"SEEN#{min(start, at, key=lambda t: t.millis)}#{device}"


def live_state(registration):
    """The device's live state: the cached one, or a consistent read (a miss reads, it never
    fails a conditional write). A device without one is gone: 401."""
    device = registration["deviceId"]
    with _lock:
        cached = _states.get(device)
    if cached is not None:
        return cached
    try:
        out = DYNAMODB.get_item(
            TableName=TABLE_NAME,
            Key=state_key(registration["userId"], registration["shard"], device),
            ConsistentRead=True, ReturnConsumedCapacity="TOTAL")
    except (ClientError, BotoConnectionError, ReadTimeoutError) as err:
        raise sdk_error(err) from None
    if "Item" not in out:
        _forget(device)
        raise device_unauthorized()
    state = state_from_item(out["Item"])
    _remember(device, state)
    return state


def _remember(device, state):
    with _lock:
        if len(_states) >= CACHE_CAPACITY:
            _states.clear()
        _states[device] = state


def check_type_cap(state, events):
    types = set(state["latest"])
    for i, e in enumerate(events):
        known = e["type"] in types
        types.add(e["type"])
        if not known and len(types) > MAX_STATE_TYPES:
            raise invalid(f"events[{i}].type",
                          f"a device reports at most {MAX_STATE_TYPES} event types; this one "
                          f"already has {', '.join(sorted(state['latest']))}")


# ---------------------------------------------------------------------------------------------
# Summaries per 5 minutes, hour and day (issue 32; shared::model::series and
# shared::ops::ingest::series). A bucket is [count, numeric, min, max, exact-sum partials]; the
# partials are Shewchuk's, added in the order Rust adds them (Python's msum recipe), so the
# stored bytes are the same. Buckets of one resolution: {start millis: bucket}. A type's open
# summaries: {"flushed", "rolled", "open": buckets, "trail": {hour start: average}}.

FIVE_MINUTES_MS = 5 * 60 * 1000
HOUR_MS = 60 * 60 * 1000
DAY_MS = 24 * HOUR_MS
BLOCK_MS = 2 * HOUR_MS
TRAIL_HOURS = 24
RESOLUTION_NAMES = {FIVE_MINUTES_MS: "5m", HOUR_MS: "1h", DAY_MS: "1d"}
HOURLY_RETENTION_DAYS = _number("HOURLY_RETENTION_DAYS", 400, 1, 36_500)
DAILY_RETENTION_DAYS = _number("DAILY_RETENTION_DAYS", 1826, 1, 36_500)
# The state size past which the closed 5-minute buckets are written out: one write unit.
STATE_FLUSH_BYTES = 1024
MAX_TRANSACTION_ACTIONS = 100


def bucket_start(millis, step):
    return millis // step * step


def month_start(millis):
    d = (EPOCH + dt.timedelta(milliseconds=millis)).date().replace(day=1)
    return int((dt.datetime(d.year, d.month, 1, tzinfo=dt.timezone.utc) - EPOCH).total_seconds()) * 1000


def exact_add(partials, value):
    """Adds `value` to the partials, kept canonical (shared::model::series::ExactSum::add)."""
    _grow(partials, value)
    _canonicalize(partials)


def _canonicalize(partials):
    """The greedy expansion of the partials' exact sum, smallest first
    (ExactSum::canonicalize): equal sums are stored alike whatever their order."""
    if not partials:
        return
    rest, out = list(partials), []
    while True:
        s = exact_value(rest)
        out.append(s)
        if s == 0.0 or not math.isfinite(s):
            break
        _grow(rest, -s)
        if all(p == 0.0 for p in rest):
            break
    out.reverse()
    partials[:] = out


def _grow(partials, value):
    """Shewchuk's grow-expansion (ExactSum::grow)."""
    x, kept = value, 0
    for i in range(len(partials)):
        y = partials[i]
        if abs(x) < abs(y):
            x, y = y, x
        hi = x + y
        lo = y - (hi - x)
        if lo != 0.0:
            partials[kept] = lo
            kept += 1
        x = hi
    del partials[kept:]
    partials.append(x)


def exact_value(p):
    """The partials' exact sum rounded once, as math.fsum."""
    if not p:
        return 0.0
    n = len(p) - 1
    hi, lo = p[n], 0.0
    while n > 0:
        x = hi
        n -= 1
        y = p[n]
        hi = x + y
        lo = y - (hi - x)
        if lo != 0.0:
            break
    if n > 0 and ((lo < 0.0 and p[n - 1] < 0.0) or (lo > 0.0 and p[n - 1] > 0.0)):
        y = lo * 2.0
        x = hi + y
        if y == x - hi:
            hi = x
    return hi


def new_bucket():
    return {"count": 0, "numeric": 0, "min": 0.0, "max": 0.0, "sum": []}


def copy_buckets(buckets):
    return {s: {**b, "sum": list(b["sum"])} for s, b in buckets.items()}


def bucket_record(b, value):
    b["count"] += 1
    if value[0] != "n":
        return
    v = value[1]
    if b["numeric"] == 0:
        b["min"] = b["max"] = v
    else:
        b["min"] = v if v < b["min"] else b["min"]
        b["max"] = v if v > b["max"] else b["max"]
    b["numeric"] += 1
    exact_add(b["sum"], v)


def bucket_merge(b, o):
    if o["numeric"] > 0:
        if b["numeric"] == 0:
            b["min"], b["max"] = o["min"], o["max"]
        else:
            b["min"] = o["min"] if o["min"] < b["min"] else b["min"]
            b["max"] = o["max"] if o["max"] > b["max"] else b["max"]
    b["count"] += o["count"]
    b["numeric"] += o["numeric"]
    for p in list(o["sum"]):
        exact_add(b["sum"], p)


def buckets_add(buckets, start, bucket):
    bucket_merge(buckets.setdefault(start, new_bucket()), bucket)


def coarsen(buckets, step):
    coarse = {}
    for start in sorted(buckets):
        buckets_add(coarse, bucket_start(start, step), buckets[start])
    return coarse


def five_minute_buckets(readings):
    buckets = {}
    for at, value in readings:
        bucket_record(buckets.setdefault(bucket_start(at, FIVE_MINUTES_MS), new_bucket()), value)
    return buckets


# Stored forms (postcard): enum StoredBuckets { V1 { step: i64, first: i64,
# buckets: Vec<(u64, StoredForm)> } }, enum StoredForm { One(CompactNumber), Many { count: u64,
# numeric: Option<u64>, numbers: Option<(CompactNumber, CompactNumber, Vec<CompactNumber>)> } },
# enum CompactNumber { Whole(i64), Single(f32), Double(f64) }.

def _single(v):
    """`v` as the bytes of an f32 that gives `v` back, or None."""
    try:
        single = struct.pack("<f", v)
    except OverflowError:
        return None
    return single if struct.pack("<d", struct.unpack("<f", single)[0]) == struct.pack("<d", v) else None


def _compact_number(v, out):
    if v.is_integer() and abs(v) < _EXACT_WHOLE and not (v == 0 and math.copysign(1, v) < 0):
        out.append(0)
        _zigzag(int(v), out)
        return
    single = _single(v)
    if single is not None:
        out.append(1)
        out.extend(single)
    else:
        out.append(2)
        out.extend(struct.pack("<d", v))


def _stored_bucket(b, out):
    if b["count"] == 1 and b["numeric"] == 1:
        out.append(0)
        _compact_number(b["min"], out)
        return
    out.append(1)
    _varint(b["count"], out)
    if b["numeric"] != b["count"]:
        out.append(1)
        _varint(b["numeric"], out)
    else:
        out.append(0)
    if b["numeric"] > 0:
        out.append(1)
        _compact_number(b["min"], out)
        _compact_number(b["max"], out)
        _varint(len(b["sum"]), out)
        for p in b["sum"]:
            _compact_number(p, out)
    else:
        out.append(0)


def encode_buckets(buckets, step):
    """shared::model::series::Buckets::encode."""
    starts = sorted(buckets)
    first = starts[0] if starts else 0
    out = bytearray([0])
    _zigzag(step, out)
    _zigzag(first, out)
    _varint(len(starts), out)
    previous = first
    for start in starts:
        _varint((start - previous) // step, out)
        previous = start
        _stored_bucket(buckets[start], out)
    return bytes(out)


class _Reader:
    def __init__(self, raw):
        self.raw, self.pos = raw, 0

    def byte(self):
        if self.pos >= len(self.raw):
            raise ValueError("summary ends early")
        self.pos += 1
        return self.raw[self.pos - 1]

    def take(self, n):
        if self.pos + n > len(self.raw):
            raise ValueError("summary ends early")
        self.pos += n
        return self.raw[self.pos - n:self.pos]

    def varint(self):
        n, shift = 0, 0
        while True:
            b = self.byte()
            n |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return n

    def zigzag(self):
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def number(self):
        kind = self.varint()
        if kind == 0:
            return float(self.zigzag())
        if kind == 1:
            return struct.unpack("<f", self.take(4))[0]
        if kind == 2:
            return struct.unpack("<d", self.take(8))[0]
        raise ValueError(f"unknown number kind {kind}")


def decode_buckets(raw):
    r = _Reader(raw)
    if r.varint() != 0:
        raise ValueError("unknown summary form")
    step, start = r.zigzag(), r.zigzag()
    buckets = {}
    for _ in range(r.varint()):
        start += r.varint() * step
        if r.varint() == 0:
            b = new_bucket()
            bucket_record(b, ("n", r.number()))
        else:
            count = r.varint()
            numeric = r.varint() if r.byte() == 1 else count
            b = {**new_bucket(), "count": count, "numeric": numeric}
            if r.byte() == 1:
                b["min"], b["max"] = r.number(), r.number()
                b["sum"] = [r.number() for _ in range(r.varint())]
        buckets[start] = b
    return buckets


def _f32(v):
    try:
        return struct.unpack("<f", struct.pack("<f", v))[0]
    except OverflowError:
        return math.copysign(math.inf, v)


def _round_half_away(x):
    whole = math.floor(x)
    return whole + 1 if x - whole >= 0.5 else whole


def _stored_trail(trail, out):
    """Option<StoredTrail { first_hour: i64, lo: f32, hi: f32, points: Vec<u8> }>."""
    if not trail:
        out.append(0)
        return
    first, last = min(trail), max(trail)
    lo, hi = _f32(min(trail.values())), _f32(max(trail.values()))
    spread = hi - lo
    points = bytearray((last - first) // HOUR_MS + 1)
    for start, avg in trail.items():
        q = 0
        if spread > 0.0:
            q = int(min(max(_round_half_away((avg - lo) / spread * 254.0), 0), 254))
        points[(start - first) // HOUR_MS] = q + 1
    out.append(1)
    _zigzag(first // HOUR_MS, out)
    out.extend(struct.pack("<f", lo))
    out.extend(struct.pack("<f", hi))
    _varint(len(points), out)
    out.extend(points)


def trail_update(trail, hours):
    for start in sorted(hours):
        b = hours[start]
        if b["numeric"] > 0:
            trail[start] = exact_value(b["sum"]) / b["numeric"]
        else:
            trail.pop(start, None)
    if trail:
        cut = max(trail) - (TRAIL_HOURS - 1) * HOUR_MS
        for start in [s for s in trail if s < cut]:
            del trail[start]


def encode_series(series):
    """shared::model::series::SeriesState::encode: enum { V1(..), V2(Vec<(StoredOpenSeries {
    event_type, flushed_before_five_minutes: i64 (ms / 300,000), rolled_days_back: u32,
    open: Vec<u8>, trail }, ids: Vec<u8>)>) }, the ids `encode_ids` from `flushed`."""
    out = bytearray([1])
    _varint(len(series), out)
    for event_type in sorted(series):
        s = series[event_type]
        _text(event_type, out)
        _zigzag(s["flushed"] // FIVE_MINUTES_MS, out)
        _varint(max(0, (bucket_start(s["flushed"], DAY_MS) - s["rolled"]) // DAY_MS), out)
        open_bytes = encode_buckets(s["open"], FIVE_MINUTES_MS) if s["open"] else b""
        _varint(len(open_bytes), out)
        out.extend(open_bytes)
        _stored_trail(s["trail"], out)
        id_bytes = encode_ids(s["ids"], s["flushed"]) if any(s["ids"].values()) else b""
        _varint(len(id_bytes), out)
        out.extend(id_bytes)
        out.append(1 if s["firstBlockWritten"] else 0)
    return bytes(out)


def decode_series(raw):
    r = _Reader(raw)
    form = r.varint()
    if form not in (0, 1):
        raise ValueError("unknown open series form")
    series = {}
    for _ in range(r.varint()):
        event_type = r.take(r.varint()).decode()
        flushed = r.zigzag() * FIVE_MINUTES_MS
        back = r.varint()
        open_bytes = r.take(r.varint())
        trail = {}
        if r.byte() == 1:
            first_hour = r.zigzag()
            lo = struct.unpack("<f", r.take(4))[0]
            hi = struct.unpack("<f", r.take(4))[0]
            spread = hi - lo
            for i, q in enumerate(r.take(r.varint())):
                if q > 0:
                    trail[(first_hour + i) * HOUR_MS] = lo + (q - 1) / 254.0 * spread
        id_bytes = bytes(r.take(r.varint())) if form == 1 else b""
        first_block_written = r.byte() == 1 if form == 1 else True
        series[event_type] = {
            "firstBlockWritten": first_block_written,
            "ids": decode_ids(id_bytes, flushed) if id_bytes else {},
            "flushed": flushed,
            "rolled": bucket_start(flushed, DAY_MS) - back * DAY_MS,
            "open": decode_buckets(bytes(open_bytes)) if open_bytes else {},
            "trail": trail,
        }
    return series


def reading_id(at, event_id):
    """shared::model::series::reading_id: (bucket start, offset << 16 | low 16 bits of the
    event id's xxh3)."""
    bucket = bucket_start(at, FIVE_MINUTES_MS)
    return bucket, (at - bucket) << 16 | (xxhash.xxh3_64_intdigest(event_id.encode()) & 0xFFFF)


def ids_insert(ids, at, event_id):
    """Adds a reading's identity; False when its bucket holds it already."""
    bucket, rid = reading_id(at, event_id)
    held = ids.setdefault(bucket, set())
    if rid in held:
        return False
    held.add(rid)
    return True


def ids_contains(ids, at, event_id):
    bucket, rid = reading_id(at, event_id)
    return rid in ids.get(bucket, ())


def encode_ids(ids, origin):
    """shared::model::series::BucketIds::encode: the number of sets, then per set its
    5-minute period after `origin`, its size and per reading the offset step (whole seconds
    as seconds << 1, else ms << 1 | 1) and the 16-bit tag as 2 bytes little-endian."""
    out = bytearray()
    kept = [(start, sorted(held)) for start, held in sorted(ids.items()) if held]
    _varint(len(kept), out)
    for start, held in kept:
        _varint((start - origin) // FIVE_MINUTES_MS, out)
        _varint(len(held), out)
        previous = 0
        for rid in held:
            offset = rid >> 16
            step = offset - previous
            previous = offset
            _varint(step // 1000 << 1 if step % 1000 == 0 else step << 1 | 1, out)
            out += (rid & 0xFFFF).to_bytes(2, "little")
    return bytes(out)


def decode_ids(raw, origin):
    r = _Reader(raw)
    ids = {}
    for _ in range(r.varint()):
        start = origin + r.varint() * FIVE_MINUTES_MS
        offset, held = 0, set()
        for _ in range(r.varint()):
            step = r.varint()
            offset += (step >> 1) * 1000 if step & 1 == 0 else step >> 1
            tag = int.from_bytes(r.take(2), "little")
            held.add(offset << 16 | tag)
        ids[start] = held
    return ids


def copy_ids(ids):
    return {k: set(v) for k, v in ids.items()}


def copy_series(series):
    return {t: {**s, "open": copy_buckets(s["open"]), "ids": copy_ids(s["ids"]),
                "trail": dict(s["trail"])}
            for t, s in series.items()}


def starting_at(at):
    """Opens at the 5-minute bucket of the type's first counted reading."""
    bucket = bucket_start(at, FIVE_MINUTES_MS)
    return {"flushed": bucket, "rolled": bucket_start(bucket, DAY_MS), "open": {}, "ids": {},
            "firstBlockWritten": False, "trail": {}}


def take_closed(s, before):
    """The open buckets before `before` (aligned down to 5 minutes) and their reading
    identities, taken out: an hour may be split, its first buckets in a block, the rest open."""
    before = max(bucket_start(before, FIVE_MINUTES_MS), s["flushed"])
    closed = {k: v for k, v in s["open"].items() if k < before}
    s["open"] = {k: v for k, v in s["open"].items() if k >= before}
    ids = {k: v for k, v in s["ids"].items() if k < before}
    s["ids"] = {k: v for k, v in s["ids"].items() if k >= before}
    s["flushed"] = before
    return closed, ids


def update_trail(s, stored):
    """OpenSeries::update_trail: `stored` holds the flushed hours' 5-minute buckets as their
    blocks now hold them; the open buckets of those hours are added, so a split hour averages
    all of its readings, never the flushed part alone."""
    hours = coarsen(stored, HOUR_MS)
    for hour in sorted(hours):
        for start in sorted(k for k in s["open"] if hour <= k < hour + HOUR_MS):
            buckets_add(hours, bucket_start(start, HOUR_MS), s["open"][start])
    trail_update(s["trail"], hours)


def take_days_to_roll(s):
    until = bucket_start(s["flushed"], DAY_MS)
    days = list(range(s["rolled"], until, DAY_MS))
    s["rolled"] = max(until, s["rolled"])
    return days


def _replace(buckets, start, exact):
    if exact["count"] == 0:
        buckets.pop(start, None)
    else:
        buckets[start] = exact


def item_bytes(item):
    """DynamoDB's size of an item (shared::ops::ingest::item_bytes)."""
    def size(v):
        if "S" in v:
            return len(v["S"].encode())
        if "B" in v:
            return len(v["B"])
        if "N" in v:
            return (len(v["N"].lstrip("-").replace(".", "")) + 1) // 2 + 1
        if "BOOL" in v or "NULL" in v:
            return 1
        if "L" in v:
            return 3 + sum(1 + size(x) for x in v["L"])
        if "M" in v:
            return 3 + sum(1 + len(k) + size(x) for k, x in v["M"].items())
        return 0
    return sum(len(k) + size(v) for k, v in item.items())


def open_types(series, events):
    """A type the state has no summaries of opens at its earliest reading of the batch."""
    firsts = {}
    for e in events:
        at = e["at"].millis
        firsts[e["type"]] = min(firsts.get(e["type"], at), at)
    for event_type in sorted(firsts):
        series.setdefault(event_type, starting_at(firsts[event_type]))


def _empty_stored():
    return {"buckets": {}, "ids": {}}


def _copy_stored(st):
    return {"buckets": copy_buckets(st["buckets"]), "ids": copy_ids(st["ids"])}


class SeriesItems:
    """The summary items an attempt reads and rewrites: {(type, step, start): [loaded, now]},
    each {"buckets", "ids"} (loaded None: no item)."""

    def __init__(self, registration):
        self.registration = registration
        self.items = {}

    def copy(self):
        other = SeriesItems(self.registration)
        other.items = {k: [l, _copy_stored(n)] for k, (l, n) in self.items.items()}
        return other

    def _pk(self):
        return f"USER#{self.registration['userId']}#DEVICE#{self.registration['deviceId']}"

    def _key(self, event_type, step, start):
        return {"PK": {"S": self._pk()},
                "SK": {"S": f"SERIES#{event_type}#{RESOLUTION_NAMES[step]}#{Timestamp(start)}"}}

    def loaded(self, key, found):
        if key not in self.items:
            self.items[key] = [found, _copy_stored(found) if found else _empty_stored()]

    def load_keys(self, wanted):
        """The items `wanted` not loaded yet: one consistent BatchGetItem per 100 keys."""
        missing = [k for k in sorted(wanted) if k not in self.items]
        for i in range(0, len(missing), 100):
            chunk = missing[i:i + 100]
            keys = [self._key(*k) for k in chunk]
            found = {}
            while keys:
                try:
                    got = DYNAMODB.batch_get_item(
                        RequestItems={TABLE_NAME: {"Keys": keys, "ConsistentRead": True}},
                        ReturnConsumedCapacity="TOTAL")
                except (ClientError, BotoConnectionError, ReadTimeoutError) as err:
                    raise sdk_error(err) from None
                for item in got.get("Responses", {}).get(TABLE_NAME, []):
                    # Another registration's item under the same id (a deleted device's) is absent.
                    if item.get("entityType", {}).get("S") != "series" \
                            or not _stored_by(item, self.registration):
                        continue
                    found[item["SK"]["S"]] = item
                keys = got.get("UnprocessedKeys", {}).get(TABLE_NAME, {}).get("Keys", [])
            for k in chunk:
                item = found.get(self._key(*k)["SK"]["S"])
                stored = None
                if item is not None:
                    start = k[2]
                    stored = {"buckets": decode_buckets(item["buckets"]["B"]),
                              "ids": decode_ids(item["ids"]["B"], start) if "ids" in item else {}}
                self.loaded(k, stored)

    def item(self, event_type, step, start):
        key = (event_type, step, start)
        if key not in self.items:
            self.load_keys({key})
        return self.items[key][1]

    def changed_keys(self):
        return [k for k, (loaded, now) in sorted(self.items.items())
                if loaded != now and not (loaded is None and not now["buckets"])]

    def ttl(self, step, start):
        # Blocks are kept for the window readings are accepted in (RETENTION_DAYS), never a
        # type's shorter rawDays: their reading identities must outlive any late reading.
        if step == FIVE_MINUTES_MS:
            end, days = start + BLOCK_MS, RETENTION_DAYS
        elif step == HOUR_MS:
            end, days = start + DAY_MS, HOURLY_RETENTION_DAYS
        else:
            end, days = month_start(start + 32 * DAY_MS), DAILY_RETENTION_DAYS
        return end // 1000 + days * 86_400

    def actions(self):
        actions = []
        for key in self.changed_keys():
            event_type, step, start = key
            now = self.items[key][1]
            item_key = self._key(event_type, step, start)
            if not now["buckets"]:
                actions.append({"Delete": {"TableName": TABLE_NAME, "Key": item_key}})
                continue
            item = {
                **item_key,
                "entityType": {"S": "series"},
                "ttl": {"N": str(self.ttl(step, start))},
                "reg": {"N": str(self.registration["stamp"])},
                "buckets": {"B": encode_buckets(now["buckets"], step)},
            }
            if now["ids"]:
                item["ids"] = {"B": encode_ids(now["ids"], start)}
            actions.append({"Put": {"TableName": TABLE_NAME, "Item": item}})
        return actions

    def count(self, series, events, room):
        """SeriesStore::count: each stored reading once, into its open bucket (the state's
        identities decide) or its block (the block's decide), and for a rolled day additively
        into the day's hour and the month's day; at most `room` items change. False when
        readings were left for another round."""
        open_types(series, events)
        wanted = set()
        for e in events:
            at, s = e["at"].millis, series[e["type"]]
            if at >= s["flushed"]:
                continue
            wanted.add((e["type"], FIVE_MINUTES_MS, bucket_start(at, BLOCK_MS)))
            day = bucket_start(at, DAY_MS)
            if day < s["rolled"]:
                wanted.add((e["type"], HOUR_MS, day))
                wanted.add((e["type"], DAY_MS, month_start(day)))
        self.load_keys(wanted)
        touched, complete = set(), True
        for e in events:
            event_type, at, event_id = e["type"], e["at"].millis, e["id"]
            s = series[event_type]
            if at >= s["flushed"]:
                if ids_insert(s["ids"], at, event_id):
                    bucket_record(s["open"].setdefault(bucket_start(at, FIVE_MINUTES_MS), new_bucket()),
                                  e["value"])
                continue
            block_key = (event_type, FIVE_MINUTES_MS, bucket_start(at, BLOCK_MS))
            if ids_contains(self.item(*block_key)["ids"], at, event_id):
                continue
            day = bucket_start(at, DAY_MS)
            keys = [block_key]
            if day < s["rolled"]:
                keys += [(event_type, HOUR_MS, day), (event_type, DAY_MS, month_start(day))]
            if len(touched) + len([k for k in keys if k not in touched]) > room:
                complete = False
                continue
            touched.update(keys)
            if block_key[2] == bucket_start(s["flushed"], BLOCK_MS):
                s["firstBlockWritten"] = True
            block = self.item(*block_key)
            ids_insert(block["ids"], at, event_id)
            bucket_record(block["buckets"].setdefault(bucket_start(at, FIVE_MINUTES_MS), new_bucket()),
                          e["value"])
            if day < s["rolled"]:
                hours = self.item(event_type, HOUR_MS, day)["buckets"]
                bucket_record(hours.setdefault(bucket_start(at, HOUR_MS), new_bucket()), e["value"])
                days = self.item(event_type, DAY_MS, month_start(day))["buckets"]
                bucket_record(days.setdefault(day, new_bucket()), e["value"])
        return complete

    def flush(self, series, latest):
        # Every bucket before the device's newest 5-minute bucket goes, whatever its type (as
        # the Rust ingest's flush).
        device_newest = max((r[0] for r in latest.values()), default=None)
        for event_type in sorted(series):
            s = series[event_type]
            if event_type not in latest:
                continue
            current = bucket_start(max(latest[event_type][0], device_newest), FIVE_MINUTES_MS)
            if not any(k < current for k in s["open"]):
                continue
            # Blocks after the one `flushed` falls in hold nothing yet (only a flush writes
            # past it): not read.
            first_block = bucket_start(s["flushed"], BLOCK_MS)
            first_written = s["firstBlockWritten"]
            closed, ids = take_closed(s, current)
            blocks = set()
            for start in closed:
                key = (event_type, FIVE_MINUTES_MS, bucket_start(start, BLOCK_MS))
                if key[2] > first_block or not first_written:
                    self.loaded(key, None)
                else:
                    blocks.add(key)
            self.load_keys(blocks)
            now_first = bucket_start(s["flushed"], BLOCK_MS)
            s["firstBlockWritten"] = (now_first == first_block and first_written) or any(
                bucket_start(k, BLOCK_MS) == now_first for k in closed)
            hours = set()
            for start in sorted(closed):
                block = self.item(event_type, FIVE_MINUTES_MS, bucket_start(start, BLOCK_MS))
                block["buckets"][start] = closed[start]
                if start in ids:
                    block["ids"][start] = ids[start]
                hours.add(bucket_start(start, HOUR_MS))
            # The trail from the merged blocks (an hour lies in one block) and the open buckets.
            stored = {}
            for hour in sorted(hours):
                block = self.item(event_type, FIVE_MINUTES_MS, bucket_start(hour, BLOCK_MS))["buckets"]
                for start in sorted(k for k in block if hour <= k < hour + HOUR_MS):
                    buckets_add(stored, start, block[start])
            update_trail(s, stored)
            days = take_days_to_roll(s)
            if not days:
                continue
            keys = set()
            for day in days:
                keys.add((event_type, HOUR_MS, day))
                keys.add((event_type, DAY_MS, month_start(day)))
                for block in range(day, day + DAY_MS, BLOCK_MS):
                    keys.add((event_type, FIVE_MINUTES_MS, block))
            self.load_keys(keys)
            for day in days:
                hours = {}
                for key in sorted(self.items):
                    t, step, start = key
                    if t == event_type and step == FIVE_MINUTES_MS and day <= start < day + DAY_MS:
                        blocks = self.items[key][1]["buckets"]
                        for s5 in sorted(blocks):
                            buckets_add(hours, bucket_start(s5, HOUR_MS), blocks[s5])
                if not hours:
                    continue
                total = coarsen(hours, DAY_MS).get(day) or new_bucket()
                self.item(event_type, HOUR_MS, day)
                self.items[(event_type, HOUR_MS, day)][1]["buckets"] = hours
                _replace(self.item(event_type, DAY_MS, month_start(day))["buckets"], day, total)


def _transact_state(key, expression, values, actions):
    """The state update with `actions` in one transaction, conditioned on ingestSeq: True when
    committed; the current state item when the condition failed ({} when it is gone); None
    when the transaction should be tried again."""
    try:
        DYNAMODB.transact_write_items(TransactItems=[{"Update": {
            "TableName": TABLE_NAME,
            "Key": key,
            "UpdateExpression": expression,
            "ConditionExpression": "attribute_exists(PK) AND ingestSeq = :seq",
            "ExpressionAttributeValues": values,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }}] + actions, ReturnConsumedCapacity="TOTAL")
    except ClientError as err:
        reasons = err.response.get("CancellationReasons") or [{}]
        if reasons[0].get("Code") == "ConditionalCheckFailed":
            return reasons[0].get("Item") or {}
        if err.response.get("Error", {}).get("Code") != "TransactionCanceledException" \
                and not _retryable(err):
            raise sdk_error(err) from None
        return None
    except (BotoConnectionError, ReadTimeoutError):
        return None
    return True


def summarise(registration, base, nxt, events, state_item, room):
    """The summaries' part of an attempt (shared::ops::ingest::Ingestor::summarise): the
    stored readings counted once each, and the closed 5-minute buckets flushed when the state
    item (`state_item` with the new series) would be over one write unit. Returns the series,
    the items and whether every reading was counted (else another round counts the rest)."""
    series = copy_series(base["series"])
    items = SeriesItems(registration)
    complete = items.count(series, events, room)
    sized = dict(state_item)
    sized.pop("series", None)
    if series:
        sized["series"] = {"B": encode_series(series)}
    if complete and item_bytes(sized) > STATE_FLUSH_BYTES:
        flushed, flushed_items = copy_series(series), items.copy()
        flushed_items.flush(flushed, nxt["latest"])
        if 1 + len(flushed_items.changed_keys()) <= MAX_TRANSACTION_ACTIONS:
            series, items = flushed, flushed_items
    return series, items, complete


def update_state(registration, base, events, deadline):
    device = registration["deviceId"]
    attempt = 0
    while attempt < STATE_ATTEMPTS:
        attempt += 1
        if attempt > 1:
            if time.monotonic() >= deadline:
                break
            backoff(attempt - 1)
        nxt = merged(base, events)
        next_seq = base["ingestSeq"] + 1
        sets = ["lastSeen = :lastSeen", "readings = :readings", "ingestSeq = :nextSeq"]
        values = {
            ":lastSeen": {"S": str(nxt["lastSeen"])},
            ":readings": {"B": encode_readings(nxt["latest"], nxt["recent"])},
            ":nextSeq": {"N": str(next_seq)},
            ":seq": {"N": str(base["ingestSeq"])},
        }
        # The index entry moves only when the device's own SEEN bucket does.
        new_key = seen_key(nxt["lastSeen"], device)
        if base["lastSeen"] is None or new_key != seen_key(base["lastSeen"], device):
            sets.append("GSI1SK = :seenKey")
            values[":seenKey"] = {"S": new_key}
        # The learned rhythm and the due entry change only with the SEEN bucket.
        removes = ["latest", "recent"]
        if (nxt["learned"], nxt["jitter"]) != (base["learned"], base["jitter"]):
            sets += ["learnedEverySeconds = :learned", "learnedJitterSeconds = :jitter"]
            values[":learned"] = {"N": str(nxt["learned"])}
            values[":jitter"] = {"N": str(nxt["jitter"])}
        due = due_at(nxt, device)
        if due != base["indexedDue"]:
            if due is None:
                removes += ["GSI3PK", "GSI3SK"]
            else:
                shard = xxhash.xxh3_64_intdigest(device.encode()) % DUE_SHARDS
                sets += ["GSI3PK = :duePk", "GSI3SK = :dueSk"]
                values[":duePk"] = {"S": f"DUE#{shard}"}
                values[":dueSk"] = {"S": f"{due}#{device}"}
        nxt = {**nxt, "indexedDue": due}
        # The state as Rust sizes it: the base item with this attempt's changes (and the
        # sequence number it was read with).
        projected = {k: v for k, v in base["item"].items() if k not in removes}
        for assignment in sets:
            name, value = assignment.split(" = ")
            projected[name] = values[value]
        projected["ingestSeq"] = values[":seq"]
        series, items, complete = summarise(registration, base, nxt, events, projected,
                                            MAX_TRANSACTION_ACTIONS - 1)
        series_bytes = encode_series(series) if series else None
        base_bytes = encode_series(base["series"]) if base["series"] else None
        actions = items.actions()
        if same_state(nxt, base) and series_bytes == base_bytes and not actions:
            return None  # a replay: nothing to write (the twin versions are read if needed)
        if series_bytes != base_bytes:
            if series_bytes is None:
                removes.append("series")
            else:
                sets.append("series = :series")
                values[":series"] = {"B": series_bytes}
        nxt = {**nxt, "series": series}
        key = state_key(registration["userId"], registration["shard"], device)
        expression = "SET " + ", ".join(sets) + " REMOVE " + ", ".join(removes)
        if actions:
            # Every summary item goes with the state update, conditioned on ingestSeq: a
            # device's summary writes are serialized by its state.
            outcome = _transact_state(key, expression, values, actions)
            if outcome is not True:
                if outcome is not None:
                    if outcome == {}:
                        _forget(device)
                        raise device_unauthorized()
                    base = state_from_item(outcome)
                    _remember(device, base)
                continue
            written_item = {k: v for k, v in projected.items() if k != "series"}
            written_item["ingestSeq"] = {"N": str(next_seq)}
            if series_bytes is not None:
                written_item["series"] = {"B": series_bytes}
            written = {**nxt, "ingestSeq": next_seq, "item": written_item}
            _remember(device, written)
            if not complete:
                # Late readings over more items than one transaction holds: the next round
                # counts the rest, each reading's items in one transaction.
                base, attempt = written, 0
                continue
            return twin_versions(written_item)
        try:
            written = DYNAMODB.update_item(
                TableName=TABLE_NAME,
                Key=key,
                # The lists of a state written before `readings` go as it is rewritten.
                UpdateExpression=expression,
                ConditionExpression="attribute_exists(PK) AND ingestSeq = :seq",
                ExpressionAttributeValues=values,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
                # The item as written: its twin versions say whether work is pending.
                ReturnValues="ALL_NEW",
                ReturnConsumedCapacity="TOTAL",
            )
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                current = err.response.get("Item")
                if current is None:
                    _forget(device)
                    raise device_unauthorized() from None
                base = state_from_item(current)
                _remember(device, base)
                continue
            if not _retryable(err):
                raise sdk_error(err) from None
            continue
        except (BotoConnectionError, ReadTimeoutError):
            continue
        written_item = {k: v for k, v in (written.get("Attributes") or {}).items()
                        if k not in ("createdAt", "updatedAt")}
        _remember(device, {**nxt, "ingestSeq": next_seq, "item": written_item})
        return twin_versions(written.get("Attributes"))
    raise busy()


def ingest(registration, events, deadline):
    deadline = min(deadline, time.monotonic() + INGEST_RETRY_MS / 1000.0)
    state = live_state(registration)
    check_type_cap(state, events)
    items = [([(e["at"], e["id"])], event_item(registration, e)) for e in events]
    # One type mark per searchable type and window; a mark not written fails its events.
    marks = {}
    for e in events:
        if e["type"] in SEARCHABLE_EVENT_TYPES:
            window = e["at"].epoch_seconds() - e["at"].epoch_seconds() % TYPE_WINDOW_SECONDS
            marks.setdefault((e["type"], window), []).append((e["at"], e["id"]))
    for (event_type, window), marked in sorted(marks.items()):
        items.append((marked, type_mark_item(registration, event_type, window)))
    chunks = [items[i:i + BATCH_WRITE_SIZE] for i in range(0, len(items), BATCH_WRITE_SIZE)]
    unstored = set()
    for failed in WRITERS.map(lambda chunk: write_chunk(chunk, deadline), chunks):
        for keys in failed:
            unstored.update(keys)
    stored = [e for e in events if (e["at"], e["id"]) not in unstored]
    failed = [e for e in events if (e["at"], e["id"]) in unstored]
    if not stored:
        return [], [e["id"] for e in failed], None
    try:
        versions = update_state(registration, state, stored, deadline)
    except ApiError as err:
        if err.status == 401:
            raise
        # Stored but not on the dashboard yet: acknowledge nothing; the resend is idempotent.
        return [], [e["id"] for e in stored + failed], None
    return [e["id"] for e in stored], [e["id"] for e in failed], versions


def _deadline(context):
    far = time.monotonic() + 3600
    if context is None or not hasattr(context, "get_remaining_time_in_millis"):
        return far
    return time.monotonic() + context.get_remaining_time_in_millis() / 1000.0 - ANSWER_MARGIN_SECONDS


def _ingest(event, context):
    route = route_key(event)
    if route != "POST /devices/{deviceId}/events":
        raise ApiError(404, "no_route", f"no route {route}")
    device = (event.get("pathParameters") or {}).get("deviceId")
    if device is None:
        raise invalid("deviceId", "missing path parameter")
    check_token("deviceId", device, 64)
    token = bearer_token(event)
    if token is None:
        raise device_unauthorized()
    registration = authenticate(device, token)
    body = json_body(event, MAX_INGEST_BODY_BYTES)
    events = validate_batch(body, Timestamp.now())
    report = validate_report(body)
    report_versions, acknowledged = apply_report(registration, report)
    accepted, failed, versions = ingest(registration, events, _deadline(context))
    if not failed:
        versions = newest_versions(versions, report_versions)
        work = pending_work(registration, versions)
        if acknowledged:
            work["acknowledged"] = acknowledged
        return json_response(200, {"accepted": len(accepted), "eventIds": accepted, **work})
    return json_response(503, {
        "error": {"code": "partially_stored",
                  "message": "some events were not stored: resend the failed ids"},
        "accepted": accepted,
        "failed": failed,
    }, {"retry-after": str(RETRY_AFTER_SECONDS)})



# ---------------------------------------------------------------------------------------------
# The device twin (shared::ops::twin::device): the device's report and acknowledgements, and
# its pending work in the answer, read only when the live state's versions say it is pending.

MAX_DOCUMENT_BYTES = 4096
MAX_DOCUMENT_DEPTH = 5
MAX_DOCUMENT_KEY = 64
MAX_COMMAND_PARAMETERS_BYTES = 1024
MAX_ACKS = 32


def compact_json(value):
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _check_depth(field, mapping, depth):
    if depth > MAX_DOCUMENT_DEPTH:
        raise invalid(field, f"must nest at most {MAX_DOCUMENT_DEPTH} objects deep")
    for key, value in mapping.items():
        path = f"{field}.{key}"
        if not key or len(key) > MAX_DOCUMENT_KEY:
            raise invalid(path, f"keys must be 1 to {MAX_DOCUMENT_KEY} characters")
        if any(is_control(c) for c in key):
            raise invalid(path, "keys must not contain control characters")
        _check_value_depth(path, value, depth + 1)


def _check_value_depth(field, value, depth):
    if isinstance(value, dict):
        _check_depth(field, value, depth)
    elif isinstance(value, list):
        if depth > MAX_DOCUMENT_DEPTH:
            raise invalid(field, f"must nest at most {MAX_DOCUMENT_DEPTH} levels deep")
        for i, v in enumerate(value):
            _check_value_depth(f"{field}[{i}]", v, depth + 1)


def twin_document(field, value, max_bytes):
    """A bounded JSON object (shared::model::twin::TwinDocument::parse)."""
    if not isinstance(value, dict):
        raise invalid(field, "must be a JSON object")
    _check_depth(field, value, 1)
    size = len(compact_json(value).encode())
    if size > max_bytes:
        raise invalid(field, f"must be at most {max_bytes} bytes of JSON, is {size}")
    return value


def command_seq(field, text):
    digits = text[4:] if isinstance(text, str) and text.startswith("cmd-") else ""
    if not (digits and len(digits) <= 10 and digits.isdigit() and int(digits) >= 1):
        raise invalid(field, "must be a command id like cmd-1")
    return int(digits)


def validate_report(body):
    reported, acks = body.get("reported"), body.get("acks") or []
    if len(acks) > MAX_ACKS:
        raise invalid("acks", f"at most {MAX_ACKS} acknowledgements per request")
    if reported is not None:
        reported = (int(reported["version"]),
                    twin_document("reported.state", reported["state"], MAX_DOCUMENT_BYTES))
    parsed = []
    for i, ack in enumerate(acks):
        seq = command_seq(f"acks[{i}].commandId", ack.get("commandId"))
        if ack.get("status") not in ("succeeded", "failed"):
            raise invalid(f"acks[{i}].status", "must be succeeded or failed")
        result = ack.get("result")
        if result is not None:
            result = twin_document(f"acks[{i}].result", result, MAX_COMMAND_PARAMETERS_BYTES)
        parsed.append((seq, ack["status"], result))
    return reported, parsed


def device_pk(registration):
    return f"USER#{registration['userId']}#DEVICE#{registration['deviceId']}"


def command_key(registration, seq):
    return {"PK": {"S": device_pk(registration)}, "SK": {"S": f"COMMAND#{seq:010d}"}}


def _conditional(call, **kwargs):
    """A conditional write; True when it took effect, the failure's item otherwise."""
    try:
        return call(TableName=TABLE_NAME, ReturnConsumedCapacity="TOTAL", **kwargs)
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
            return err.response
        raise sdk_error(err) from None
    except (BotoConnectionError, ReadTimeoutError) as err:
        raise sdk_error(err) from None


def apply_report(registration, report):
    """Acknowledgements (a delivered command only, so a replay acknowledges nothing again) and
    the reported state (its version never down, never past the desired one)."""
    reported, acks = report
    now = str(Timestamp.now())
    acknowledged, versions = [], None
    for seq, status, result in acks:
        sets, values = ["#s = :s", "finishedAt = :at"], {":s": {"S": status}, ":at": {"S": now},
                                                         ":delivered": {"S": "delivered"}}
        if result is not None:
            sets.append("#r = :r")
            values[":r"] = {"S": compact_json(result)}
        names = {"#s": "status", **({"#r": "result"} if result is not None else {})}
        out = _conditional(DYNAMODB.update_item, Key=command_key(registration, seq),
                           UpdateExpression="SET " + ", ".join(sets),
                           ConditionExpression="attribute_exists(PK) AND #s = :delivered",
                           ExpressionAttributeNames=names, ExpressionAttributeValues=values)
        if "Error" not in out:
            acknowledged.append(f"cmd-{seq}")
    if reported is not None:
        version, document = reported
        out = _conditional(
            DYNAMODB.update_item,
            Key=state_key(registration["userId"], registration["shard"], registration["deviceId"]),
            UpdateExpression="SET reportedVersion = :v",
            ConditionExpression="attribute_exists(PK) AND desiredVersion >= :v AND "
                                "(attribute_not_exists(reportedVersion) OR reportedVersion < :v)",
            ExpressionAttributeValues={":v": {"N": str(version)}},
            ReturnValues="ALL_NEW", ReturnValuesOnConditionCheckFailure="ALL_OLD")
        item = out.get("Attributes") or out.get("Item")
        versions = twin_versions(item) if item else None
        _conditional(
            DYNAMODB.put_item,
            Item={"PK": {"S": device_pk(registration)}, "SK": {"S": "TWIN#REPORTED"},
                  "entityType": {"S": "reportedState"}, "document": {"S": compact_json(document)},
                  "version": {"N": str(version)}, "reportedAt": {"S": now}},
            ConditionExpression="attribute_not_exists(PK) OR version <= :v",
            ExpressionAttributeValues={":v": {"N": str(version)}})
    return versions, acknowledged


def newest_versions(a, b):
    if a is None or b is None:
        return a or b
    return {k: max(a[k], b[k]) for k in a}


def _command_status(item, now):
    status = item["status"]["S"]
    if status in ("queued", "delivered") and not str(now) < item["expiresAt"]["S"]:
        return "expired"
    return status


def pending_work(registration, versions):
    """The desired state while its version is ahead of the reported one, and the open commands
    (a queued one marked delivered the first time); nothing is read when nothing is pending."""
    if versions is None:
        out = DYNAMODB.get_item(
            TableName=TABLE_NAME, ConsistentRead=True, ReturnConsumedCapacity="TOTAL",
            Key=state_key(registration["userId"], registration["shard"], registration["deviceId"]))
        if "Item" not in out:
            raise device_unauthorized()
        versions = twin_versions(out["Item"])
    work, now = {}, Timestamp.now()
    if versions["desiredVersion"] > versions["reportedVersion"]:
        out = DYNAMODB.get_item(
            TableName=TABLE_NAME, ConsistentRead=True, ReturnConsumedCapacity="TOTAL",
            Key={"PK": {"S": device_pk(registration)}, "SK": {"S": "TWIN#DESIRED"}})
        if "Item" in out:
            work["desired"] = {"version": int(out["Item"]["version"]["N"]),
                               "state": json.loads(out["Item"]["document"]["S"])}
    done, seq = versions["commandsDone"], versions["commandSeq"]
    if seq > done:
        out = DYNAMODB.query(
            TableName=TABLE_NAME, ConsistentRead=True, ReturnConsumedCapacity="TOTAL",
            KeyConditionExpression="PK = :pk AND SK BETWEEN :first AND :last",
            ExpressionAttributeValues={":pk": {"S": device_pk(registration)},
                                       ":first": {"S": f"COMMAND#{done + 1:010d}"},
                                       ":last": {"S": f"COMMAND#{seq:010d}"}})
        commands = {int(i["seq"]["N"]): i for i in out.get("Items", [])}
        delivered = []
        for item in commands.values():
            status = _command_status(item, now)
            if status == "queued":
                _conditional(DYNAMODB.update_item, Key=command_key(registration, int(item["seq"]["N"])),
                             UpdateExpression="SET #s = :d, deliveredAt = :at",
                             ConditionExpression="#s = :q", ExpressionAttributeNames={"#s": "status"},
                             ExpressionAttributeValues={":d": {"S": "delivered"}, ":q": {"S": "queued"},
                                                        ":at": {"S": str(now)}})
            if status in ("queued", "delivered"):
                delivered.append({"commandId": f"cmd-{item['seq']['N']}", "name": item["name"]["S"],
                                  "parameters": json.loads(item["parameters"]["S"]),
                                  "expiresAt": item["expiresAt"]["S"]})
        finished_up_to = done
        for n in range(done + 1, seq + 1):
            item = commands.get(n)
            if item is not None and _command_status(item, now) in ("queued", "delivered"):
                break
            finished_up_to = n
        if finished_up_to > done:
            _conditional(
                DYNAMODB.update_item,
                Key=state_key(registration["userId"], registration["shard"], registration["deviceId"]),
                UpdateExpression="SET commandsDone = :d",
                ConditionExpression="attribute_exists(PK) AND "
                                    "(attribute_not_exists(commandsDone) OR commandsDone < :d)",
                ExpressionAttributeValues={":d": {"N": str(finished_up_to)}})
        if delivered:
            work["commands"] = delivered
    return work

def ingest_handler(event, context):
    """POST /devices/{deviceId}/events."""
    return serve(event, context, _ingest)
