"""HTTP byte sources against a real loopback server: ranges, fallbacks, faults, counters."""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import re
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from abifit.errors import FormatError
from abifit.remote.http import HostSupport, HttpClient, HttpError, tls_context
from httpserver import FAULTS, Fault, LoopbackServer, Mode, Reply, Request


def _test_file() -> bytes:
    real = Path("/usr/lib/x86_64-linux-gnu/libstdc++.so.6")
    if real.is_file():
        return real.read_bytes()
    return random.Random(1).randbytes(2 << 20)


DATA = _test_file()
SIZE = len(DATA)
PATH = "/lib.so"

MODES = [
    pytest.param("ranges", 416, id="ranges"),
    pytest.param("no_ranges", 416, id="no_ranges"),
    pytest.param("no_suffix", 416, id="no_suffix-416"),
    pytest.param("no_suffix", 200, id="no_suffix-200"),
]


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    """A loopback server with the test file at /lib.so; slow faults outlast the client timeout."""
    with LoopbackServer(slow_s=0.9) as s:
        s.add_file(PATH, DATA)
        yield s


def _client(*, retries: int = 3, max_concurrent: int = 8) -> HttpClient:
    return HttpClient(timeout=0.5, retries=retries, backoff=0.01, max_concurrent=max_concurrent)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(("mode", "suffix_status"), MODES)
def test_random_ranges_and_suffixes_read_the_file_exactly(
    server: LoopbackServer, mode: Mode, suffix_status: int
) -> None:
    """Random ranges and suffixes give the file's bytes; what it costs depends on the server."""
    server.mode, server.suffix_status = mode, suffix_status
    client = _client()
    src = client.open(server.url(PATH))
    rng = random.Random(7)
    asked = 0
    for n in (65536, 1, 22, 4096, SIZE + 10):
        offset, tail = src.read_suffix(n)
        assert (offset, tail) == (max(0, SIZE - n), DATA[-n:])
        asked += len(tail)
    for _ in range(30):
        length = rng.randint(1, 70_000)
        offset = rng.randrange(SIZE - length + 1)
        assert src.read_at(offset, length) == DATA[offset : offset + length]
        asked += length
    assert src.size == SIZE
    assert client.transfer.requests == server.requests
    if mode == "ranges":
        assert (client.transfer.bytes_fetched, client.transfer.requests) == (asked, 35)
        assert client.host_support(src.name) == HostSupport(ranges=True, suffix_ranges=True)
    elif mode == "no_ranges":  # the refused suffix, then one range answered by the whole file
        assert (client.transfer.bytes_fetched, client.transfer.requests) == (SIZE, 2)
        assert client.host_support(src.name) == HostSupport(ranges=False, suffix_ranges=False)
    else:  # one refused suffix range, then absolute ranges only
        assert (client.transfer.bytes_fetched, client.transfer.requests) == (asked, 36)
        assert client.host_support(src.name) == HostSupport(ranges=True, suffix_ranges=False)
        assert sum(1 for seen in server.log if seen.range and "=-" in seen.range) == 1


@pytest.mark.parametrize(("mode", "suffix_status"), MODES)
def test_host_memory_spares_the_next_file_a_failed_request(
    server: LoopbackServer, mode: Mode, suffix_status: int
) -> None:
    """Once a host has shown what it supports, the next file's suffix costs one request (two
    when the suffix must become an absolute range and the size is not given)."""
    server.mode, server.suffix_status = mode, suffix_status
    client = _client()
    client.open(server.url(PATH)).read_suffix(100)
    other = DATA[::-1]
    for size, cost in ((SIZE, 1), (None, 2 if mode == "no_suffix" else 1)):  # + HEAD for the size
        before = client.transfer.requests
        url = server.add_file(f"/other-{size}.so", other)
        assert client.open(url, size=size).read_suffix(100) == (SIZE - 100, other[-100:])
        assert client.transfer.requests - before == cost


