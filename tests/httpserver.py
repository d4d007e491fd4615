"""A real HTTP/1.1 server on 127.0.0.1 for tests: serves files, honours (or refuses) `Range`, and
misbehaves on request.

    with LoopbackServer() as server:
        server.add_file("/pkg/a.whl", data)
        server.url("/pkg/a.whl")             # http://127.0.0.1:PORT/pkg/a.whl

What it serves, in this order of precedence: redirects (`add_redirect`), handlers for a path or a
path prefix (`add_handler`, for index pages and anything else a test wants to answer by hand),
files added in memory (`add_file`), files under `root`. Anything else is a 404.

How it treats `Range` on files is the `mode`:

    ranges      absolute (`bytes=a-b`, `bytes=a-`) and suffix (`bytes=-n`) ranges, 206/416
    no_ranges   ignores `Range`: 200 and the whole body
    no_suffix   absolute ranges as above; a suffix range gets `suffix_status` (416, or 200 + body)

Faults (`inject`) apply to the next GET requests of files (optionally of one path), once each:

    drop        send half the body, then reset the connection
    short       Content-Length of the whole body, send half of it, then close
    truncated   a well-formed 206 whose body is half of what its Content-Range claims (keep-alive)
    bad_range   a 206 whose Content-Range is off by one byte
    503         a 503 Service Unavailable instead of the answer
    slow        wait `slow_s` before answering at all
    stall       send half the body, wait `slow_s`, send the rest

`publish_index(server, projects)` serves wheels as a PEP 503 index under `/simple` (the
`loopback_index` fixture of conftest.py is one such index per test module).

Counters (`requests`, `bytes_sent`, `max_active`, `log`) are what the server saw, each updated
before the client can see the answer (`bytes_sent` counts body bytes handed to the socket);
`delay_s` holds every request for a while before it is answered, so concurrent clients overlap and
`max_active` (the most requests inside that window at once) shows how many were in flight.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import re
import socket
import ssl
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Literal
from urllib.parse import urlsplit

from urllib3 import HTTPHeaderDict

Mode = Literal["ranges", "no_ranges", "no_suffix"]
Fault = Literal["drop", "short", "truncated", "bad_range", "503", "slow", "stall"]
FAULTS: tuple[Fault, ...] = ("drop", "short", "truncated", "bad_range", "503", "slow", "stall")

_RANGE = re.compile(r"bytes=(\d*)-(\d*)$")


@dataclass(frozen=True)
class Request:
    """One request as a handler sees it; `headers` is case-insensitive."""

    method: str
    path: str
    query: str
    headers: Mapping[str, str]


@dataclass
class Reply:
    """What a handler answers."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[Request], Reply]


@dataclass(frozen=True)
class Seen:
    """One request in the server's log."""

    method: str
    path: str
    range: str | None


@dataclass
class _Pending:
    fault: Fault
    times: int
    path: str | None


