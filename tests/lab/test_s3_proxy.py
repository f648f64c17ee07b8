"""The delay proxy (rtm_lab.s3_proxy) between a real HTTP client and a real HTTP server on loopback: each request is
delayed, logged with its kind and never with its credentials, and bodies of any size and framing pass through whole.

The store behind it in the checkpoint tests is the lab's S3 server; here a stdlib server echoes what it got, so the
bytes can be compared. The kinds are S3's request shapes, as S3A sends them.
"""

import asyncio
import contextlib
import hashlib
import http.client
import http.server
import json
import threading
import time
from pathlib import Path

import pytest

from rtm_lab import ports, s3_proxy


class Echo(http.server.BaseHTTPRequestHandler):
    """Answers every request with the SHA-256 of the body it read (chunked or fixed length)."""

    protocol_version = "HTTP/1.1"

    def _body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", ""):
            data = b""
            while size := int(self.rfile.readline().split(b";")[0], 16):
                data += self.rfile.read(size)
                self.rfile.readline()
            self.rfile.readline()
            return data
        return self.rfile.read(int(self.headers.get("Content-Length", 0)))

    def _answer(self) -> None:
        digest = hashlib.sha256(self._body()).hexdigest().encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(digest)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(digest)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _answer

    def log_message(self, *args) -> None:  # quiet
        pass


@pytest.fixture
def proxied(tmp_path: Path):
    """(proxy port, log path, control path) in front of a fresh Echo server; both stop after the test."""
    upstream = http.server.ThreadingHTTPServer((ports.HOST, 0), Echo)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    port = ports.choose(None, "", None)
    log, control = tmp_path / "proxy.jsonl", tmp_path / "delay_ms"
    loop = asyncio.new_event_loop()
    task = loop.create_task(s3_proxy.serve(port, (ports.HOST, upstream.server_port), log, control))

    def run() -> None:
        with contextlib.suppress(asyncio.CancelledError):  # the teardown's cancel is how it stops
            loop.run_until_complete(task)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            http.client.HTTPConnection(ports.HOST, port, timeout=1).connect()
            break
        except OSError:
            time.sleep(0.05)
    yield port, log, control
    loop.call_soon_threadsafe(task.cancel)
    thread.join(timeout=5)
    upstream.shutdown()


def _send(port: int, method: str, target: str, body: bytes | None = None, headers: dict | None = None, **kw):
    conn = http.client.HTTPConnection(ports.HOST, port, timeout=30)
    conn.request(method, target, body=body, headers=headers or {}, **kw)
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, data


def _logged(log: Path, count: int) -> list[dict]:
    """The log's entries once it holds `count`: the proxy writes a line just after the client has its answer."""
    deadline = time.monotonic() + 10
    while len(entries := s3_proxy.read_log(log)) < count and time.monotonic() < deadline:
        time.sleep(0.02)
    return entries


def test_kinds_are_told_apart_from_method_query_and_headers():
    kind = s3_proxy.kind_of
    assert kind("PUT", "/b/ck/offsets/1", [], ["Content-Length"]) == "PUT"
    assert kind("PUT", "/b/ck/offsets/1", [], ["x-amz-copy-source"]) == "COPY"
    assert kind("GET", "/b/ck/offsets/1", [], []) == "GET"
    assert kind("GET", "/b", ["list-type", "prefix"], []) == "LIST"
    assert kind("GET", "/b/", [], []) == "LIST"
    assert kind("HEAD", "/b/ck/metadata", [], []) == "HEAD"
    assert kind("DELETE", "/b/ck/x", [], []) == "DELETE"
    assert kind("POST", "/b", ["delete"], []) == "DELETE"
    assert kind("POST", "/b/k", ["uploads"], []) == "MULTIPART"
    assert kind("PUT", "/b/k", ["partNumber", "uploadId"], []) == "MULTIPART"


def test_a_set_delay_holds_each_request_and_the_log_keeps_no_secret(proxied):
    port, log, control = proxied
    s3_proxy.set_delay(control, 150)
    began = time.monotonic()
    for _ in range(2):
        status, _ = _send(port, "GET", "/bucket?list-type=2&prefix=ck%2F&X-Amz-Signature=secret123")
        assert status == 200
    took = time.monotonic() - began
    assert took >= 2 * 0.150  # each request waited the delay before it was forwarded
    s3_proxy.set_delay(control, 0)
    _send(port, "HEAD", "/bucket/ck/metadata", headers={"Authorization": "AWS4-HMAC-SHA256 Credential=AKIAXYZ/..."})
    entries = _logged(log, 3)
    assert [e["kind"] for e in entries] == ["LIST", "LIST", "HEAD"]
    assert [e["delay_ms"] for e in entries] == [150, 150, 0]
    assert all(e["end_ms"] - e["start_ms"] >= 150 for e in entries[:2])
    assert (entries[0]["query"], entries[0]["prefix"]) == (["X-Amz-Signature", "list-type", "prefix"], "ck/")
    text = log.read_text()
    assert "secret123" not in text and "AKIAXYZ" not in text and "Authorization" not in text


def test_large_and_chunked_bodies_pass_through_whole(proxied):
    port, log, _ = proxied
    big = bytes(range(256)) * 40_000  # about 10 MB
    status, digest = _send(port, "PUT", "/bucket/big", body=big, headers={"Expect": "100-continue"})
    assert (status, digest.decode()) == (200, hashlib.sha256(big).hexdigest())
    parts = [b"a" * 70_000, b"b" * 3, b"c" * 1_000_000]
    status, digest = _send(port, "PUT", "/bucket/chunked", body=iter(parts), encode_chunked=True)
    assert (status, digest.decode()) == (200, hashlib.sha256(b"".join(parts)).hexdigest())
    entries = _logged(log, 2)
    assert [e["kind"] for e in entries] == ["PUT", "PUT"]
    assert entries[0]["bytes_in"] == len(big)
    assert entries[1]["bytes_in"] >= sum(map(len, parts))  # chunk framing counted too
    assert json.loads(log.read_text().splitlines()[0])["status"] == 200
