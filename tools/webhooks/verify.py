"""Verifies captured webhook deliveries with the Standard Webhooks reference library.

Reads JSON from stdin: {"secret": "whsec_...", "deliveries": [{"headers": {...}, "body": "..."}]}
and prints one line per delivery: "ok" or "fail: <reason>". The timestamp tolerance is the
library's own (5 minutes)."""

import json
import sys

from standardwebhooks.webhooks import Webhook

request = json.load(sys.stdin)
hook = Webhook(request["secret"])
for delivery in request["deliveries"]:
    try:
        hook.verify(delivery["body"], delivery["headers"])
        print("ok")
    except Exception as err:  # the library raises WebhookVerificationError
        print(f"fail: {type(err).__name__}: {err}")