def test_a_4k_range_costs_4k_with_ranges(server: LoopbackServer) -> None:
    """With ranges, a 4 KiB read is one request for 4 KiB; the server sends no more."""
    client = _client()
    assert client.open(server.url(PATH)).read_at(12345, 4096) == DATA[12345 : 12345 + 4096]
    assert (client.transfer.bytes_fetched, client.transfer.requests) == (4096, 1)
    assert server.bytes_sent == 4096
    assert server.log[0].range == "bytes=12345-16440"


def test_without_ranges_the_file_is_fetched_once(server: LoopbackServer) -> None:
    """Without ranges, the first read fetches the whole file once; later reads are local."""
    server.mode = "no_ranges"
    client = _client()
    src = client.open(server.url(PATH))
    for offset in range(0, SIZE - 4096, SIZE // 10):
        assert src.read_at(offset, 4096) == DATA[offset : offset + 4096]
    assert (client.transfer.bytes_fetched, client.transfer.requests) == (SIZE, 1)
    assert server.count() == 1
    src.close()


@pytest.mark.parametrize("fault", FAULTS)
def test_a_fault_in_a_range_response_is_retried(server: LoopbackServer, fault: Fault) -> None:
    """Each fault, once, costs one more request; the read still returns the file's bytes."""
    server.inject(fault)
    client = _client()
    assert client.open(server.url(PATH)).read_at(100_000, 8192) == DATA[100_000:108_192]
    assert client.transfer.requests == server.count() == 2
    _assert_partial_body_counted(client.transfer.bytes_fetched - 8192, fault, 8192)


@pytest.mark.parametrize("fault", ["drop", "short", "503", "slow", "stall"])
def test_a_fault_in_the_full_download_is_retried(server: LoopbackServer, fault: Fault) -> None:
    """A download that breaks off is started again; the partial body is counted too."""
    server.mode = "no_ranges"
    server.inject(fault)
    client = _client()
    src = client.open(server.url(PATH), sha256=hashlib.sha256(DATA).hexdigest())
    assert src.read_at(SIZE - 5, 5) == DATA[-5:]
    assert client.transfer.requests == server.count() == 2
    _assert_partial_body_counted(client.transfer.bytes_fetched - SIZE, fault, SIZE)


def _assert_partial_body_counted(extra: int, fault: Fault, body: int) -> None:
    """The failed answer's bytes that reached the client were counted, and no more."""
    if fault == "drop":  # a reset may discard what was in flight
        assert 0 <= extra <= body // 2
    else:
        partial = {"short": body // 2, "truncated": body // 2, "stall": body // 2,
                   "bad_range": body, "503": len(b"try again\n"), "slow": 0}
        assert extra == partial[fault]


def test_a_fault_in_a_suffix_response_is_retried(server: LoopbackServer) -> None:
    """A suffix range whose answer is short is asked again and validated the same way."""
    server.inject("truncated")
    client = _client()
    assert client.open(server.url(PATH)).read_suffix(1000) == (SIZE - 1000, DATA[-1000:])
    assert client.transfer.requests == 2


def test_a_wrong_content_range_twice_is_an_error(server: LoopbackServer) -> None:
    """A wrong Content-Range is retried once; the second one is an error naming the header."""
    server.inject("bad_range", times=2)
    client = _client()
    url = server.url(PATH)
    with pytest.raises(HttpError, match=re.escape(url) + r": wrong Content-Range 'bytes 11-20/"):
        client.open(url).read_at(10, 10)
    assert server.count() == 2


def test_persistent_503_gives_up_after_bounded_retries(server: LoopbackServer) -> None:
    """A server that keeps answering 503 is asked retries + 1 times, then it is an error."""
    server.inject("503", times=10)
    client = _client(retries=2)
    with pytest.raises(HttpError, match=r"HTTP 503 Service Unavailable; gave up after 3") as e:
        client.open(server.url(PATH)).read_at(0, 10)
    assert e.value.status == 503
    assert server.count() == 3


def test_429_is_retried_after_the_retry_after_pause(server: LoopbackServer) -> None:
    """429 with Retry-After: 1 is asked again after a second (longer than the backoff)."""
    answers = [Reply(429, b"slow down", {"Retry-After": "1"}), Reply(200, b"ok")]
    server.add_handler("/simple/", lambda request: answers.pop(0), prefix=True)
    client = _client()
    started = time.monotonic()
    assert client.get(server.url("/simple/x/")).body == b"ok"
    assert time.monotonic() - started >= 1
    assert client.transfer.requests == 2


def test_not_found_is_one_line_naming_the_url_and_not_retried(server: LoopbackServer) -> None:
    """A 404 is an HttpError at once: `<url>: not found (HTTP 404 Not Found)`."""
    client = _client()
    url = server.url("/missing.whl")
    with pytest.raises(HttpError) as e:
        client.open(url).read_suffix(100)
    assert str(e.value) == f"{url}: not found (HTTP 404 Not Found)"
    assert e.value.status == 404
    with pytest.raises(HttpError, match="not found"):
        client.get(url)
    assert client.transfer.requests == server.requests == 2


def test_connection_refused_fails_quickly_after_bounded_retries() -> None:
    """A closed port is tried retries + 1 times with short backoff, then one error line."""
    client = _client(retries=2)
    url = f"http://127.0.0.1:{_closed_port()}/x.whl"
    started = time.monotonic()
    with pytest.raises(HttpError) as e:
        client.open(url).read_at(0, 1)
    assert time.monotonic() - started < 2
    assert str(e.value) == f"{url}: cannot connect (Connection refused); gave up after 3 attempts"
    assert e.value.status is None
    assert client.transfer.requests == 3


def test_sha256_is_checked_on_the_full_download(server: LoopbackServer) -> None:
    """Without ranges the copy must match the expected sha256; a mismatch is an error."""
    server.mode = "no_ranges"
    client = _client()
    with pytest.raises(HttpError, match=r"sha256 mismatch: downloaded [0-9a-f]{64}, expected 0+$"):
        client.open(server.url(PATH), sha256="0" * 64).read_at(0, 4)
    good = client.open(server.url(PATH), sha256=hashlib.sha256(DATA).hexdigest().upper())
    assert good.read_at(0, 4) == DATA[:4]


def test_a_given_size_the_server_contradicts_is_an_error(server: LoopbackServer) -> None:
    """The size from the index must be the size the server reports."""
    client = _client()
    with pytest.raises(HttpError, match=f"the server has {SIZE} bytes, expected {SIZE + 1}"):
        client.open(server.url(PATH), size=SIZE + 1).read_suffix(10)


def test_reads_past_the_end_are_format_errors(server: LoopbackServer) -> None:
    """The ByteSource contract: a read outside the file raises FormatError, known size or not."""
    client = _client()
    with pytest.raises(FormatError, match=f"cannot read 20 bytes at offset {SIZE - 10:#x}"):
        client.open(server.url(PATH)).read_at(SIZE - 10, 20)
    with pytest.raises(FormatError):
        client.open(server.url(PATH)).read_at(SIZE + 10, 20)
    before = client.transfer.requests
    src = client.open(server.url(PATH), size=SIZE)
    with pytest.raises(FormatError):
        src.read_at(SIZE, 1)
    assert src.read_at(SIZE, 0) == b""
    assert client.transfer.requests == before


def test_size_comes_from_head_unless_given(server: LoopbackServer) -> None:
    """Asking for the size alone costs one HEAD; a given size costs nothing."""
    client = _client()
    assert client.open(server.url(PATH)).size == SIZE
    assert server.count("HEAD") == server.requests == 1
    assert client.open(server.url(PATH), size=SIZE).size == SIZE
    assert server.requests == 1


@pytest.mark.parametrize(("mode", "suffix_status"), MODES)
def test_short_and_empty_files_have_whole_suffixes(
    server: LoopbackServer, mode: Mode, suffix_status: int
) -> None:
    """A suffix longer than the file is the whole file at offset 0; an empty file's is empty."""
    server.mode, server.suffix_status = mode, suffix_status
    client = _client()
    small = server.add_file("/small.whl", DATA[:1000])
    assert client.open(small).read_suffix(65536) == (0, DATA[:1000])
    empty = client.open(server.add_file("/empty.whl", b""))
    assert empty.read_suffix(65536) == (0, b"")
    assert empty.size == 0


@pytest.mark.parametrize("mode", ["ranges", "no_ranges"])
def test_parallel_reads_are_exact_and_bounded(server: LoopbackServer, mode: Mode) -> None:
    """8 threads reading at once get the right bytes; the server never sees more than N."""
    server.mode, server.delay_s = mode, 0.03
    client = _client(max_concurrent=3)
    src = client.open(server.url(PATH))
    rng = random.Random(3)
    reads = [(rng.randrange(SIZE - 5000), rng.randint(1, 5000)) for _ in range(48)]
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda r: src.read_at(*r), reads))
    assert got == [DATA[o : o + n] for o, n in reads]
    assert 2 <= server.max_active <= 3
    if mode == "no_ranges":  # however many threads saw the 200, one body was kept
        assert client.transfer.bytes_fetched == SIZE


