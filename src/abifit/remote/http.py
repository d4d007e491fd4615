"""HTTP: whole documents for index pages, and remote files as byte sources read by Range requests.

`HttpClient` owns one urllib3 `PoolManager` (connections are reused across requests and threads), a
bound on concurrent requests, retries, the `Transfer` counters, and a memory of what each host has
shown it supports. `HttpClient.open(url)` returns an `HttpSource`, a `ByteSource` whose reads
become requests:

- `read_at` asks for an absolute range (`Range: bytes=a-b`), `read_suffix` for a suffix range
  (`bytes=-n`: a zip's central directory is at the end of a file whose size is not known yet);
- every 206 is checked: its `Content-Range: bytes a-b/total` must be the range asked for (a wrong
  one is retried once, then an error) and its body must hold b-a+1 bytes (a short one is retried);
- a host that answers a Range request with 200 and the whole body does not do ranges: the file is
  streamed once to an anonymous temporary file, checked against the expected sha256 when one is
  known, and every later read is served from that file; a whole file that comes in one answer
  (a small file, a suffix longer than it) is checked against the sha256 too;
- every answer must name the version of the file the first one named (ETag, else
  Last-Modified): a file that changes on the server while it is read is an error;
- a host that answers a suffix range with 416, or with 200, does not do suffix ranges: the suffix
  becomes an absolute range once the size is known (given, from that answer, or from HEAD).

Every request has a connect timeout and a read timeout (`timeout`, for each wait on the socket),
and every body a floor on its average rate (`min_rate`, once `timeout` has passed), so that a
server that trickles a byte at a time is given up too. Time is bounded whatever a server does:
a request, its retries and pauses included, ends within `request_s` (`REQUEST_S`, or twice the
timeout when that is longer) plus a second for every `EARNED_RATE` bytes its bodies brought (a
body that keeps coming at that rate is never cut, one that trickles or never ends is), a
`Retry-After` longer than what is left is not waited for, and every request of the client ends
by its `deadline_s` (`DEADLINE_S`, the command's `--deadline`). Space is bounded too: an index page
is read up to `max_page` bytes after decompression, a whole-file download up to one byte past the
size announced and never past `max_download` (`MAX_DOWNLOAD`) or the free space of the temporary
directory (less `DISK_RESERVE`): a file announced larger is refused before its body is read.

Connection errors, timeouts, 429 and 5xx are retried with exponential backoff, a bounded number of
times (a body too slow: once more); other 4xx are not. A host that could not be connected to
(refused, unknown, no answer in time) once the retries are spent is not asked again by that
client: later requests to it fail at once. Every failure is an `HttpError`, one line:
`<url>: <problem>`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import IO, TYPE_CHECKING, TypeVar
from urllib.parse import urljoin, urlsplit

from abifit.errors import AbifitError, FormatError
from abifit.formats.sources import Closing, check_range
from abifit.version import __version__

if TYPE_CHECKING:
    import ssl

    import urllib3

    from abifit.remote.network import Network

# urllib3 (and with it http.client and ssl) is imported by the first request, not with this
# module: a run that the cache answers whole never pays for it.

_CHUNK = 1 << 20
MAX_PAGE = 64 << 20  # an index page larger than this, decompressed, is refused
MIN_RATE = 8 << 10  # bytes a second: a body slower than this, after the timeout, is given up
REQUEST_S = 60.0  # seconds a request may take, retries and pauses included, beyond what it earns
EARNED_RATE = 64 << 10  # bytes a second: each such many received lengthen a request's time by 1 s
DEADLINE_S = 900.0  # seconds all of a client's requests must end within (a command's --deadline)
MAX_DOWNLOAD = 2 << 30  # a whole-file download (a host without ranges) of more is refused
DISK_RESERVE = 256 << 20  # free space a download leaves in the temporary directory
_DRAIN_LIMIT = 1 << 16
_MAX_REDIRECTS = 10
_MAX_RETRY_AFTER_S = 30.0
_NOT_FOUND = (404, 410)
_EXPIRED = (401, 403, 404, 410)
_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)", re.ASCII)
_UNSATISFIED = re.compile(r"bytes\s+\*/(\d+)", re.ASCII)
_IDENTITY = {"Accept-Encoding": "identity"}

T = TypeVar("T")


class HttpError(AbifitError):
    """A URL that could not be fetched: unreachable, refused, missing, or answered wrongly.

    `status` is the HTTP status when the server's answer was the problem, None when the network
    failed or the answer was malformed.
    """

    def __init__(self, url: str, problem: str, status: int | None = None) -> None:
        from abifit.remote.network import redact

        self.url = redact(url)
        self.problem = redact(problem)
        self.status = status
        super().__init__(f"{self.url}: {self.problem}")


@dataclass
class Transfer:
    """What a client has transferred: requests sent (each redirect hop counts) and body bytes
    received (bodies that broke off included). Safe to update from several threads."""

    bytes_fetched: int = 0
    requests: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False,
                                  compare=False)

    def add(self, *, bytes_fetched: int = 0, requests: int = 0) -> None:
        with self._lock:
            self.bytes_fetched += bytes_fetched
            self.requests += requests


@dataclass(frozen=True, slots=True)
class HostSupport:
    """What a host has shown about Range requests; None until it has shown it."""

    ranges: bool | None = None
    suffix_ranges: bool | None = None


@dataclass(frozen=True, slots=True)
class Response:
    """A whole response: `headers` is case-insensitive, `url` the one that answered (after
    redirects), `body` decoded from any Content-Encoding."""

    status: int
    headers: Mapping[str, str]
    body: bytes
    url: str


class _Retry(AbifitError):
    """An attempt that failed in a way another attempt may not (`once`: retry only once).

    Internal: `HttpClient._retrying` catches every one, and retries or raises an HttpError."""

    def __init__(
        self, problem: str, *, status: int | None = None, once: bool = False,
        wait_s: float | None = None, unreachable: str | None = None,
    ) -> None:
        super().__init__(problem)
        self.problem = problem
        self.status = status
        self.once = once
        self.wait_s = wait_s
        self.unreachable = unreachable  # the host that could not be connected to


@dataclass(slots=True)
class _Clock:
    """The time one request may still take: until `ends`, which what its bodies bring pushes
    later, and never past `command_ends`, the client's deadline."""

    started: float
    ends: float
    command_ends: float | None

    def earn(self, received: int) -> None:
        self.ends += received / EARNED_RATE

    def left(self) -> float:
        ends = self.ends if self.command_ends is None else min(self.ends, self.command_ends)
        return ends - time.monotonic()

    def gave_up(self, deadline_s: float | None) -> str:
        """Why the request ends now, for its error."""
        spent = time.monotonic() - self.started
        if self.command_ends is not None and self.command_ends <= self.ends:
            return (f"gave up after {spent:.0f} s: the time for this command's requests "
                    f"(--deadline {deadline_s:g} s) is spent")
        return (f"gave up after {spent:.0f} s, the time one request may take with its retries "
                "(more while its body keeps coming)")


