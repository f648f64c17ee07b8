"""Signed S3 requests from the standard library: enough to create a bucket and list or read what Spark wrote.

The lab's object store (rtm_lab.s3store) answers only requests signed with AWS Signature Version 4. Spark talks to it
through Hadoop's S3A connector; the lab itself needs a handful of calls (create the bucket, list a prefix, read an
object), which do not justify an AWS SDK in the Python environment. The secret key signs; it is never sent or logged.
"""

import datetime
import hashlib
import hmac
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from dataclasses import dataclass

REGION = "us-east-1"  # versitygw's default region; S3A is told the same
_S3_XML = "{http://s3.amazonaws.com/doc/2006-03-01/}"


@dataclass(frozen=True)
class Credentials:
    access_key: str
    secret_key: str

    def __repr__(self) -> str:
        # A traceback or a log line that prints this object shows neither key.
        return "Credentials(<redacted>)"


class S3Error(Exception):
    """The store answered with an error status (its code, e.g. NoSuchBucket, is in the message)."""

    def __init__(self, status: int, body: str):
        self.status = status
        super().__init__(f"HTTP {status}: {body[:300]}")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def _signing_key(secret: str, day: str) -> bytes:
    key = _hmac(f"AWS4{secret}".encode(), day)
    for part in (REGION, "s3", "aws4_request"):
        key = _hmac(key, part)
    return key


def signed_headers(
    method: str, host: str, path: str, query: dict[str, str], body: bytes, credentials: Credentials
) -> dict[str, str]:
    """The headers that make this request valid under Signature Version 4 (path-style, region REGION)."""
    now = datetime.datetime.now(datetime.UTC)
    stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    payload = _sha256(body)
    headers = {"host": host, "x-amz-content-sha256": payload, "x-amz-date": stamp}
    names = ";".join(sorted(headers))
    canonical_query = "&".join(
        f"{urllib.parse.quote(k, safe='-_.~')}={urllib.parse.quote(v, safe='-_.~')}" for k, v in sorted(query.items())
    )
    canonical = "\n".join(
        [
            method,
            urllib.parse.quote(path, safe="/-_.~"),
            canonical_query,
            "".join(f"{k}:{headers[k]}\n" for k in sorted(headers)),
            names,
            payload,
        ]
    )
    scope = f"{day}/{REGION}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope, _sha256(canonical.encode())])
    signature = hmac.new(_signing_key(credentials.secret_key, day), to_sign.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={credentials.access_key}/{scope}, SignedHeaders={names}, Signature={signature}"
    )
    return headers


def request(
    endpoint: str,
    credentials: Credentials,
    method: str,
    path: str,
    query: dict[str, str] | None = None,
    body: bytes = b"",
    timeout_s: float = 30.0,
) -> bytes:
    """Send one signed request to `endpoint` (http://host:port) and return the response body; raise S3Error."""
    query = query or {}
    host = urllib.parse.urlsplit(endpoint).netloc
    headers = signed_headers(method, host, path, query, body, credentials)
    url = endpoint.rstrip("/") + urllib.parse.quote(path, safe="/-_.~")
    if query:
        url += "?" + urllib.parse.urlencode(sorted(query.items()), quote_via=urllib.parse.quote)
    call = urllib.request.Request(url, data=body if method in ("PUT", "POST") else None, method=method)
    for name, value in headers.items():
        if name != "host":  # urllib sets Host itself, to the same value
            call.add_header(name, value)
    try:
        with urllib.request.urlopen(call, timeout=timeout_s) as response:
            return response.read()
    except urllib.error.HTTPError as error:
        raise S3Error(error.code, error.read().decode(errors="replace")) from None


def create_bucket(endpoint: str, credentials: Credentials, bucket: str) -> bool:
    """Create the bucket; return False if this account already owns it."""
    try:
        request(endpoint, credentials, "PUT", f"/{bucket}")
    except S3Error as error:
        if error.status == 409 and "BucketAlreadyOwnedByYou" in str(error):
            return False
        raise
    return True


def list_keys(endpoint: str, credentials: Credentials, bucket: str, prefix: str = "") -> list[str]:
    """Every key under the prefix (ListObjectsV2, following continuation tokens)."""
    keys: list[str] = []
    token = ""
    while True:
        query = {"list-type": "2", "prefix": prefix}
        if token:
            query["continuation-token"] = token
        root = ET.fromstring(request(endpoint, credentials, "GET", f"/{bucket}", query))
        keys += [node.text or "" for node in root.iter(f"{_S3_XML}Key")]
        token = root.findtext(f"{_S3_XML}NextContinuationToken") or ""
        if root.findtext(f"{_S3_XML}IsTruncated") != "true" or not token:
            return keys


def get_object(endpoint: str, credentials: Credentials, bucket: str, key: str) -> bytes:
    return request(endpoint, credentials, "GET", f"/{bucket}/{key}")
