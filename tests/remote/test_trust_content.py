"""Content abifit can trust (issue: trust, items 2 and 3): what an index serves under a claimed
sha256 cannot replace what another index serves; whole files are hashed; wheels pip refuses are
refused (checked against pip itself); a file that changes while it is read, a server that
trickles, a page nested too deep are errors, never a hang or a traceback."""

from __future__ import annotations

import hashlib
import io
import json
import random
import socket
import struct
import subprocess
import sys
import threading
import time
import warnings
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from abifit.cli import main
from abifit.errors import WheelRefused
from abifit.formats.sources import BytesSource, InflateSource
from abifit.remote.http import HttpClient, HttpError
from fixtures.build import compile_c
from helpers import FIXTURES, make_wheel
from httpserver import LoopbackServer, Reply, Request

SOURCES = FIXTURES / "trust"
TARGET = ["--python-version", "3.11", "--platform", "linux_x86_64"]
TAG = "cp310-abi3-linux_x86_64"
MODULE = "trustpkg/_ops.abi3.so"


@pytest.fixture(autouse=True)
def _no_pip_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(scope="module")
def modules(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    out = tmp_path_factory.mktemp("trust")
    return {name: compile_c(SOURCES / f"{name}.c", out / f"{name}.so").read_bytes()
            for name in ("good", "forged")}


def trust_wheel(module: bytes, filler: int = 0) -> tuple[str, bytes]:
    """trustpkg 1.0 with `module` as its extension; `filler` incompressible bytes make the
    wheel too big to come whole in the first read of its directory."""
    files = {"trustpkg/__init__.py": b"", MODULE: module}
    if filler:
        files["trustpkg/data.bin"] = random.Random(0).randbytes(filler)
    return make_wheel("trustpkg", "1.0", files, tag=TAG)


def serve(server: LoopbackServer, filename: str, data: bytes, claimed: str,
          prefix: str = "") -> str:
    """Serve `data` as `filename` on a PEP 503 page at `{prefix}/simple/trustpkg/` that claims
    `claimed` as its sha256; returns the index URL."""
    url = server.add_file(f"{prefix}/files/{filename}", data)
    page = f'<a href="{url}#sha256={claimed}">{filename}</a>'.encode()
    server.add_handler(f"{prefix}/simple/trustpkg/",
                       lambda _r: Reply(200, page, {"Content-Type": "text/html"}))
    return server.url(f"{prefix}/simple")


def abifit(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# -- item 2: content ----------------------------------------------------------------------------


def test_an_index_that_claims_another_wheels_sha256_cannot_plant_its_views(
        modules: dict[str, bytes], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Index B serves a forged wheel under the real wheel's sha256 (ranges cannot be hashed, so
    B is not caught while read). A later run against the real index A, with the same cache,
    answers about A's wheel: before, B's views and B's stored result were A's answer."""
    filename, real = trust_wheel(modules["good"], filler=200_000)
    _, forged = trust_wheel(modules["forged"], filler=200_000)
    claimed = hashlib.sha256(real).hexdigest()
    cache = str(tmp_path / "cache")
    with LoopbackServer() as server:
        index_a = serve(server, filename, real, claimed, "/a")
        index_b = serve(server, filename, forged, claimed, "/b")
        for command in ("check", "inspect"):
            args = [command, "trustpkg==1.0", *TARGET, "--json", "--cache-dir", cache]
            lied = abifit(capsys, *args, "--index-url", index_b)
            honest = abifit(capsys, *args, "--index-url", index_a)
            fresh = abifit(capsys, *args, "--index-url", index_a, "--no-cache")
            assert lied[1] != fresh[1]  # B served other bytes: another answer
            assert (honest[0], json.loads(honest[1])["verdict" if command == "check"
                                                    else "objects"]) == \
                (fresh[0], json.loads(fresh[1])["verdict" if command == "check" else "objects"])
            if command == "check":
                assert (lied[0], honest[0]) == (1, 0)
                assert "abifit_defined_nowhere" in lied[1]


@pytest.mark.parametrize("mode", ["ranges", "no_ranges"])
def test_a_small_wheel_is_hashed_whatever_the_server_does_with_ranges(
        mode: str, modules: dict[str, bytes], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A wheel smaller than the first read comes whole in one answer (to a suffix range, or as a
    200 from a server without ranges): its sha256 is checked, and a wrong one is one error."""
    filename, data = trust_wheel(modules["good"])
    assert len(data) < 64 << 10
    with LoopbackServer(mode=mode) as server:  # type: ignore[arg-type]
        index = serve(server, filename, data, "ab" * 32)
        code, out, err = abifit(capsys, "check", "trustpkg==1.0", *TARGET, "--index-url", index,
                                "--cache-dir", str(tmp_path / "cache"))
    assert code == 2 and out == ""
    assert err.startswith("error: ") and "sha256 mismatch" in err and f"expected {'ab' * 32}" \
        in err and len(err.strip().splitlines()) == 1, err


def _patched(data: bytes, edit: str) -> bytes:
    """The wheel with one defect pip refuses: `crc` (the member's CRC-32, in both headers,
    one bit off) or `local-name` (the local header names another file)."""
    out = bytearray(data)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        info = zf.getinfo(MODULE)
    # the member's central entry: its name follows the entry's fixed part of 46 bytes
    at = data.index(MODULE.encode(), data.index(b"PK\x01\x02")) - 46
    assert data[at:at + 4] == b"PK\x01\x02"
    local = info.header_offset
    if edit == "crc":
        for offset in (local + 14, at + 16):
            (crc,) = struct.unpack_from("<I", out, offset)
            struct.pack_into("<I", out, offset, crc ^ 1)
    else:
        name = local + 30
        assert out[name:name + len(MODULE)] == MODULE.encode()
        out[name + len("trustpkg/_")] = ord("X")
    return bytes(out)


def _pip_refuses(wheel: Path, tmp_path: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--no-compile",
         "--disable-pip-version-check", "--target", str(tmp_path / "target"), str(wheel)],
        capture_output=True, text=True, check=False)
    assert done.returncode != 0, done.stdout
    return done.stderr


@pytest.mark.parametrize("defect", ["crc", "local-name", "escaping-name"])
def test_wheels_pip_refuses_are_refused(defect: str, modules: dict[str, bytes], tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """A bad CRC, a local header that names another file, a member name that climbs out of the
    install tree: pip refuses each wheel (run here), and so does abifit, with one error line,
    from a local file and from an index alike."""
    filename, data = trust_wheel(modules["good"])
    if defect == "escaping-name":
        filename, data = make_wheel("trustpkg", "1.0", {
            "trustpkg/__init__.py": b"", MODULE: modules["good"],
            "../../escaped.py": b""}, tag=TAG)
    else:
        data = _patched(data, defect)
    wheel = tmp_path / filename
    wheel.write_bytes(data)
    pip_says = _pip_refuses(wheel, tmp_path)
    words = {"crc": ("CRC-32", "Bad CRC-32"), "local-name": ("the local header names", "differ"),
             "escaping-name": ("outside the target directory", "outside the target directory")}
    ours, theirs = words[defect]
    assert theirs in pip_says, pip_says
    code, out, err = abifit(capsys, "check", str(wheel), *TARGET, "--no-cache")
    assert (code, out) == (2, ""), err
    assert err.startswith("error: ") and ours in err and "pip refuses this wheel" in err, err
    assert len(err.strip().splitlines()) == 1, err
    with LoopbackServer() as server:
        index = serve(server, filename, data, hashlib.sha256(data).hexdigest())
        code, out, err = abifit(capsys, "inspect", "trustpkg==1.0", *TARGET, "--index-url",
                                index, "--cache-dir", str(tmp_path / "cache"))
    assert (code, out) == (2, "") and ours in err, err


def test_a_member_listed_twice_is_the_last_one_as_pip_installs_it(
        modules: dict[str, bytes], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """pip installs a wheel that lists a name twice, and the last entry is the file left in
    place (checked here): abifit answers about that one, as one module."""
    buffer = io.BytesIO()
    dist = "trustpkg-1.0.dist-info"
    with warnings.catch_warnings(), zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        warnings.simplefilter("ignore")  # "Duplicate name"
        for path, data in (("trustpkg/__init__.py", b""), (MODULE, modules["good"]),
                           (MODULE, modules["forged"]),
                           (f"{dist}/METADATA", b"Metadata-Version: 2.1\nName: trustpkg\n"
                                                b"Version: 1.0\n"),
                           (f"{dist}/WHEEL", f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\n"
                                             f"Tag: {TAG}\n".encode()),
                           (f"{dist}/RECORD", b"")):
            zf.writestr(path, data)
    wheel = tmp_path / f"trustpkg-1.0-{TAG}.whl"
    wheel.write_bytes(buffer.getvalue())
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index",
                    "--no-compile", "--disable-pip-version-check", "--target",
                    str(tmp_path / "target"), str(wheel)], check=True, capture_output=True)
    assert (tmp_path / "target" / MODULE).read_bytes() == modules["forged"]
    code, out, _err = abifit(capsys, "check", str(wheel), *TARGET, "--no-cache", "--json")
    doc = json.loads(out)
    assert code == 1 and [m["module"] for m in doc["modules"]] == ["trustpkg._ops"]
    (finding,) = doc["findings"]
    assert finding["kind"] == "undefined-symbol" and "abifit_defined_nowhere" in finding["message"]


def test_a_member_inflated_to_its_end_is_checked_against_its_crc() -> None:
    """The lazy inflater checks the CRC once its output reaches the member's size, also when
    that output was read in pieces and out of order; a read that stops short checks nothing."""
    payload = random.Random(1).randbytes(3 << 20) + bytes(5 << 20)
    compressor = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    stored = compressor.compress(payload) + compressor.flush()
    crc = zlib.crc32(payload)
    for expected, fails in ((crc, False), (crc ^ 1, True)):
        source = InflateSource(BytesSource(stored, "m"), len(payload), "m",
                               checkpoint_every=1 << 20, crc=expected)
        assert source.read_at(100, 10) == payload[100:110]  # the start: nothing checked yet
        assert source.read_at(6 << 20, 10) == payload[6 << 20:(6 << 20) + 10]
        assert source.read_at(200, 10) == payload[200:210]  # back: a restart, not summed twice
        if fails:
            with pytest.raises(WheelRefused, match="CRC-32 of the data is"):
                source.read_at(len(payload) - 10, 10)
        else:
            assert source.read_at(len(payload) - 10, 10) == payload[-10:]


def test_a_file_that_changes_while_it_is_read_is_an_error() -> None:
    """Each answer names the file's version (ETag): ranges of two versions are an error."""
    data = bytes(range(256)) * 64
    answers = iter(range(1000))

    def reply(request: Request) -> Reply:
        answer = server._ranged(data, request.headers.get("Range"))
        answer.headers["ETag"] = f'"v{next(answers) // 2}"'  # a new version every 2 answers
        return answer

    with LoopbackServer() as server:
        server.add_handler("/f.whl", reply)
        with HttpClient(retries=0) as client:
            source = client.open(server.url("/f.whl"), size=len(data))
            assert source.read_at(0, 10) == data[:10]
            assert source.read_at(100, 10) == data[100:110]
            with pytest.raises(HttpError, match='changed on the server while it was read '
                                                r'\("v0" before, "v1" now\)'):
                source.read_at(200, 10)


# -- item 3: bounds -----------------------------------------------------------------------------


@pytest.fixture
def trickler() -> Iterator[str]:
    """A server that answers with a 200 of 100,000 bytes, then sends one byte every 50 ms."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    stop = threading.Event()

    def serve_one(conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n"
                         b"Content-Type: text/html\r\n\r\n")
            for _ in range(100000):
                if stop.wait(0.05):
                    return
                try:
                    conn.sendall(b"x")
                except OSError:
                    return

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve_one, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/simple/trustpkg/"
    stop.set()
    listener.close()


def test_a_server_that_trickles_is_given_up(trickler: str) -> None:
    """Every byte arrives well within the read timeout, so only the floor on the body's rate
    ends the request: once after the timeout, and once more on its retry."""
    began = time.monotonic()
    with HttpClient(timeout=1.0, retries=3, backoff=0.0, min_rate=1000) as client, \
            pytest.raises(HttpError, match=r"too slow: \d+ bytes in 1 s, less than 1,000 bytes "
                                           "a second, twice"):
        client.get(trickler)
    assert time.monotonic() - began < 20  # it would take 5,000 s to the end of the body


def test_index_pages_nested_too_deep_or_with_negative_sizes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A PEP 691 page nested past the parser's depth is one error; a `size` of -1 is ignored
    (it was a traceback)."""
    deep = b'{"meta": {"api-version": "1.0"}, "files": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    negative = json.dumps({"meta": {"api-version": "1.0"}, "name": "trustpkg", "files": [
        {"filename": "trustpkg-1.0-cp310-abi3-linux_x86_64.whl", "url": "/nowhere.whl",
         "hashes": {}, "size": -1}]}).encode()
    kind = "application/vnd.pypi.simple.v1+json"
    with LoopbackServer() as server:
        server.add_handler("/deep/simple/trustpkg/", lambda _r: Reply(200, deep,
                                                                       {"Content-Type": kind}))
        server.add_handler("/neg/simple/trustpkg/", lambda _r: Reply(200, negative,
                                                                      {"Content-Type": kind}))
        code, _out, err = abifit(capsys, "inspect", "trustpkg==1.0", *TARGET, "--no-cache",
                                 "--index-url", server.url("/deep/simple"))
        assert code == 2 and "nested too deep" in err and "Traceback" not in err, err
        code, _out, err = abifit(capsys, "inspect", "trustpkg==1.0", *TARGET, "--no-cache",
                                 "--index-url", server.url("/neg/simple"))
        assert code == 2 and "nowhere.whl" in err and "not found" in err, err