def test_redirects_are_followed_and_the_target_remembered(server: LoopbackServer) -> None:
    """An index host redirecting to a CDN: the hop counts, later reads go straight to the CDN,
    and what the CDN supports is remembered for the CDN's host."""
    with LoopbackServer(mode="no_suffix") as cdn:
        target = cdn.add_file("/files/lib.so", DATA)
        server.add_redirect("/pkg/lib.so", target)
        client = _client()
        src = client.open(server.url("/pkg/lib.so"))
        assert src.read_suffix(100) == (SIZE - 100, DATA[-100:])
        assert src.read_at(5, 5) == DATA[5:10]
        assert src.name == server.url("/pkg/lib.so")
        assert (server.requests, cdn.requests, client.transfer.requests) == (1, 3, 4)
        assert client.host_support(target) == HostSupport(ranges=True, suffix_ranges=False)
        assert client.host_support(src.name) == HostSupport()
        assert client.get(src.name).url == target


def test_get_returns_a_decoded_index_page(server: LoopbackServer) -> None:
    """`get` sends the caller's headers, decodes gzip, and counts the bytes on the wire."""
    page = json.dumps({"meta": {"api-version": "1.1"}, "files": []}).encode() * 50
    packed = gzip.compress(page)
    seen: list[Request] = []

    def simple(request: Request) -> Reply:
        seen.append(request)
        return Reply(200, packed, {"Content-Type": "application/vnd.pypi.simple.v1+json",
                                   "Content-Encoding": "gzip"})

    server.add_handler("/simple/", simple, prefix=True)
    client = _client()
    resp = client.get(server.url("/simple/six/"),
                      {"Accept": "application/vnd.pypi.simple.v1+json"})
    assert (resp.status, resp.body, resp.url) == (200, page, server.url("/simple/six/"))
    assert resp.headers["content-type"] == "application/vnd.pypi.simple.v1+json"
    assert seen[0].headers["accept"] == "application/vnd.pypi.simple.v1+json"
    assert "gzip" in (seen[0].headers.get("accept-encoding") or "")
    assert seen[0].headers["user-agent"].startswith("abifit/")
    assert client.transfer.bytes_fetched == len(packed)