def tls_context(cert: str | None = None, client_cert: str | None = None,
                verify: bool = True) -> ssl.SSLContext:
    """The TLS context urllib3 makes for each connection of its own (certificates and host
    names verified, its protocol versions and ciphers, HTTP/1.1 offered by ALPN) with the
    system's certificate authorities loaded, as it loads them: made once and shared by a
    client's connections. Loading the authorities costs 25-35 ms of CPU with OpenSSL 3, and a
    remote read opens eight or nine connections at once.

    urllib3 sets the ALPN protocols of the context again at each connection. On a context that
    threads share, that frees the protocols another thread's new connection may be copying
    (CPython issue 141012), so this context's are set once, here, and later calls change
    nothing."""
    import os
    import ssl

    from urllib3.util.ssl_ import ALPN_PROTOCOLS, create_urllib3_context

    context = create_urllib3_context()
    if not verify:  # pip's trusted-host
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif cert is None:
        context.load_default_certs()
    else:  # pip's cert: these authorities instead of the system's
        try:
            if os.path.isdir(cert):
                context.load_verify_locations(capath=cert)
            else:
                context.load_verify_locations(cafile=cert)
        except (OSError, ssl.SSLError) as e:
            raise AbifitError(f"cannot use the certificate authorities in {cert} (pip's "
                              f"cert setting): {e.strerror or e}") from e
    if client_cert is not None:
        try:
            context.load_cert_chain(client_cert)
        except (OSError, ssl.SSLError) as e:
            raise AbifitError(f"cannot use the client certificate {client_cert} (pip's "
                              f"client-cert setting): {e.strerror or e}") from e
    context.set_alpn_protocols(ALPN_PROTOCOLS)
    context.set_alpn_protocols = _alpn_set_once  # type: ignore[method-assign, assignment]
    return context


def _alpn_set_once(protocols: object) -> None:
    """`set_alpn_protocols` of a shared context: they were set when it was made."""


