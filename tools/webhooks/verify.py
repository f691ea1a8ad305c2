"""Verifies captured webhook deliveries with the Standard Webhooks reference library, and each
standard-format body against its event's JSON Schema (docs/webhook-events.json).

Reads JSON from stdin: {"secret": "whsec_...", "deliveries": [{"headers": {...}, "body": "..."}]}
and prints one line per delivery: "ok" or "fail: <reason>". The timestamp tolerance is the
library's own (5 minutes). A Slack endpoint's body (Slack's `{"text"}`, no `type`) is checked
for its signature only."""

import json
import pathlib
import sys

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from standardwebhooks.webhooks import Webhook

SCHEMA = json.loads(
    (pathlib.Path(__file__).resolve().parents[2] / "docs" / "webhook-events.json").read_text()
)
Draft202012Validator.check_schema(SCHEMA)
bodies = Draft202012Validator(SCHEMA, format_checker=Draft202012Validator.FORMAT_CHECKER)

request = json.load(sys.stdin)
hook = Webhook(request["secret"])
for delivery in request["deliveries"]:
    try:
        hook.verify(delivery["body"], delivery["headers"])
    except Exception as err:  # the library raises WebhookVerificationError
        print(f"fail: {type(err).__name__}: {err}")
        continue
    body = json.loads(delivery["body"])
    if isinstance(body, dict) and "type" in body:
        error = best_match(bodies.iter_errors(body))
        if error is not None:
            print(f"fail: schema: {error.message} at {list(error.absolute_path)}")
            continue
    print("ok")