@pytest.mark.network
def test_pypi_wheel_ends_with_a_zip_end_record() -> None:
    """The last 64 KiB of a real wheel on files.pythonhosted.org end with a zip EOCD record."""
    client = HttpClient(timeout=10, retries=1, backoff=0.5)
    try:
        index = client.get("https://pypi.org/simple/six/",
                           {"Accept": "application/vnd.pypi.simple.v1+json"})
    except HttpError as e:
        if e.status is None:
            pytest.skip(f"network unreachable: {e}")
        raise
    wheels = [f for f in json.loads(index.body)["files"] if f["filename"].endswith(".whl")]
    wheel = wheels[-1]
    src = client.open(wheel["url"], size=wheel.get("size"),
                      sha256=wheel.get("hashes", {}).get("sha256"))
    offset, tail = src.read_suffix(64 << 10)
    assert offset + len(tail) == src.size
    end = tail.rfind(b"PK\x05\x06")
    assert end >= 0
    assert end + 22 + int.from_bytes(tail[end + 20 : end + 22], "little") == len(tail)


def test_an_index_page_is_bounded_after_decompression(server: LoopbackServer) -> None:
    """A page whose body inflates past the limit (a gzip bomb: 64 MiB of zeros in ~64 KiB) is
    refused with one error, not read into memory whole."""
    bomb = gzip.compress(b"\0" * (64 << 20), compresslevel=9)
    server.add_handler("/simple/bomb/", lambda _r: Reply(200, bomb, {
        "Content-Type": "text/html", "Content-Encoding": "gzip"}))
    server.add_handler("/simple/ok/", lambda _r: Reply(200, b"<html></html>",
                                                       {"Content-Type": "text/html"}))
    client = HttpClient(timeout=5, retries=0, max_page=1 << 20)
    assert client.get(server.url("/simple/ok/")).body == b"<html></html>"
    with pytest.raises(HttpError, match="larger than 1,048,576 bytes"):
        client.get(server.url("/simple/bomb/"))
    assert client.transfer.bytes_fetched < len(bomb) + 65536