class HttpClient(Closing):
    """Fetches over one connection pool with bounded concurrency, retries and counters."""

    def __init__(
        self,
        *,
        timeout: float = 30.0,
        retries: int = 4,
        backoff: float = 0.5,
        max_concurrent: int = 8,
        user_agent: str = f"abifit/{__version__}",
        max_page: int = MAX_PAGE,
        min_rate: int = MIN_RATE,
        network: Network | None = None,
        request_s: float | None = None,
        deadline_s: float | None = DEADLINE_S,
        max_download: int = MAX_DOWNLOAD,
    ) -> None:
        """`network` (proxies, credentials, certificates, pip's timeout and retries, which
        replace `timeout` and `retries`): how the hosts are reached (`remote.network`).
        `request_s` (default: `REQUEST_S`, or twice the timeout when longer), `deadline_s`
        (None: no deadline) and `max_download`: the bounds in the module's docstring."""
        from abifit.remote.network import Network

        self.network = network or Network()
        timeout = self.network.timeout if self.network.timeout is not None else timeout
        retries = self.network.retries if self.network.retries is not None else retries
        if retries < 0 or max_concurrent < 1:
            raise ValueError("retries must be >= 0 and max_concurrent >= 1")
        self.transfer = Transfer()
        self._max_page = max_page
        self._min_rate = min_rate
        self._request_s = request_s if request_s is not None else max(REQUEST_S, 2 * timeout)
        self._deadline_s = deadline_s
        self._ends = None if deadline_s is None else time.monotonic() + deadline_s
        self._max_download = max_download
        self._local = threading.local()  # the `_Clock` of the request this thread is making
        self._timeout_s = timeout
        self._retries = retries
        self._backoff = backoff
        self._slots = threading.BoundedSemaphore(max_concurrent)
        self._headers = {"User-Agent": user_agent}
        self._max_concurrent = max_concurrent
        # made by the first request of each way out: (proxy or None, certificate checked)
        self._pools: dict[tuple[str | None, bool], urllib3.PoolManager] = {}
        self._pool_lock = threading.Lock()
        self._credentials: dict[str, tuple[str, str] | None] = {}  # by `_host`
        self._keyring_asked: set[str] = set()  # hosts the keyring was asked for, after a 401
        self._hosts: dict[str, HostSupport] = {}
        self._hosts_lock = threading.Lock()
        self._unreachable: dict[str, str] = {}  # host -> why no connection was made

    def get(self, url: str, headers: Mapping[str, str] | None = None,
            allow: tuple[int, ...] = ()) -> Response:
        """The whole response to a GET (an index page); 4xx and exhausted retries raise, but
        for the statuses in `allow` (304 to a conditional request)."""
        import urllib3

        asked = {**urllib3.make_headers(accept_encoding=True), **(headers or {})}

        def attempt() -> Response:
            resp = self._send("GET", url, asked, allow)
            parts: list[bytes] = []
            got = self._receive(resp, parts.append, decode=True, limit=self._max_page + 1)
            if got > self._max_page:
                self._drop(resp)
                raise HttpError(url, f"the page is larger than {self._max_page:,} bytes "
                                "(after decompression): not read")
            return Response(resp.status, urllib3.HTTPHeaderDict(resp.headers), b"".join(parts),
                            _final_url(url, resp))

        return self._retrying(url, attempt)

    def open(self, url: str, *, size: int | None = None, sha256: str | None = None) -> HttpSource:
        """A byte source over `url`. Nothing is requested until the first read.

        `size` (from the index) must match what the server reports; `sha256` is checked when the
        whole file is downloaded (a host without ranges), since ranges alone cannot be hashed.
        """
        return HttpSource(self, url, size=size, sha256=sha256)

    def host_support(self, url: str) -> HostSupport:
        """What the host of `url` has shown about Range requests so far."""
        with self._hosts_lock:
            return self._hosts.get(_host(url), HostSupport())

    def close(self) -> None:
        with self._pool_lock:
            for pool in self._pools.values():
                pool.clear()

    def sibling(self) -> HttpClient:
        """A client of its own (pools, counters) that reaches the hosts as this one does: the
        same network settings and credentials."""
        other = HttpClient(timeout=self._timeout_s, retries=self._retries,
                           backoff=self._backoff, max_concurrent=self._max_concurrent,
                           user_agent=self._headers["User-Agent"], max_page=self._max_page,
                           min_rate=self._min_rate, network=self.network,
                           request_s=self._request_s, deadline_s=self._deadline_s,
                           max_download=self._max_download)
        other._ends = self._ends  # the same command: the same deadline
        with self._pool_lock:
            other._credentials.update(self._credentials)
        return other

    def download_bound(self) -> int:
        """The most bytes a whole-file download may bring: `max_download`, or the free space of
        the temporary directory less `DISK_RESERVE` when that is less."""
        import shutil

        try:
            free = shutil.disk_usage(tempfile.gettempdir()).free - DISK_RESERVE
        except OSError:
            return self._max_download
        return max(0, min(self._max_download, free))

    def add_credentials(self, url: str) -> str:
        """`url` without the credentials it holds, which are kept for its host: every later
        request to that host sends them."""
        from abifit.remote.network import split_credentials

        clean, credentials = split_credentials(url)
        if credentials is not None:
            with self._pool_lock:
                self._credentials[_host(clean)] = credentials
        return clean

    def _authorization(self, url: str) -> dict[str, str]:
        """The Authorization header for a request to `url`: the credentials kept for its
        host, else those of the netrc file (looked up once per host)."""
        from abifit.remote.network import basic_auth

        key = _host(url)
        with self._pool_lock:
            if key not in self._credentials:
                self._credentials[key] = self.network.netrc_credentials(
                    urlsplit(url).hostname or "")
            credentials = self._credentials[key]
        return {"Authorization": basic_auth(credentials)} if credentials else {}

    def _from_keyring(self, url: str) -> bool:
        """After a 401: whether the keyring gives credentials for the host that it has not
        given before (they are kept for the host); asked once per host."""
        key = _host(url)
        with self._pool_lock:
            if key in self._keyring_asked:
                return False
            self._keyring_asked.add(key)
            known = self._credentials.get(key)
        found = self.network.keyring_credentials(url, known[0] if known else None)
        if found is None or found == known:
            return False
        with self._pool_lock:
            self._credentials[key] = found
        return True

    def _pool_manager(self, url: str) -> urllib3.PoolManager:
        """The connection pool for `url`, made on first use: through the proxy the network
        settings give it, else direct; with one TLS context for all its connections (see
        `tls_context`), which checks certificates unless the host is a trusted one."""
        import urllib3

        from abifit.remote.network import split_credentials

        proxy = self.network.proxy_for(url)
        verify = not self.network.trusted(url)
        with self._pool_lock:
            pool = self._pools.get((proxy, verify))
            if pool is None:
                context = tls_context(self.network.cert, self.network.client_cert, verify)
                if proxy is None:
                    pool = urllib3.PoolManager(maxsize=self._max_concurrent,
                                               ssl_context=context)
                else:
                    clean, credentials = split_credentials(proxy)
                    headers = (urllib3.make_headers(proxy_basic_auth=":".join(credentials))
                               if credentials else None)
                    pool = urllib3.ProxyManager(clean, maxsize=self._max_concurrent,
                                                ssl_context=context, proxy_headers=headers)
                self._pools[(proxy, verify)] = pool
            return pool

    # -- machinery shared with HttpSource --------------------------------------------------------

    def _learn(self, url: str, *, ranges: bool | None = None,
               suffix_ranges: bool | None = None) -> None:
        """Remember what the host that answered `url` (after redirects) supports."""
        with self._hosts_lock:
            known = self._hosts.get(_host(url), HostSupport())
            if ranges is not None:
                known = replace(known, ranges=ranges)
            if suffix_ranges is not None:
                known = replace(known, suffix_ranges=suffix_ranges)
            self._hosts[_host(url)] = known

    def _retrying(self, url: str, attempt: Callable[[], T]) -> T:
        """Run `attempt` holding a concurrency slot, again after a pause while it asks for that
        and the request's time (`_Clock`) allows."""
        now = time.monotonic()
        clock = _Clock(now, now + self._request_s, self._ends)
        outer = getattr(self._local, "clock", None)
        self._local.clock = clock
        try:
            return self._attempts(url, attempt, clock)
        finally:
            self._local.clock = outer

    def _attempts(self, url: str, attempt: Callable[[], T], clock: _Clock) -> T:
        number, wrong_once = 0, False
        if clock.left() <= 0:
            raise HttpError(url, f"not asked: {clock.gave_up(self._deadline_s)}")
        while True:
            try:
                with self._slots:
                    return attempt()
            except _Retry as e:
                if e.once and wrong_once:
                    raise HttpError(url, f"{e.problem}, twice", e.status) from e
                if number == self._retries:
                    tries = f"gave up after {number + 1} attempts" if number else "no retries"
                    if e.unreachable is not None:
                        with self._hosts_lock:
                            self._unreachable[e.unreachable] = e.problem
                    raise HttpError(url, f"{e.problem}; {tries}", e.status) from e
                wrong_once = wrong_once or e.once
                pause = self._backoff * 2**number
                if e.wait_s is not None:
                    pause = max(pause, min(e.wait_s, _MAX_RETRY_AFTER_S))
                if pause >= clock.left():  # no time for another attempt after the pause
                    raise HttpError(url, f"{e.problem}; {clock.gave_up(self._deadline_s)}",
                                    e.status) from e
            time.sleep(pause)
            number += 1

    def _send(self, method: str, url: str, headers: Mapping[str, str],
              allow: tuple[int, ...] = ()) -> urllib3.BaseHTTPResponse:
        """Send one request (following redirects); the response comes back unread.

        2xx and the statuses in `allow` are returned; 429 and 5xx raise _Retry, other statuses
        HttpError, as does a host no connection could be made to before.
        """
        import urllib3
        from urllib3.exceptions import LocationValueError, MaxRetryError, ResponseError

        url = self.add_credentials(url)
        with self._hosts_lock:
            unreachable = self._unreachable.get(_host(url))
        if unreachable is not None:
            raise HttpError(url, f"{unreachable} earlier; not asked again")
        self.transfer.add(requests=1)
        wait_s = self._wait_s()
        try:
            resp = self._pool_manager(url).request(
                method, url, headers={**self._headers, **self._authorization(url), **headers},
                preload_content=False,
                decode_content=False, retries=_redirects(),
                timeout=urllib3.Timeout(connect=wait_s, read=wait_s),
            )
        except LocationValueError as e:
            raise HttpError(url, f"not a usable URL ({_one_line(str(e))})") from e
        except MaxRetryError as e:
            if isinstance(e.reason, ResponseError):
                raise HttpError(url, f"more than {_MAX_REDIRECTS} redirects") from e
            raise self._failed(url, e.reason or e) from e
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise self._failed(url, e) from e
        if resp.retries is not None:
            self.transfer.add(requests=len(resp.retries.history))
        status = resp.status
        if 200 <= status < 300 or status in allow:
            return resp
        self._drop(resp)
        problem = f"HTTP {status} {resp.reason or ''}".rstrip()
        if status == 429 or status >= 500:
            raise _Retry(problem, status=status, wait_s=_retry_after(resp.headers))
        if status in _NOT_FOUND:
            raise HttpError(url, f"not found ({problem})", status)
        if status == 401 and self._from_keyring(url):  # asked again, once, as pip does
            return self._send(method, url, headers, allow)
        if status in (401, 403):
            given = "the credentials given were refused" if self._authorization(url) else (
                "give them in the index URL (https://USER:PASSWORD@host/...) or in ~/.netrc")
            raise HttpError(url, f"{problem}: the server wants credentials; {given}", status)
        if status == 407:
            raise HttpError(url, f"{problem}: the proxy wants credentials "
                            "(http://USER:PASSWORD@proxy:port in HTTPS_PROXY or HTTP_PROXY)",
                            status)
        raise HttpError(url, problem, status)

    def _failed(self, url: str, error: BaseException) -> _Retry:
        """The retry of a request that failed in the network; no connection (refused, a name
        that does not resolve, a connect timeout: urllib3's NewConnectionError and
        NameResolutionError are ConnectTimeoutErrors) marks the host."""
        from urllib3.exceptions import ConnectTimeoutError

        unreachable = _host(url) if isinstance(error, ConnectTimeoutError) else None
        return _Retry(_describe(error, self._wait_s()), unreachable=unreachable)

    def _wait_s(self) -> float:
        """How long one wait on the socket may take: the timeout, or what is left of the
        request's time when that is less."""
        clock: _Clock | None = getattr(self._local, "clock", None)
        if clock is None:
            return self._timeout_s
        return max(0.01, min(self._timeout_s, clock.left()))

    def _receive(self, resp: urllib3.BaseHTTPResponse, sink: Callable[[bytes], object], *,
                 limit: int | None = None, decode: bool = False) -> int:
        """Pass the body to `sink` in chunks, at most `limit` bytes; returns how many. A body
        that arrives slower than `min_rate` bytes a second on average, once `timeout` seconds
        have passed, is given up (a server that trickles is otherwise never timed out: each
        byte arrives within the read timeout), and so is one that outlasts the request's time
        (`_Clock`: a body that never ends)."""
        total = 0
        began = time.monotonic()
        clock: _Clock | None = getattr(self._local, "clock", None)
        while limit is None or total < limit:
            chunk = self._read_chunk(resp, _CHUNK if limit is None else min(_CHUNK, limit - total),
                                     decode)
            if not chunk:
                break
            sink(chunk)
            total += len(chunk)
            elapsed = time.monotonic() - began
            if clock is not None:
                clock.earn(len(chunk))
                if clock.left() <= 0:
                    resp.close()
                    resp.release_conn()
                    raise _Retry(f"{total:,} bytes in {elapsed:.0f} s, and more coming",
                                 once=True)
            if elapsed > self._timeout_s and total < self._min_rate * elapsed:
                resp.close()
                resp.release_conn()
                raise _Retry(f"too slow: {total:,} bytes in {elapsed:.0f} s, less than "
                             f"{self._min_rate:,} bytes a second", once=True)
        return total

    def _read_chunk(self, resp: urllib3.BaseHTTPResponse, want: int, decode: bool) -> bytes:
        import urllib3

        before = resp.tell()
        wait_s = self._wait_s()
        if wait_s < self._timeout_s:  # each wait within the request's time, once it is short
            with contextlib.suppress(AttributeError, OSError):
                resp.connection.sock.settimeout(wait_s)  # type: ignore[union-attr]
        try:
            return resp.read1(want, decode_content=decode)  # what has arrived: all of it counts
        except (urllib3.exceptions.HTTPError, OSError) as e:
            resp.close()
            resp.release_conn()
            raise _Retry(_describe(e, wait_s)) from e
        finally:
            self.transfer.add(bytes_fetched=resp.tell() - before)

    def _drop(self, resp: urllib3.BaseHTTPResponse) -> None:
        """Give up a response's unread body: drain a small one (the connection stays usable),
        close the connection under a big or unknown one."""
        if resp.connection is None:
            return
        before = resp.tell()
        remaining = getattr(resp, "length_remaining", None)
        if remaining is not None and remaining <= _DRAIN_LIMIT:
            resp.drain_conn()
        else:
            resp.close()
        self.transfer.add(bytes_fetched=resp.tell() - before)
        resp.release_conn()


