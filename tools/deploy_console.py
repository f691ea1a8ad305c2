"""Uploads the built web console (web/dist) to the stack's console bucket, with the config.json
the console reads at start (API URL, Cognito hosted UI and client id, from the stack's outputs),
and invalidates CloudFront's copies of the files that keep their names.

Run by `make deploy` after `sam deploy`, with the .venv's boto3 (the SAM CLI's dependency):
    python tools/deploy_console.py --stack device-fleet --dist web/dist [--region us-east-1]
"""

import argparse
import json
import mimetypes
import os
import sys
import time

import boto3

# Files whose names carry no content hash: CloudFront and browsers must revalidate them.
UNHASHED = {"index.html", "config.json"}


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
            if key == "config.json":
                continue
            content_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
            cache = "no-cache" if key in UNHASHED else "public, max-age=31536000, immutable"
            s3.upload_file(path, bucket, key, ExtraArgs={"ContentType": content_type, "CacheControl": cache})
            uploaded += 1
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
    print(f"Console: {uploaded + 1} files in s3://{bucket}; open {console_url}")


if __name__ == "__main__":
    main()
