"""Servers that would hold abifit without end: a 200 whose body never ends and names no size, a
size announced in gigabytes, a page that trickles just above the rate floor, a server that
never answers, `Retry-After: 3600`. Each request ends within its time (retries and pauses
included), every request by the command's deadline, and a download within its disk bound; the
bounds are made small here so that the test measures them in seconds, and the elapsed time and
bytes are measured."""

from __future__ import annotations

import contextlib
import os
import socket
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from abifit.remote.http import HttpClient, HttpError


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        conn: socket.socket = self.request
        conn.settimeout(30)
        request = b""
        while b"\r\n\r\n" not in request:
            got = conn.recv(4096)
            if not got:
                return
            request += got
        mode = request.split(b" ", 2)[1].decode().strip("/").split("/")[0]
        with contextlib.suppress(OSError):  # the client gave up: what is tested
            _answer(conn, mode)


def _answer(conn: socket.socket, mode: str) -> None:
    if mode == "stall":
        time.sleep(60)
        return
    if mode == "retry":
        conn.sendall(b"HTTP/1.1 503 Busy\r\nRetry-After: 3600\r\nContent-Length: 0\r\n\r\n")
        return
    if mode == "huge":
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3221225472\r\n\r\n")
        while True:
            conn.sendall(bytes(1 << 16))
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n\r\n"
    conn.sendall(head)
    if mode == "endless":
        while True:
            conn.sendall(bytes(1 << 16))
    if mode == "trickle":  # 20 KB/s: above the 8 KB/s floor, below what lengthens a request
        while True:
            conn.sendall(b"<a>x</a>" * 128)
            time.sleep(0.05)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


@contextmanager
def misbehaving() -> Iterator[str]:
    server = _Server(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def timed(call: Callable[[], object]) -> tuple[float, BaseException | None]:
    started = time.monotonic()
    try:
        call()
    except Exception as e:  # what the test looks at
        return time.monotonic() - started, e
    return time.monotonic() - started, None


def test_an_endless_body_without_a_size_stops_at_the_download_bound() -> None:
    """A 200 to a Range request whose body never ends (4 GB in 20 s before, to a deleted file):
    the download stops one chunk past its bound, an error, the copy gone."""
    with misbehaving() as base:
        client = HttpClient(timeout=5, retries=0, max_download=8 << 20)
        source = client.open(f"{base}/endless/x.whl")
        spent, error = timed(lambda: source.read_at(0, 100))
    assert isinstance(error, HttpError) and "goes on past 8,388,608 bytes" in str(error), error
    assert client.transfer.bytes_fetched <= (8 << 20) + (2 << 20)
    assert spent < 30


def test_an_announced_size_past_the_bound_is_not_fetched() -> None:
    """A 200 announcing 3 GiB (fetched whole before): past the default bound of 2 GiB, refused
    before its body is read."""
    with misbehaving() as base:
        client = HttpClient(timeout=5, retries=0)
        source = client.open(f"{base}/huge/x.whl")
        spent, error = timed(lambda: source.read_at(0, 100))
    assert isinstance(error, HttpError) and "is 3,221,225,472 bytes" in str(error), error
    assert "more than abifit downloads whole here" in str(error)
    assert client.transfer.bytes_fetched < 4 << 20 and spent < 30


def test_a_page_that_trickles_above_the_rate_floor_ends_with_the_request() -> None:
    """20 KB/s, without end (it never ended before): the request's 3 s, and the second each
    64 KiB it brought earns, then an error; not asked again."""
    with misbehaving() as base:
        client = HttpClient(timeout=2, retries=4, request_s=3)
        spent, error = timed(lambda: client.get(f"{base}/trickle/simple/"))
    assert isinstance(error, HttpError) and "and more coming" in str(error), error
    assert "the time one request may take" in str(error)
    assert 3 <= spent < 8, spent


@pytest.mark.parametrize(("mode", "said", "bound"), [
    ("stall", "gave up after", 5),  # no answer at all: 30 s a try, 163 s in all before
    ("retry", "HTTP 503", 2),  # Retry-After: 3600, longer than the request's time
])
def test_a_server_that_holds_requests_back(mode: str, said: str, bound: float) -> None:
    """With four retries, a request ends within its time, waits and pauses included."""
    with misbehaving() as base:
        client = HttpClient(timeout=2, retries=4, request_s=3)
        spent, error = timed(lambda: client.get(f"{base}/{mode}/simple/"))
    assert isinstance(error, HttpError) and said in str(error), error
    assert spent < bound, spent


def test_every_request_ends_by_the_deadline() -> None:
    """Requests one after another to a server that never answers: all end by the client's
    deadline; one asked after it is not sent."""
    with misbehaving() as base:
        client = HttpClient(timeout=1, retries=1, request_s=60, deadline_s=2.5)
        started = time.monotonic()
        urls = [f"{base}/stall/{n}" for n in range(4)]
        errors = [timed(lambda url=url: client.get(url))[1] for url in urls]  # type: ignore[misc]
        spent = time.monotonic() - started
    assert all(isinstance(e, HttpError) for e in errors), errors
    assert "--deadline 2.5 s" in str(errors[-1]) and "not asked" in str(errors[-1])
    assert spent < 4.5, spent


@pytest.mark.parametrize("deadline", ["2", "abc", "-1"])
def test_the_deadline_of_a_command(deadline: str, tmp_path: object) -> None:
    """`check --deadline 2` against an index that never answers: exit 2 within a few seconds,
    the error naming the deadline; a deadline that is not a number of seconds is a usage error."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = "/dev/null"
    with misbehaving() as base:
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "abifit", "check", "somepkg==1.0",
                               "--index-url", f"{base}/stall/simple", "--no-cache",
                               "--deadline", deadline], capture_output=True, text=True,
                              env=env, timeout=120, check=False)
        spent = time.monotonic() - started
    assert done.returncode == 2, done.stderr
    if deadline == "2":
        assert "--deadline 2 s" in done.stderr and spent < 15, (spent, done.stderr)
    else:
        assert "expected a number of seconds" in done.stderr