class HttpSource(Closing):
    """A remote file as a `ByteSource`: reads are Range requests, or reads of a local copy when
    the host does not do ranges. Safe to read from several threads at once."""

    def __init__(self, client: HttpClient, url: str, *, size: int | None = None,
                 sha256: str | None = None) -> None:
        self._client = client
        self._url = url
        self._target = url  # where requests go: the URL after redirects, once one answered
        self._size = size
        self._sha256 = sha256.lower() if sha256 else None
        self._copy: IO[bytes] | None = None
        self._copy_lock = threading.Lock()
        self._validator: str | None = None  # the ETag (or Last-Modified) of the first answer

    @property
    def name(self) -> str:
        return self._url

    @property
    def size(self) -> int:
        """The file's size: given, learned from an answer, or asked for with HEAD."""
        if self._size is None:
            return self._learn_size()
        return self._size

    def read_at(self, offset: int, length: int) -> bytes:
        if self._size is not None or length <= 0 or offset < 0:
            check_range(self, offset, length)
        if length == 0:
            return b""
        while True:
            if self._copy is not None:
                return self._read_copy(offset, length)
            if self._support().ranges is False:
                self._download()
                continue
            data = self._fetch(lambda: self._range_attempt(offset, length))
            if data is not None:
                if offset == 0 and length == self._size:
                    self._check_whole(data)
                return data

    def read_suffix(self, length: int) -> tuple[int, bytes]:
        """The last `length` bytes (the whole file when it is shorter) and their offset."""
        if length < 0:
            raise ValueError(f"a suffix of {length} bytes")
        while self._copy is None and length > 0:
            support = self._support()
            if support.ranges is False or support.suffix_ranges is False:
                break
            got = self._fetch(lambda: self._suffix_attempt(length))
            if got is not None:
                if got[0] == 0:
                    self._check_whole(got[1])
                return got
        if self._copy is None and self._support().ranges is False:
            self._download()  # the size comes with the copy: no HEAD needed
        size = self.size
        take = min(length, size)
        return size - take, self.read_at(size - take, take)

    def close(self) -> None:
        """Delete the local copy, if one was made."""
        with self._copy_lock:
            if self._copy is not None:
                self._copy.close()
                self._copy = None

    # -- attempts: one request each, run by HttpClient._retrying ---------------------------------

    def _range_attempt(self, offset: int, length: int) -> bytes | None:
        """The bytes, or None when the host turned out not to do ranges (a copy may exist now)."""
        asked = f"bytes={offset}-{offset + length - 1}"
        resp = self._request("GET", {"Range": asked, **_IDENTITY}, allow=(416,))
        try:
            if resp.status == 416:
                if self._learn_size_from_416(resp) is not None:
                    check_range(self, offset, length)
                raise HttpError(self._url, f"the server refused Range {asked} (HTTP 416)", 416)
            if resp.status == 200:
                if offset == 0 and _content_length(resp) == length:
                    self._set_size(length)
                    return self._body(resp, length)  # the whole file is what was asked for
                self._no_ranges(resp)
                return None
            start, end, total = self._content_range(resp, asked)
            if total is not None:
                self._set_size(total)
                if offset + length > total:
                    check_range(self, offset, length)
            if (start, end) != (offset, offset + length - 1):
                raise _wrong_range(resp, asked)
            data = self._body(resp, length)
            self._client._learn(self._target, ranges=True)
            return data
        finally:
            self._client._drop(resp)

    def _suffix_attempt(self, length: int) -> tuple[int, bytes] | None:
        """(offset, bytes), or None when the host turned out not to do suffix ranges."""
        asked = f"bytes=-{length}"
        resp = self._request("GET", {"Range": asked, **_IDENTITY}, allow=(416,))
        try:
            if resp.status == 416:
                if self._learn_size_from_416(resp) == 0:
                    return 0, b""
                self._client._learn(self._target, suffix_ranges=False)
                return None
            if resp.status == 200:
                whole = _content_length(resp)
                if whole is not None:
                    self._set_size(whole)
                    if whole <= length:
                        return 0, self._body(resp, whole)
                self._client._learn(self._target, suffix_ranges=False)
                return None
            start, end, total = self._content_range(resp, asked)
            if total is None or end != total - 1 or end - start + 1 != min(length, total):
                raise _wrong_range(resp, asked)
            self._set_size(total)
            data = self._body(resp, end - start + 1)
            self._client._learn(self._target, ranges=True, suffix_ranges=True)
            return start, data
        finally:
            self._client._drop(resp)

    def _head_attempt(self) -> int | None:
        resp = self._request("HEAD", _IDENTITY, allow=(405, 501))
        self._client._drop(resp)
        return _content_length(resp) if resp.status < 300 else None

    def _download_attempt(self) -> None:
        resp = self._request("GET", _IDENTITY)
        try:
            if resp.status != 200:
                raise HttpError(self._url, f"unexpected HTTP {resp.status} to a plain GET",
                                resp.status)
            self._store(resp)
        finally:
            self._client._drop(resp)

    # -- helpers ---------------------------------------------------------------------------------

    def _fetch(self, attempt: Callable[[], T]) -> T:
        """Run an attempt with retries; when a redirect target stops answering (a signed URL
        that expired), ask the original URL once more."""
        try:
            return self._client._retrying(self._url, attempt)
        except HttpError as e:
            if self._target == self._url or e.status not in _EXPIRED:
                raise
            self._target = self._url
            return self._client._retrying(self._url, attempt)

    def _request(self, method: str, headers: Mapping[str, str],
                 allow: tuple[int, ...] = ()) -> urllib3.BaseHTTPResponse:
        try:
            resp = self._client._send(method, self._target, headers, allow)
        except HttpError as e:
            raise HttpError(self._url, e.problem, e.status) from e
        self._target = _final_url(self._target, resp)
        if resp.status in (200, 206):
            try:
                self._same_file(resp)
            except HttpError:
                self._client._drop(resp)
                raise
        return resp

    def _support(self) -> HostSupport:
        return self._client.host_support(self._target)

    def _set_size(self, total: int) -> None:
        if self._size is None:
            self._size = total
        elif self._size != total:
            raise HttpError(self._url, f"the server has {total} bytes, expected {self._size}")

    def _learn_size(self) -> int:
        length = self._fetch(self._head_attempt)
        if length is not None:
            self._set_size(length)
        elif self._support().ranges is not False:
            with contextlib.suppress(FormatError):
                self.read_at(0, 1)  # a 206 names the total; a 200 leaves a local copy
        if self._size is None:
            self._download()  # the file itself will tell
        if self._size is None:
            raise HttpError(self._url, "the server does not say how big the file is")
        return self._size

    def _learn_size_from_416(self, resp: urllib3.BaseHTTPResponse) -> int | None:
        match = _UNSATISFIED.fullmatch(resp.headers.get("Content-Range", "").strip())
        if match is None:
            return None
        self._set_size(int(match.group(1)))
        return int(match.group(1))

    def _content_range(self, resp: urllib3.BaseHTTPResponse,
                       asked: str) -> tuple[int, int, int | None]:
        encoding = resp.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding != "identity":
            raise HttpError(self._url, f"the server encoded a range with {encoding}")
        match = _CONTENT_RANGE.fullmatch(resp.headers.get("Content-Range", "").strip())
        if match is None:
            raise _wrong_range(resp, asked)
        start, end, total = match.groups()
        if int(end) < int(start):
            raise _wrong_range(resp, asked)
        return int(start), int(end), None if total == "*" else int(total)

    def _body(self, resp: urllib3.BaseHTTPResponse, expected: int) -> bytes:
        parts: list[bytes] = []
        got = self._client._receive(resp, parts.append, limit=expected + 1)
        if got != expected:
            raise _Retry(f"{'short' if got < expected else 'long'} body: {got} of "
                         f"{expected} bytes")
        return b"".join(parts)

    def _no_ranges(self, resp: urllib3.BaseHTTPResponse) -> None:
        """A 200 to a Range request: remember it, and keep the body as the local copy unless
        another thread is already making one."""
        self._client._learn(self._target, ranges=False)
        if not self._copy_lock.acquire(blocking=False):
            return
        try:
            if self._copy is None:
                self._store(resp)
        finally:
            self._copy_lock.release()

    def _download(self) -> None:
        with self._copy_lock:
            if self._copy is None:
                self._fetch(self._download_attempt)

    def _store(self, resp: urllib3.BaseHTTPResponse) -> None:
        """Stream a whole body to a temporary file, check it, and serve reads from it."""
        digest = hashlib.sha256()
        with contextlib.ExitStack() as on_failure:
            copy = on_failure.enter_context(tempfile.TemporaryFile(prefix="abifit-"))

            def sink(chunk: bytes) -> None:
                copy.write(chunk)
                digest.update(chunk)

            # at most one byte past the size the server or the index announced, never past the
            # download bound: an endless body is not streamed to disk without end
            bound = self._client.download_bound()
            announced = self._size if self._size is not None else _content_length(resp)
            if announced is not None and announced > bound:
                raise HttpError(self._url, _too_big(f"is {announced:,} bytes", bound))
            limit = (self._size if self._size is not None else bound) + 1
            got = self._client._receive(resp, sink, limit=limit)
            if got > bound:
                raise HttpError(self._url, _too_big(f"goes on past {bound:,} bytes", bound))
            if self._size is not None and got != self._size:
                raise HttpError(self._url, f"downloaded {got} bytes, expected {self._size}")
            if self._sha256 is not None and digest.hexdigest() != self._sha256:
                raise HttpError(self._url, f"sha256 mismatch: downloaded {digest.hexdigest()}, "
                                f"expected {self._sha256}")
            copy.flush()
            on_failure.pop_all()  # kept open: reads are served from it until close()
        self._size = got
        self._copy = copy

    def _check_whole(self, data: bytes) -> None:
        """The whole file came in one answer (a small file): it must have the expected sha256,
        as a download to a local copy must."""
        digest = hashlib.sha256(data).hexdigest() if self._sha256 is not None else None
        if digest is not None and digest != self._sha256:
            raise HttpError(self._url, f"sha256 mismatch: downloaded {digest}, expected "
                            f"{self._sha256}")

    def _same_file(self, resp: urllib3.BaseHTTPResponse) -> None:
        """Every answer about the file must name the version the first one named (its ETag,
        else its Last-Modified): ranges of two versions never make one file."""
        validator = resp.headers.get("ETag") or resp.headers.get("Last-Modified")
        if not validator:
            return
        if self._validator is None:
            self._validator = validator
        elif validator != self._validator:
            raise HttpError(self._url, f"the file changed on the server while it was read "
                            f"({self._validator} before, {validator} now)")

    def _read_copy(self, offset: int, length: int) -> bytes:
        check_range(self, offset, length)
        copy = self._copy
        if copy is None:
            raise FormatError(self._url, "the local copy was closed")
        data = os.pread(copy.fileno(), length, offset)
        if len(data) != length:
            raise FormatError(self._url, f"local copy ended after {len(data)} bytes", offset)
        return data