class LoopbackServer:
    """An HTTP server in a background thread; start and stop it with `with`."""

    def __init__(
        self,
        root: Path | None = None,
        *,
        mode: Mode = "ranges",
        suffix_status: int = 416,
        slow_s: float = 1.0,
        delay_s: float = 0.0,
        auth: tuple[str, str] | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.root = root
        self.auth = auth  # (user, password) every request must carry (Basic), else 401
        self.mode: Mode = mode
        self.suffix_status = suffix_status
        self.slow_s = slow_s
        self.delay_s = delay_s
        self.requests = 0
        self.bytes_sent = 0
        self.max_active = 0
        self.log: list[Seen] = []
        self._active = 0
        self._files: dict[str, bytes] = {}
        self._handlers: list[tuple[str, bool, Handler]] = []
        self._redirects: dict[str, tuple[str, int]] = {}
        self._faults: list[_Pending] = []
        self._lock = threading.Lock()
        self._httpd = _Server(("127.0.0.1", 0), _RequestHandler)
        self._httpd.owner = self
        self.scheme = "http"
        if tls is not None:  # HTTPS with this server context
            self._httpd.socket = tls.wrap_socket(self._httpd.socket, server_side=True)
            self.scheme = "https"
        self._thread: threading.Thread | None = None

    # -- setup -----------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"{self.scheme}://{host!s}:{port}"

    def url(self, path: str) -> str:
        return self.base_url + path

    def add_file(self, path: str, data: bytes) -> str:
        """Serve `data` at `path`; returns its URL."""
        self._files[path] = data
        return self.url(path)

    def add_handler(self, path: str, handler: Handler, *, prefix: bool = False) -> None:
        """Answer `path` (or every path under it, with `prefix`) by calling `handler`."""
        self._handlers.append((path, prefix, handler))

    def add_redirect(self, path: str, target: str, status: int = 302) -> None:
        """Redirect `path` to `target`: a path on this server or an absolute URL."""
        self._redirects[path] = (target, status)

    def inject(self, fault: Fault, *, times: int = 1, path: str | None = None) -> None:
        """Misbehave on the next `times` GET requests of a file (of `path`, when given)."""
        with self._lock:
            self._faults.append(_Pending(fault, times, path))

    def reset_counters(self) -> None:
        with self._lock:
            self.requests = self.bytes_sent = self.max_active = 0
            self.log.clear()

    def count(self, method: str = "GET", path: str | None = None) -> int:
        """How many requests with this method (and path) the server saw."""
        with self._lock:
            return sum(1 for s in self.log if s.method == method and path in (None, s.path))

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> LoopbackServer:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- serving ---------------------------------------------------------------------------------

    def _enter(self, request: Request) -> None:
        with self._lock:
            self.requests += 1
            self.log.append(Seen(request.method, request.path, request.headers.get("Range")))
            self._active += 1
            self.max_active = max(self.max_active, self._active)
        time.sleep(self.delay_s)
        with self._lock:
            self._active -= 1

    def _take_fault(self, path: str) -> Fault | None:
        with self._lock:
            for pending in self._faults:
                if pending.path in (None, path):
                    pending.times -= 1
                    if pending.times == 0:
                        self._faults.remove(pending)
                    return pending.fault
        return None

    def _sent(self, n: int) -> None:
        with self._lock:
            self.bytes_sent += n

    def _file(self, path: str) -> bytes | None:
        if path in self._files:
            return self._files[path]
        if self.root is not None:
            candidate = (self.root / path.lstrip("/")).resolve()
            if candidate.is_file() and candidate.is_relative_to(self.root.resolve()):
                return candidate.read_bytes()
        return None

    def _handler(self, path: str) -> Handler | None:
        for where, prefix, handler in self._handlers:
            if path == where or (prefix and path.startswith(where)):
                return handler
        return None

    def answer(self, request: Request) -> tuple[Reply, Fault | None]:
        """The reply to a request and the fault to apply while sending it."""
        self._enter(request)
        if self.auth is not None:
            token = base64.b64encode(":".join(self.auth).encode()).decode()
            if request.headers.get("Authorization") != f"Basic {token}":
                return Reply(401, b"who are you?\n", {"WWW-Authenticate": 'Basic realm="x"'}), None
        if request.path in self._redirects:
            target, status = self._redirects[request.path]
            return Reply(status, headers={"Location": target}), None
        handler = self._handler(request.path)
        if handler is not None:
            return handler(request), None
        data = self._file(request.path)
        if data is None:
            return Reply(404, b"not found\n", {"Content-Type": "text/plain"}), None
        fault = self._take_fault(request.path) if request.method == "GET" else None
        if fault == "503":
            return Reply(503, b"try again\n", {"Content-Type": "text/plain"}), None
        if fault == "slow":
            time.sleep(self.slow_s)
        return self._ranged(data, request.headers.get("Range")), fault

    def _ranged(self, data: bytes, header: str | None) -> Reply:
        size = len(data)
        whole = Reply(200, data, {"Accept-Ranges": "bytes" if self.mode != "no_ranges" else "none"})
        match = _RANGE.match(header.strip()) if header and self.mode != "no_ranges" else None
        if match is None or match.groups() == ("", ""):
            return whole
        first, last = match.groups()
        if not first:
            if self.mode == "no_suffix":
                if self.suffix_status == 200:
                    return whole
                return Reply(self.suffix_status, headers={"Content-Range": f"bytes */{size}"})
            start, end = max(0, size - int(last)), size - 1
            if int(last) == 0 or size == 0:
                return Reply(416, headers={"Content-Range": f"bytes */{size}"})
        else:
            start, end = int(first), min(int(last) if last else size - 1, size - 1)
            if start > end:
                return Reply(416, headers={"Content-Range": f"bytes */{size}"})
        headers = {"Content-Range": f"bytes {start}-{end}/{size}", "Accept-Ranges": "bytes"}
        return Reply(206, data[start : end + 1], headers)


Projects = Mapping[str, Sequence[tuple[str, bytes]]]  # project -> [(wheel filename, bytes)]


@dataclass(frozen=True)
class LoopbackIndex:
    """A PEP 503 index on a `LoopbackServer`: its `/simple` URL and the wheels it serves."""

    server: LoopbackServer
    url: str
    files: Mapping[str, bytes]


def publish_index(server: LoopbackServer, projects: Projects, *,
                  sha256: bool = True) -> LoopbackIndex:
    """Serve `projects` on `server`: each wheel at `/files/<filename>`, and a page per project at
    `/simple/<project>/` linking its wheels (with `#sha256=` fragments, as PyPI gives them,
    unless `sha256` is False)."""
    files: dict[str, bytes] = {}
    for project, entries in projects.items():
        links = []
        for filename, data in entries:
            url = server.add_file(f"/files/{filename}", data)
            files[filename] = data
            fragment = f"#sha256={hashlib.sha256(data).hexdigest()}" if sha256 else ""
            links.append(f'<a href="{url}{fragment}">{filename}</a>')
        page = f"<html><body>{''.join(links)}</body></html>".encode()

        def reply(_request: Request, page: bytes = page) -> Reply:
            return Reply(200, page, {"Content-Type": "text/html"})

        server.add_handler(f"/simple/{project}/", reply)
    return LoopbackIndex(server, server.url("/simple"), files)


class ForwardProxy:
    """A forward HTTP proxy on 127.0.0.1 (absolute-URI GET and HEAD, as clients send to a proxy
    for http:// URLs): each request is passed on to its server with its headers, and the answer
    passed back. `seen` lists the URLs asked; `auth`, when set, is the (user, password) every
    request must carry in Proxy-Authorization (else 407)."""

    def __init__(self, auth: tuple[str, str] | None = None) -> None:
        self.auth = auth
        self.seen: list[str] = []
        self._httpd = _ProxyServer(("127.0.0.1", 0), _ProxyHandler)
        self._httpd.owner = self
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def __enter__(self) -> ForwardProxy:
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


class _ProxyServer(ThreadingHTTPServer):
    daemon_threads = True
    owner: ForwardProxy


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self._forward()

    def do_HEAD(self) -> None:
        self._forward()

    def _forward(self) -> None:
        assert isinstance(self.server, _ProxyServer)
        owner = self.server.owner
        owner.seen.append(self.path)
        if owner.auth is not None:
            token = base64.b64encode(":".join(owner.auth).encode()).decode()
            if self.headers.get("Proxy-Authorization") != f"Basic {token}":
                self.send_response(407)
                self.send_header("Proxy-Authenticate", 'Basic realm="proxy"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
        parts = urlsplit(self.path)
        conn = http.client.HTTPConnection(parts.hostname or "", parts.port or 80, timeout=30)
        headers = {k: v for k, v in self.headers.items()
                   if k.lower() not in ("proxy-authorization", "proxy-connection", "connection")}
        conn.request(self.command, parts.path + (f"?{parts.query}" if parts.query else ""),
                     headers=headers)
        resp = conn.getresponse()
        body = resp.read()
        self.send_response(resp.status, resp.reason)
        length = resp.getheader("Content-Length") if self.command == "HEAD" else str(len(body))
        for k, v in resp.getheaders():
            if k.lower() not in ("connection", "transfer-encoding", "content-length"):
                self.send_header(k, v)
        self.send_header("Content-Length", length or "0")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        conn.close()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: LoopbackServer

    def handle_error(self, request: object, client_address: object) -> None:
        if not isinstance(sys.exc_info()[1], OSError):  # a client that went away is no news
            super().handle_error(request, client_address)  # type: ignore[arg-type]


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "LoopbackServer/1"
    disable_nagle_algorithm = True  # headers and body go out as separate writes

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self._serve(head=False)

    def do_HEAD(self) -> None:
        self._serve(head=True)

    def _serve(self, head: bool) -> None:
        assert isinstance(self.server, _Server)
        owner = self.server.owner
        parts = urlsplit(self.path)
        headers = HTTPHeaderDict(list(self.headers.items()))
        request = Request(self.command, parts.path, parts.query, headers)
        reply, fault = owner.answer(request)
        try:
            self._send(owner, reply, fault, head)
        except OSError:  # the client went away (a timeout, or it closed a body it did not want)
            self.close_connection = True

    def _send(self, owner: LoopbackServer, reply: Reply, fault: Fault | None, head: bool) -> None:
        body = reply.body
        headers = dict(reply.headers)
        half = len(body) // 2
        if fault == "bad_range" and "Content-Range" in headers:
            start, end, size = map(int, re.findall(r"\d+", headers["Content-Range"]))
            headers["Content-Range"] = f"bytes {start + 1}-{end + 1}/{size}"
        if fault == "truncated" and reply.status == 206:
            body = body[:half]
        self.send_response(reply.status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if head:
            return
        if fault in ("drop", "short", "stall"):
            self._write(owner, body[:half])
            if fault == "stall":
                time.sleep(owner.slow_s)
                self._write(owner, body[half:])
                return
            self.close_connection = True
            if fault == "drop":  # reset, not a clean close: SO_LINGER 0
                self.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
                self.connection.close()
            return
        self._write(owner, body)

    def _write(self, owner: LoopbackServer, data: bytes) -> None:
        for chunk in _chunks(data, 1 << 16):
            owner._sent(len(chunk))  # before the write: the client may look as soon as it has it
            self.wfile.write(chunk)


def _chunks(data: bytes, size: int) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]
