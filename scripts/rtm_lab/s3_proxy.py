"""A delay proxy between Spark and the lab's S3-compatible store: a set delay per request, one log line per request.

Storage latency is the variable the checkpoint-storage benchmark controls. A TCP-level proxy (Toxiproxy) delays
chunks of bytes, not requests, so a large PUT and a HEAD would not cost the same. This proxy reads each HTTP/1.1
request's head, sleeps the set delay, then forwards the request to the store unchanged (the Host header included:
S3's SigV4 signature covers it). Bodies stream through in both directions, fixed-length or chunked, and a client's
`Expect: 100-continue` gets the store's interim answer.

The delay is read from a control file (`set_delay`) before each request, so one Spark session can run several
delay cells. The log holds, per request: start and end (epoch ms, this machine's clock), method, path, the names of
the query parameters (never their values: a presigned URL carries credentials there; a LIST's `prefix` alone), the request's kind, status
and bytes each way. No header is ever logged.

Kinds, recognised in this order:

| kind      | recognised by                                                                   |
|-----------|---------------------------------------------------------------------------------|
| MULTIPART | a query with `uploads` or `uploadId` (create, upload part, complete, abort)     |
| DELETE    | method DELETE, or POST with the `delete` query (multi-object delete)            |
| COPY      | PUT with an `x-amz-copy-source` header (S3A's rename is a copy, then a delete)  |
| PUT       | any other PUT                                                                   |
| LIST      | GET with `list-type`, `prefix` or `delimiter` in the query, or of a bucket root |
| GET       | any other GET                                                                   |
| HEAD      | method HEAD                                                                     |
| OTHER     | anything else                                                                   |

    python -m rtm_lab.s3_proxy --port 9001 --upstream 127.0.0.1:7070 --log proxy.jsonl --control delay_ms
"""

import argparse
import asyncio
import contextlib
import json
import os
import socket
import sys
import time
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from rtm_lab import ports, processes
from rtm_lab.errors import LabError
from rtm_lab.paths import make_private_dir, state_dir
from rtm_lab.waiting import WaitTimeout, wait_until

KINDS = ("PUT", "GET", "HEAD", "LIST", "COPY", "DELETE", "MULTIPART", "OTHER")
LIST_QUERY = {"list-type", "prefix", "delimiter"}
# Heads longer than this are refused: no S3 client sends one, and it bounds what a broken client can make us hold.
MAX_HEAD_BYTES = 64 * 1024
COPY_CHUNK = 256 * 1024
BODY_GRACE_S = 1.0


def kind_of(method: str, path: str, query_names: Iterable[str], header_names: Iterable[str]) -> str:
    """The request's kind (see the module's table): from the method, the path, the query's names and the headers'."""
    query, headers = set(query_names), {h.lower() for h in header_names}
    method = method.upper()
    if "uploads" in query or "uploadId" in query:
        return "MULTIPART"
    if method == "DELETE" or (method == "POST" and "delete" in query):
        return "DELETE"
    if method == "PUT":
        return "COPY" if "x-amz-copy-source" in headers else "PUT"
    if method == "GET":
        bucket_root = path.strip("/").count("/") == 0
        return "LIST" if query & LIST_QUERY or bucket_root else "GET"
    if method == "HEAD":
        return "HEAD"
    return "OTHER"


def split_target(target: str) -> tuple[str, list[str], str | None]:
    """(path, sorted query parameter names, the `prefix` parameter's value) of a request target.

    Every other value is dropped here, before any logging: a presigned URL carries its credential and signature in
    the query. A LIST's prefix is an object key's start, which says which checkpoint folder it lists."""
    parsed = urllib.parse.urlsplit(target)
    pairs = urllib.parse.parse_qsl(parsed.query, keep_blank_values=True)
    prefix = next((value for name, value in pairs if name == "prefix"), None)
    return parsed.path, sorted({name for name, _ in pairs}), prefix


# ---------------------------------------------------------------- the delay, set per run


def set_delay(control: Path, delay_ms: float) -> None:
    """Make every request from now on wait `delay_ms` before it is forwarded (atomic: the proxy reads whole files)."""
    temp = control.with_name(f".{control.name}.tmp")
    temp.write_text(f"{delay_ms:g}\n")
    os.replace(temp, control)


@dataclass
class Delay:
    """The control file's value, read again only when the file changes (a stat per request, no read)."""

    control: Path
    _stamp: tuple[int, int] | None = None
    _ms: float = 0.0

    def ms(self) -> float:
        try:
            stat = self.control.stat()
        except FileNotFoundError:
            return 0.0
        stamp = (stat.st_mtime_ns, stat.st_ino)
        if stamp != self._stamp:
            try:
                self._ms = max(0.0, float(self.control.read_text().strip() or 0))
            except (OSError, ValueError):
                self._ms = 0.0
            self._stamp = stamp
        return self._ms