def test_a_full_download_stops_past_the_announced_size(server: LoopbackServer) -> None:
    """A server without ranges whose body runs past the size the index announced is read
    only one byte past that size, then refused."""
    server.mode = "no_ranges"
    client = _client()
    announced = 4096
    with pytest.raises(HttpError, match=r"the server reports|expected 4096"):
        client.open(server.url(PATH), size=announced).read_at(0, 4)
    assert client.transfer.bytes_fetched < SIZE


# ---------------------------------------------------------------------------------------------
# TLS: one context for a client's connections


@pytest.fixture(scope="module")
def tls_certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for `localhost` and its key, made by the openssl command."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command")
    root = tmp_path_factory.mktemp("tls")
    key, cert = root / "key.pem", root / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                    str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost"], check=True, capture_output=True)
    return cert, key


def _handshake(context: ssl.SSLContext, cert: Path, key: Path) -> str | None:
    """Connect with `context`, as `localhost`, to a TLS server on loopback that holds `cert` and
    offers HTTP/2 before HTTP/1.1; the protocol ALPN selected."""
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert, key)
    server.set_alpn_protocols(["h2", "http/1.1"])
    with socket.create_server(("127.0.0.1", 0)) as listener:
        def accept() -> None:
            conn, _ = listener.accept()
            with conn:
                try:
                    with server.wrap_socket(conn, server_side=True) as tls:
                        tls.recv(1)
                except (ssl.SSLError, OSError):  # the client refused the certificate
                    pass

        thread = threading.Thread(target=accept)
        thread.start()
        try:
            with socket.create_connection(listener.getsockname(), timeout=10) as raw, \
                    context.wrap_socket(raw, server_hostname="localhost") as tls:
                return tls.selected_alpn_protocol()
        finally:
            thread.join(timeout=10)


def test_one_tls_context_verifies_as_urllib3_does_and_keeps_its_alpn(
        tls_certificate: tuple[Path, Path]) -> None:
    """A client's connections share one TLS context: it verifies certificates and host names
    against the system's authorities (those a default context loads), so a self-signed server
    is refused; and setting its ALPN protocols again, as urllib3 does at each connection,
    changes nothing: it still offers HTTP/1.1 alone (a server preferring HTTP/2 picks
    HTTP/1.1)."""
    cert, key = tls_certificate
    context = tls_context()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    authorities = {bytes(c) for c in context.get_ca_certs(binary_form=True)}
    default = ssl.create_default_context().get_ca_certs(binary_form=True)
    assert authorities == {bytes(c) for c in default}
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(context, cert, key)
    context.load_verify_locations(cafile=str(cert))
    context.set_alpn_protocols(["h2"])
    assert _handshake(context, cert, key) == "http/1.1"

    client = HttpClient()
    pools = client._pool_manager("https://pypi.org/simple/")
    first = pools.connection_from_host("pypi.org", 443, "https").conn_kw.get("ssl_context")
    second = pools.connection_from_host("files.pythonhosted.org", 443, "https")
    assert isinstance(first, ssl.SSLContext) and second.conn_kw.get("ssl_context") is first
    assert first.verify_mode == ssl.CERT_REQUIRED and first.check_hostname