def _too_big(what: str, bound: int) -> str:
    return (f"the server does not answer Range requests, and the file {what}: more than abifit "
            f"downloads whole here ({bound:,} bytes: the smaller of --max-download and the free "
            f"space of the temporary directory less {DISK_RESERVE >> 20} MiB)")


def _wrong_range(resp: urllib3.BaseHTTPResponse, asked: str) -> _Retry:
    got = resp.headers.get("Content-Range")
    return _Retry(f"wrong Content-Range {got!r} for Range {asked} (HTTP {resp.status})",
                  once=True)


def _final_url(url: str, resp: urllib3.BaseHTTPResponse) -> str:
    """The URL that answered: `url` after the redirects urllib3 followed."""
    for hop in resp.retries.history if resp.retries is not None else ():
        if hop.redirect_location:
            url = urljoin(url, hop.redirect_location)
    return url


def _content_length(resp: urllib3.BaseHTTPResponse) -> int | None:
    value = resp.headers.get("Content-Length", "").strip()
    return int(value) if value.isdigit() else None


def _retry_after(headers: Mapping[str, str]) -> float | None:
    value = headers.get("Retry-After", "").strip()
    return float(value) if value.isdigit() else None


def _host(url: str) -> str:
    """What a host is known by (what it supports, whether it answers, its credentials):
    scheme, host and port, without any user information."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}".lower()


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _redirects() -> urllib3.Retry:
    """urllib3 follows redirects and nothing else: every other failure comes back to
    `HttpClient._retrying`."""
    import urllib3

    return urllib3.Retry(
        total=None, connect=0, read=0, status=0, other=0, redirect=_MAX_REDIRECTS,
        raise_on_redirect=True, raise_on_status=False,
    )


def _describe(error: BaseException, timeout_s: float) -> str:
    """A short phrase for a network failure."""
    from urllib3.exceptions import (
        ConnectTimeoutError,
        NameResolutionError,
        NewConnectionError,
        ProtocolError,
        ReadTimeoutError,
        SSLError,
    )

    if isinstance(error, NameResolutionError):
        return "cannot resolve the host name"
    if isinstance(error, NewConnectionError):
        cause = error.__cause__
        reason = cause.strerror if isinstance(cause, OSError) and cause.strerror else str(error)
        return f"cannot connect ({_one_line(reason)})"
    if isinstance(error, ConnectTimeoutError):
        return f"no connection within {timeout_s:g} s"
    if isinstance(error, (ReadTimeoutError, TimeoutError)):
        return f"no data for {timeout_s:g} s"
    if isinstance(error, SSLError):
        return f"TLS failed ({_one_line(str(error))})"
    if isinstance(error, ProtocolError):
        detail = error.args[-1] if error.args else error
        return f"connection broken ({_one_line(str(detail))})"
    return f"{type(error).__name__}: {_one_line(str(error))}"