# ---------------------------------------------------------------- HTTP/1.1 plumbing


class Closed(Exception):
    """The peer closed the connection between requests (not an error) or mid-message."""


async def _read_head(reader: asyncio.StreamReader) -> list[bytes]:
    """The head's lines (request or status line first), without the blank line that ends it."""
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        raise Closed() from exc
    except asyncio.LimitOverrunError as exc:
        raise Closed("head too long") from exc
    return raw[:-4].split(b"\r\n")


def _headers(lines: list[bytes]) -> dict[str, str]:
    found = {}
    for line in lines[1:]:
        name, _, value = line.decode("latin-1").partition(":")
        found[name.strip().lower()] = value.strip()
    return found


async def _pump_body(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, headers: dict[str, str]) -> int:
    """Copy one message body as it arrives; return its size in bytes (chunk framing included)."""
    moved = 0
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            size_line = await reader.readuntil(b"\r\n")
            writer.write(size_line)
            size = int(size_line.split(b";", 1)[0].strip(), 16)
            if size == 0:  # the trailers, up to an empty line
                while (line := await reader.readuntil(b"\r\n")) != b"\r\n":
                    writer.write(line)
                writer.write(b"\r\n")
                await writer.drain()
                return moved
            left = size + 2  # the chunk and its CRLF
            while left:
                data = await reader.read(min(left, COPY_CHUNK))
                if not data:
                    raise Closed("body cut short")
                writer.write(data)
                left -= len(data)
                moved += len(data)
            await writer.drain()
    left = int(headers.get("content-length", "0") or 0)
    while left:
        data = await reader.read(min(left, COPY_CHUNK))
        if not data:
            raise Closed("body cut short")
        writer.write(data)
        await writer.drain()
        left -= len(data)
        moved += len(data)
    return moved


