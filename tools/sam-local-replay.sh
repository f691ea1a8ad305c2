#!/usr/bin/env bash
# With Docker: every events/ sample through `sam local invoke` (the real container, the real
# aws-lambda-rie) against make dev's DynamoDB Local, each answer checked against
# events/manifest.json. Run by `make sam-replay` after `make dev` (in another terminal) and
# `make sam-env ENDPOINT=... TABLE=...`. Without Docker, `make rie-replay` runs the same
# emulator on the host instead.
#
# Credentials and region: DynamoDB Local keeps tables apart by access key and region, and
# make dev's client uses `local` in us-east-1; sam local passes the shell's credentials into
# the container, so they are set to the same here.
set -euo pipefail
env_file=${1:-target/sam/env-vars.json}
cd "$(dirname "$0")/.."
command -v docker >/dev/null || { echo "sam local needs Docker; without it: make rie-replay"; exit 2; }
test -f "$env_file" || { echo "$env_file missing: make sam-env ENDPOINT=... TABLE=... (make dev prints both)"; exit 2; }
export AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local AWS_DEFAULT_REGION=us-east-1 AWS_REGION=us-east-1
export SAM_CLI_TELEMETRY=0
sam build
failures=0
while IFS=$'\t' read -r file function expected; do
  # --docker-network host: the container reaches make dev's DynamoDB Local on 127.0.0.1.
  answer=$(sam local invoke "$function" -e "events/$file" --env-vars "$env_file" \
    --docker-network host 2>/dev/null | tail -n 1)
  status=$(printf '%s' "$answer" | python3 -c 'import json,sys
try:
    a = json.loads(sys.stdin.read())
except ValueError:
    print("no-answer"); sys.exit()
print(a.get("statusCode", 502 if "errorType" in a else 200))')
  if [ "$status" = "$expected" ]; then
    echo "ok   $file: $status"
  else
    echo "FAIL $file: expected $expected, got $status: $answer"
    failures=$((failures + 1))
  fi
done < <(python3 -c 'import json
for e in json.load(open("events/manifest.json"))["events"]:
    print(e["file"], e["function"], e["status"], sep="\t")')
echo "$failures failed"
test "$failures" -eq 0
