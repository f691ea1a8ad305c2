"""Runs one handler of the peer on one API Gateway event: the event JSON on stdin, the
handler's response JSON on stdout (its log lines go to stderr).

    python invoke.py dashboard_handler < ../../events/get-dashboard.json
    python invoke.py ingest_handler < ../../events/ingest-batch.json
"""

import contextlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


class Context:
    """The part of the Lambda context the handlers use."""

    function_name = "python-peer"
    aws_request_id = "local-invoke"

    @staticmethod
    def get_remaining_time_in_millis():
        return 10_000


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in ("dashboard_handler", "ingest_handler"):
        sys.exit("usage: invoke.py dashboard_handler|ingest_handler < event.json")
    event = json.load(sys.stdin)
    with contextlib.redirect_stdout(sys.stderr):
        import handler

        response = getattr(handler, sys.argv[1])(event, Context())
    json.dump(response, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