async def _pump_to_eof(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> int:
    moved = 0
    while data := await reader.read(COPY_CHUNK):
        writer.write(data)
        await writer.drain()
        moved += len(data)
    return moved


def _has_body(method: str, status: int, headers: dict[str, str]) -> bool | None:
    """Whether a response carries a body: False, True (framed) or None (until the connection closes)."""
    if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
        return False
    if "chunked" in headers.get("transfer-encoding", "").lower() or "content-length" in headers:
        return True
    return None


class Proxy:
    def __init__(self, upstream: tuple[str, int], log: Path, delay: Delay) -> None:
        self.upstream = upstream
        self.log = open(log, "a", buffering=1)  # noqa: SIM115  (a line per request, for the proxy's life)
        self.delay = delay

    def _record(self, entry: dict) -> None:
        self.log.write(json.dumps(entry, separators=(",", ":")) + "\n")

    async def serve_client(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        """One client connection, kept alive across requests, over one connection to the store."""
        up_r = up_w = None
        try:
            up_r, up_w = await asyncio.open_connection(*self.upstream, limit=MAX_HEAD_BYTES)
            while await self._one_request(client_r, client_w, up_r, up_w):
                pass
        except (Closed, ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            for writer in (client_w, up_w):
                if writer is not None:
                    writer.close()
                    with contextlib.suppress(Exception):
                        await writer.wait_closed()

    async def _one_request(self, client_r, client_w, up_r, up_w) -> bool:
        """Forward one request and its response; False when the connection must close after it."""
        lines = await _read_head(client_r)
        started = time.time()
        method, target, _ = lines[0].decode("latin-1").split(" ", 2)
        headers = _headers(lines)
        path, query, prefix = split_target(target)
        kind = kind_of(method, path, query, headers)
        delay_ms = self.delay.ms()
        if delay_ms:
            await asyncio.sleep(delay_ms / 1000)
        up_w.write(b"\r\n".join(lines) + b"\r\n\r\n")
        await up_w.drain()
        # The body goes up while the answer is awaited: a client that sent `Expect: 100-continue` waits for the
        # store's 100 before it sends a byte, and a store may answer (an error) before it read the body.
        sending = asyncio.create_task(_pump_body(client_r, up_w, headers))
        try:
            while True:
                answer = await _read_head(up_r)
                client_w.write(b"\r\n".join(answer) + b"\r\n\r\n")
                await client_w.drain()
                status = int(answer[0].split(b" ", 2)[1])
                if status != 100:
                    break
            answer_headers = _headers(answer)
            body = _has_body(method, status, answer_headers)
            if body is None:
                bytes_out = await _pump_to_eof(up_r, client_w)
            else:
                bytes_out = await _pump_body(up_r, client_w, answer_headers) if body else 0
            # The store may answer a moment before the last body bytes left here; one that answered without reading
            # the body (an error) leaves this connection in an unknown state, so it is closed.
            await asyncio.wait({sending}, timeout=BODY_GRACE_S)
            if not sending.done():
                sending.cancel()
                return False
            bytes_in = sending.result()
        except BaseException:
            sending.cancel()
            raise
        self._record(
            {
                "start_ms": round(started * 1000, 1),
                "end_ms": round(time.time() * 1000, 1),
                "method": method,
                "path": path,
                "query": query,
                "prefix": prefix,
                "kind": kind,
                "status": status,
                "bytes_in": bytes_in,
                "bytes_out": bytes_out,
                "delay_ms": delay_ms,
            }
        )
        closing = "close" in (headers.get("connection", "") + answer_headers.get("connection", "")).lower()
        return body is not None and not closing


async def serve(port: int, upstream: tuple[str, int], log: Path, control: Path, host: str = "127.0.0.1") -> None:
    proxy = Proxy(upstream, log, Delay(control))
    server = await asyncio.start_server(proxy.serve_client, host, port, limit=MAX_HEAD_BYTES)
    async with server:
        await server.serve_forever()


# ---------------------------------------------------------------- reading the log


def read_log(log: Path, since_ms: float = 0.0, until_ms: float = float("inf")) -> list[dict]:
    """The requests that started in [since_ms, until_ms), in start order (a half-written last line is skipped)."""
    entries = []
    with contextlib.suppress(FileNotFoundError), open(log) as handle:
        for line in handle:
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if since_ms <= entry["start_ms"] < until_ms:
                    entries.append(entry)
    return sorted(entries, key=lambda e: e["start_ms"])


# ---------------------------------------------------------------- the lab's proxy process


def root() -> Path:
    return state_dir() / "s3-proxy"


def log_path() -> Path:
    """The request log: one JSON line per request, kept across runs (a run reads its own time span)."""
    return root() / "requests.jsonl"


def control_path() -> Path:
    return root() / "delay_ms"


def marker() -> str:
    """The argument that marks the lab's proxy (a whole argument holding this lab folder's path)."""
    return f"--control={control_path()}"


def answers(port: int | None) -> bool:
    """Whether something accepts connections on the proxy's port (it answers HTTP only for the store behind it)."""
    if not port:
        return False
    with contextlib.suppress(OSError), socket.create_connection((ports.HOST, port), timeout=2):
        return True
    return False


def configured_port() -> int | None:
    """The port the running proxy was started with, read from its own command line."""
    for pid in processes.find(marker()):
        for argument in processes.arguments(pid):
            if argument.startswith("--port="):
                return int(argument.split("=", 1)[1])
    return None


def start(port: int, upstream_port: int, on_spawn) -> int:
    """Start the proxy on 127.0.0.1:port in front of the store on `upstream_port`, at no delay; `on_spawn(pid)`
    records it at once."""
    make_private_dir(root())
    set_delay(control_path(), 0)
    cmd = [
        sys.executable,
        "-m",
        "rtm_lab.s3_proxy",
        f"--port={port}",
        f"--upstream={ports.HOST}:{upstream_port}",
        f"--log={log_path()}",
        marker(),
    ]
    pid = processes.spawn(cmd, root() / "proxy.log", cwd=root())
    on_spawn(pid)
    try:
        wait_until(lambda: answers(port) or not processes.is_alive(pid), 30, "the S3 delay proxy to listen", 0.1)
    except WaitTimeout:
        raise LabError(
            f"the S3 delay proxy (pid {pid}) did not listen within 30 s; see {root() / 'proxy.log'}"
        ) from None
    if not processes.is_alive(pid):
        raise LabError(f"the S3 delay proxy exited at start-up:\n{processes.tail(root() / 'proxy.log', 15)}")
    return pid


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT")
    return host, int(port)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rtm_lab.s3_proxy", description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True, help="port to listen on (127.0.0.1)")
    parser.add_argument("--upstream", type=_address, required=True, help="the store's HOST:PORT")
    parser.add_argument("--log", type=Path, required=True, help="append one JSON line per request here")
    parser.add_argument("--control", type=Path, required=True, help="file holding the delay in ms (absent: 0)")
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.port, args.upstream, args.log, args.control))
    return 0


if __name__ == "__main__":
    sys.exit(main())
