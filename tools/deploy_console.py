"""Uploads the built web console (web/dist) to the stack's console bucket, with the config.json
the console reads at start (API URL, Cognito hosted UI and client id, from the stack's outputs),
and index.html with this stack's API and hosted UI pinned as the only cross-origin connections
(a second Content-Security-Policy, see pin_connect_src), and invalidates CloudFront's copies of
the files that keep their names.

Run by `make deploy` after `sam deploy`, with the .venv's boto3 (the SAM CLI's dependency):
    python tools/deploy_console.py --stack device-fleet --dist web/dist [--region us-east-1]
"""

import argparse
import json
from html import escape as html_escape
import urllib.parse
import mimetypes
import os
import sys
import time

import boto3

# Files whose names carry no content hash: CloudFront and browsers must revalidate them.
UNHASHED = {"index.html", "config.json"}


def origin(url):
    """`https://host` of a URL (scheme and host, no path)."""
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def pin_connect_src(html, api_url, cognito_domain):
    """index.html with a second Content-Security-Policy, as a <meta> before any script, that
    allows connections to the console's own origin, this stack's API and its hosted UI only.

    The distribution's header (template.yaml, ConsoleSecurityHeaders) can name the API only by
    its region's execute-api hosts: the API's CORS names the distribution, so the reverse
    reference would be a dependency cycle. A browser enforces every policy it is given, so the
    two together allow exactly this API's origin.
    """
    policy = f"connect-src 'self' {origin(api_url)} {origin(cognito_domain)}"
    meta = f'<meta http-equiv="Content-Security-Policy" content="{html_escape(policy, quote=False)}" />'
    # After the charset declaration (which must come first), before any script or stylesheet.
    for anchor in ('<meta charset="utf-8" />', "<head>"):
        at = html.find(anchor)
        if at >= 0:
            at += len(anchor)
            return html[:at] + "\n    " + meta + html[at:]
    sys.exit("index.html has no <head>: cannot pin the API's origin")


def outputs(cloudformation, stack):
    described = cloudformation.describe_stacks(StackName=stack)["Stacks"][0]
    return {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", required=True)
    parser.add_argument("--dist", required=True)
    parser.add_argument("--region", default=os.environ.get("AWS_REGION", "us-east-1"))
    args = parser.parse_args()
    if not os.path.isfile(os.path.join(args.dist, "index.html")):
        sys.exit(f"{args.dist} has no index.html: build the console first (make web)")

    session = boto3.session.Session(region_name=args.region)
    out = outputs(session.client("cloudformation"), args.stack)
    console_url = out["ConsoleUrl"]
    config = {
        "mode": "cognito",
        "apiUrl": out["ApiUrl"],
        "cognitoDomain": out["CognitoDomain"],
        "clientId": out["UserPoolClientId"],
        "redirectUri": console_url,
    }
    s3 = session.client("s3")
    bucket = out["ConsoleBucketName"]
    uploaded = 0
    for root, _, files in os.walk(args.dist):
        for name in files:
            path = os.path.join(root, name)
            key = os.path.relpath(path, args.dist).replace(os.sep, "/")
            if key in ("config.json", "index.html"):
                continue
            content_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
            cache = "no-cache" if key in UNHASHED else "public, max-age=31536000, immutable"
            s3.upload_file(path, bucket, key, ExtraArgs={"ContentType": content_type, "CacheControl": cache})
            uploaded += 1
    with open(os.path.join(args.dist, "index.html"), encoding="utf-8") as f:
        index = pin_connect_src(f.read(), config["apiUrl"], config["cognitoDomain"])
    s3.put_object(
        Bucket=bucket,
        Key="index.html",
        Body=index.encode(),
        ContentType="text/html",
        CacheControl="no-cache",
    )
    s3.put_object(
        Bucket=bucket,
        Key="config.json",
        Body=json.dumps(config, indent=2).encode(),
        ContentType="application/json",
        CacheControl="no-cache",
    )
    session.client("cloudfront").create_invalidation(
        DistributionId=out["ConsoleDistributionId"],
        InvalidationBatch={
            "Paths": {"Quantity": 2, "Items": ["/index.html", "/config.json"]},
            "CallerReference": str(time.time()),
        },
    )
    print(f"Console: {uploaded + 2} files in s3://{bucket}; open {console_url}")


if __name__ == "__main__":
    main()
