"""Wheels on this machine: a `--find-links` directory (as a path or a file:// URL) and file://
simple indexes (PEP 503 `index.html`, PEP 691 `index.json`, bare project directories) give
`inspect`, `check`, `matrix` and `variants` what the same wheels served over HTTP give, read in
place (nothing fetched, no copy in the cache); an index that does not answer is a warning when
another source has the project, and the error only when none has it."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from urllib.parse import quote

import pytest

import abifit.engines.check
import abifit.engines.inspect as inspect_module
import abifit.remote.wheels
from abifit.cli import main
from abifit.errors import WheelRefused
from abifit.remote.diskcache import Cache
from abifit.remote.http import HttpClient, HttpError
from abifit.remote.packageindex import (
    IndexConfig,
    IndexFile,
    IndexUnavailable,
    PackageIndex,
    find_links_files,
)
from abifit.remote.wheelcache import content_addressed, file_sha256
from fixtures.build import compile_c
from helpers import CHECK_SOURCES, big_library_source, make_wheel
from httpserver import LoopbackIndex, Projects

TARGET = ["--python-version", "3.11", "--platform", "linux_x86_64"]
EXT = "extpkg-1.0+cpu-cp310-abi3-linux_x86_64.whl"  # a `+` that file:// URLs spell %2B

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


@pytest.fixture(scope="module")
def index_projects(tmp_path_factory: pytest.TempPathFactory) -> Projects:
    """hostpkg 1.0 (two builds) and 2.0, which changes a parameter's type; extpkg 1.0+cpu built
    against 1.0; bigpkg, whose library is large enough to be read from its two ends."""
    root = tmp_path_factory.mktemp("local-sources")
    host = "libhost.so"
    v1 = compile_c(CHECK_SOURCES / "host_v1.cpp", root / "v1" / host, cxx=True, soname=host)
    v2 = compile_c(CHECK_SOURCES / "host_v2.cpp", root / "v2" / host, cxx=True, soname=host)
    ext = compile_c(CHECK_SOURCES / "ext.cpp", root / "_ops.abi3.so", cxx=True,
                    flags=[f"-L{root / 'v1'}", "-Wl,-rpath,$ORIGIN/../hostpkg/lib"],
                    libs=["-lhost"])
    (root / "big.c").write_text(big_library_source(3000, 1_500_000))
    big = compile_c(root / "big.c", root / "libbig.so", optimize=0, soname="libbig.so.1")
    init = {"hostpkg/__init__.py": b""}
    return {
        "hostpkg": [
            make_wheel("hostpkg", "1.0", {**init, "hostpkg/lib/libhost.so": v1.read_bytes()}),
            make_wheel("hostpkg", "1.0", {**init, "hostpkg/lib/libhost.so": v1.read_bytes()},
                       build="1"),
            make_wheel("hostpkg", "2.0", {**init, "hostpkg/lib/libhost.so": v2.read_bytes()}),
        ],
        "extpkg": [make_wheel("extpkg", "1.0+cpu", {"extpkg/__init__.py": b"",
                                                    "extpkg/_ops.abi3.so": ext.read_bytes()},
                              requires=("hostpkg==1.0",), tag="cp310-abi3-linux_x86_64")],
        "bigpkg": [make_wheel("bigpkg", "1.0", {"bigpkg/__init__.py": b"",
                                                "bigpkg/lib/libbig.so": big.read_bytes()})],
    }


@pytest.fixture(scope="module")
def wheels_dir(index_projects: Projects, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every wheel, in one plain directory."""
    directory = tmp_path_factory.mktemp("find-links")
    for entries in index_projects.values():
        for filename, data in entries:
            (directory / filename).write_bytes(data)
    return directory


def _pep503(simple: Path, project: str, links: Sequence[tuple[str, bytes]]) -> None:
    anchors = "".join(f'<a href="../../files/{quote(name)}#sha256='
                      f'{hashlib.sha256(data).hexdigest()}">{name}</a>\n' for name, data in links)
    (simple / project / "index.html").write_text(f"<html><body>\n{anchors}</body></html>\n")


def _pep691(simple: Path, project: str, links: Sequence[tuple[str, bytes]]) -> None:
    files = [{"filename": name, "url": f"../../files/{quote(name)}", "hashes": {}}
             for name, _data in links]  # no hashes: the file's own sha256 keys the cache
    document = {"meta": {"api-version": "1.1"}, "name": project, "files": files}
    (simple / project / "index.json").write_text(json.dumps(document))


def _bare(simple: Path, project: str, links: Sequence[tuple[str, bytes]]) -> None:
    for name, data in links:
        (simple / project / name).write_bytes(data)


Page = Callable[[Path, str, Sequence[tuple[str, bytes]]], None]


def file_index(root: Path, projects: Projects, page: Page) -> Path:
    """A file:// simple index under `root`: wheels in `files/`, a directory per project under
    `simple/` made by `page`."""
    (root / "files").mkdir(parents=True)
    for project, links in projects.items():
        (root / "simple" / project).mkdir(parents=True)
        for name, data in links:
            (root / "files" / name).write_bytes(data)
        page(root / "simple", project, links)
    return root / "simple"


def source_options(kind: str, loopback: LoopbackIndex, wheels_dir: Path, projects: Projects,
                   root: Path) -> list[str]:
    """The options that name the wheels as a source of `kind`."""
    if kind == "http":
        return ["--index-url", loopback.url]
    if kind == "find-links":
        return ["--find-links", str(wheels_dir)]
    if kind == "find-links-url":
        return ["--find-links", wheels_dir.as_uri()]
    pages = {"pep503": _pep503, "pep691": _pep691, "bare": _bare}
    return ["--index-url", file_index(root, projects, pages[kind]).as_uri()]


def run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, cache: Path,
        *args: str, no_index: bool = False) -> tuple[int, str, str]:
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX"):
        monkeypatch.delenv(var, raising=False)
    if no_index:
        monkeypatch.setenv("PIP_NO_INDEX", "1")
    code = main([*args, *TARGET, "--cache-dir", str(cache)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def without_transfer(out: str) -> dict[str, object]:
    """A document without its transfer, without wheel sizes (a find-links directory knows
    them; a PEP 503 page does not say), and without the minute it was checked at (matrix's;
    two runs may fall on either side of a minute), which must be one."""
    doc = {k: v for k, v in json.loads(out).items() if k not in ("transfer", "checked_at")}
    when = json.loads(out).get("checked_at")
    assert when is None or re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", when), when
    if isinstance(doc.get("wheels"), list):
        doc["wheels"] = [{k: v for k, v in w.items() if k != "size"} for w in doc["wheels"]]
    return doc


def assert_no_wheel_in(cache: Path, projects: Projects) -> None:
    """No file of the cache holds a wheel's bytes, nor is as large as the smallest wheel read
    whole would make it."""
    stored = [p.read_bytes() for p in cache.rglob("*") if p.is_file()]
    for entries in projects.values():
        for _name, data in entries:
            assert not any(data in blob for blob in stored)
    big = projects["bigpkg"][0][1]
    assert sum(map(len, stored)) < len(big) // 2, (sum(map(len, stored)), len(big))


COMMANDS = {
    "inspect": ["inspect", "bigpkg==1.0", "extpkg==1.0+cpu", "--json"],
    "check": ["check", "extpkg==1.0+cpu", "--json"],
    "check-fails": ["check", "extpkg==1.0+cpu", "--with", "hostpkg==2.0", "--json"],
    "matrix": ["matrix", "extpkg==1.0+cpu", "--against", "hostpkg>=1", "--json"],
    "variants": ["variants", "hostpkg==1.0", "--json"],
}


@pytest.mark.parametrize("kind", ["find-links", "find-links-url", "pep503", "pep691", "bare"])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_local_source_gives_what_http_gives(
        kind: str, command: str, loopback_index: LoopbackIndex, wheels_dir: Path,
        index_projects: Projects, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each command prints the same document from wheels on this machine as from the same
    wheels over HTTP, with nothing fetched and no wheel copied into the cache."""
    args = COMMANDS[command]
    code, remote, _err = run(capsys, monkeypatch, tmp_path / "http-cache", *args,
                             *source_options("http", loopback_index, wheels_dir, index_projects,
                                             tmp_path))
    options = source_options(kind, loopback_index, wheels_dir, index_projects, tmp_path / kind)
    local_code, local, err = run(capsys, monkeypatch, tmp_path / "cache", *args, *options,
                                 no_index=kind.startswith("find-links"))
    assert (local_code, "error:" not in err, "warning:" not in err) == (code, True, True), err
    assert without_transfer(local) == without_transfer(remote)
    if json.loads(remote)["transfer"] is not None:  # variants prints none
        assert json.loads(remote)["transfer"]["bytes_fetched"] > 0
        assert json.loads(local)["transfer"] == {"bytes_fetched": 0, "requests": 0,
                                                 "wheel_bytes": 0}
    assert_no_wheel_in(tmp_path / "cache", index_projects)


def test_http_wheel_reuses_the_views_of_the_same_wheel_read_locally(
        loopback_index: LoopbackIndex, wheels_dir: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Views of a local wheel are cached by the sha256 of its bytes: after a find-links run, an
    HTTP run of the same wheels (the index gives the same sha256) opens no wheel at all. The
    other way round, views read by ranges are not reused for the local file: ranges cannot be
    hashed, so what an index served under a sha256 is keyed by its URL too."""
    args = ["inspect", "bigpkg==1.0", "extpkg==1.0+cpu", "--json"]
    code, local, _err = run(capsys, monkeypatch, tmp_path, *args, "--find-links",
                            str(wheels_dir), no_index=True)
    assert code == 0
    views = len(list((tmp_path / "views-v2").rglob("*")))

    def no_opening(*_args: object) -> None:
        raise AssertionError("a wheel was opened")

    with monkeypatch.context() as patched:
        patched.setattr(abifit.remote.wheels, "open_wheel", no_opening)
        code, remote, err = run(capsys, monkeypatch, tmp_path, *args, "--index-url",
                                loopback_index.url)
    assert code == 0, err
    assert json.loads(local)["objects"] == json.loads(remote)["objects"]
    assert len(list((tmp_path / "views-v2").rglob("*"))) == views

    fresh = tmp_path / "fresh"
    assert run(capsys, monkeypatch, fresh, *args, "--index-url", loopback_index.url)[0] == 0
    monkeypatch.setattr(abifit.remote.wheels, "open_wheel", no_opening)
    code, _out, err = run(capsys, monkeypatch, fresh, *args, "--find-links", str(wheels_dir),
                          no_index=True)
    assert code == 3 and "a wheel was opened" in err


def test_local_wheel_is_hashed_once(wheels_dir: Path, tmp_path: Path) -> None:
    """A local wheel without an index hash gets its file's sha256, remembered under its path and
    stamp (size, mtime, inode): the same stamp is not read again, a new one is. A hash the
    index gives is checked against the file's (a wrong one refuses the wheel, as pip does);
    without a cache and without a hash to check, nothing is hashed."""
    cache = Cache(tmp_path / "cache")
    [file] = [f for f in find_links_files(wheels_dir) if f.filename.startswith("bigpkg")]
    data = (wheels_dir / file.filename).read_bytes()
    assert content_addressed(file, cache).sha256 == hashlib.sha256(data).hexdigest()
    assert content_addressed(file, None) == file and file.sha256 is None
    given = IndexFile(file.filename, file.url, hashes={"sha256": "ab" * 32})
    with pytest.raises(WheelRefused, match=r"sha256 of the file is .*, its index says abab"):
        content_addressed(given, cache)
    right = IndexFile(file.filename, file.url,
                      hashes={"sha256": hashlib.sha256(data).hexdigest().upper()})
    assert content_addressed(right, None).sha256 == hashlib.sha256(data).hexdigest()
    copy = tmp_path / file.filename
    copy.write_bytes(data)
    first = file_sha256(copy, cache)
    stamp = copy.stat()
    with open(copy, "r+b") as f:  # other bytes under the same stamp: not read again
        f.write(b"X")
    os.utime(copy, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert file_sha256(copy, cache) == first
    os.utime(copy, ns=(stamp.st_atime_ns, stamp.st_mtime_ns + 1))
    assert file_sha256(copy, cache) == hashlib.sha256(copy.read_bytes()).hexdigest() != first
    entries = [p for p in (tmp_path / "cache" / "digests-v2").rglob("*") if p.is_file()]
    assert len(entries) == 3  # the find-links wheel, the copy under each of its two stamps


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """The HTTP client's pauses between attempts take no time."""
    monkeypatch.setattr("abifit.remote.http.time.sleep", lambda _seconds: None)


@pytest.mark.usefixtures("no_backoff")
@pytest.mark.parametrize("command", ["inspect", "check"])
def test_unreachable_index_is_a_warning_when_find_links_has_the_wheel(
        command: str, wheels_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An index that refuses connections is skipped with one warning line (for every project
    asked: extpkg, then hostpkg) when the find-links directory has the wheels."""
    down = f"http://127.0.0.1:{_closed_port()}/simple"
    code, out, err = run(capsys, monkeypatch, tmp_path, command, "extpkg==1.0+cpu",
                         "--index-url", down, "--find-links", str(wheels_dir))
    assert code == 0, err
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert warnings == [f"warning: skipping {down}/extpkg/: cannot connect (Connection "
                        "refused); gave up after 5 attempts"]
    assert "error:" not in err
    assert {"inspect": "extpkg/_ops.abi3.so", "check": "fits: 1 extension module"}[command] in out


@pytest.mark.usefixtures("no_backoff")
def test_unreachable_index_alone_is_one_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """With no other source, the index that does not answer is the error: one line, exit 2."""
    down = f"http://127.0.0.1:{_closed_port()}/simple"
    code, _out, err = run(capsys, monkeypatch, tmp_path, "inspect", "extpkg==1.0+cpu",
                          "--index-url", down)
    assert code == 2
    assert err.splitlines() == [f"error: {down}/extpkg/: cannot connect (Connection refused); "
                                "gave up after 5 attempts"]


def test_missing_find_links_directory_is_a_warning(
        loopback_index: LoopbackIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A find-links directory that does not exist is skipped with a warning while the index has
    the project; alone, it is the error."""
    missing = str(tmp_path / "nowhere")
    code, _out, err = run(capsys, monkeypatch, tmp_path / "cache", "inspect", "extpkg==1.0+cpu",
                          "--index-url", loopback_index.url, "--find-links", missing)
    assert code == 0
    assert err.splitlines()[0] == f"warning: skipping {missing}: no such file or directory"
    code, _out, err = run(capsys, monkeypatch, tmp_path / "cache", "inspect", "extpkg==1.0+cpu",
                          "--find-links", missing, no_index=True)
    assert (code, err.splitlines()) == (2, [f"error: {missing}: no such file or directory"])


def test_skipped_source_is_reported_once() -> None:
    """A source that fails for every project is reported the first time another source answers
    without it; for a project no other source has, its failure is the error."""
    def fetch(url: str, _headers: Mapping[str, str]) -> tuple[int, Mapping[str, str], bytes, str]:
        if url.startswith("https://down.example/"):
            raise ConnectionRefusedError(111, "Connection refused")
        project = url.rstrip("/").rsplit("/", 1)[-1]
        if project == "c":
            return 404, {}, b"", url
        files = [{"filename": f"{project}-1.0-py3-none-any.whl", "url": "x.whl", "hashes": {}}]
        page = json.dumps({"meta": {"api-version": "1.0"}, "name": project, "files": files})
        return 200, {"Content-Type": "application/vnd.pypi.simple.v1+json"}, page.encode(), url

    warnings: list[str] = []
    config = IndexConfig(index_url="https://down.example/simple",
                         extra_index_urls=("https://up.example/simple",))
    index = PackageIndex(fetch, config, warn=warnings.append)
    assert [f.filename for f in index.project_files("a")] == ["a-1.0-py3-none-any.whl"]
    assert [f.filename for f in index.project_files("b")] == ["b-1.0-py3-none-any.whl"]
    assert warnings == ["skipping https://down.example/simple/a/: [Errno 111] Connection refused"]
    with pytest.raises(IndexUnavailable, match=r"^https://down.example/simple/c/: .*refused$"):
        index.project_files("c")


def test_a_host_that_refused_is_not_asked_again() -> None:
    """Once the retries to a host that refuses connections are spent, the client's later
    requests to that host fail at once, without a request."""
    client = HttpClient(retries=1, backoff=0.0)
    base = f"http://127.0.0.1:{_closed_port()}"
    with pytest.raises(HttpError) as first:
        client.get(f"{base}/simple/a/")
    assert str(first.value).endswith("cannot connect (Connection refused); gave up after 2 "
                                     "attempts")
    with pytest.raises(HttpError) as second:
        client.open(f"{base}/files/a.whl").read_at(0, 1)
    assert str(second.value) == (f"{base}/files/a.whl: cannot connect (Connection refused) "
                                 "earlier; not asked again")
    assert client.transfer.requests == 2


def test_a_wheel_named_by_its_path_is_read_once_then_answered_from_the_cache(
        wheels_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`check PATH.whl` reads the wheel in place like a wheel on an index, and caches what it
    read by the file's sha256: a second run opens no wheel; a wheel rewritten in place (new
    bytes, new stamp) is read again, and answers for its new bytes."""
    host = next(wheels_dir.glob("hostpkg-1.0-py3*"))
    local = tmp_path / "wheels"
    local.mkdir()
    ext = local / next(wheels_dir.glob("extpkg-*")).name
    ext.write_bytes((wheels_dir / ext.name).read_bytes())
    args = ["check", str(ext), "--with", str(host), "--json"]
    code, first, err = run(capsys, monkeypatch, tmp_path / "cache", *args, no_index=True)
    assert code == 0, err
    assert json.loads(first)["transfer"]["bytes_fetched"] == 0

    def no_opening(*_args: object) -> None:
        raise AssertionError("a wheel was opened")

    with monkeypatch.context() as patched:
        patched.setattr(abifit.remote.wheels, "open_wheel", no_opening)
        patched.setattr(abifit.engines.check, "LocalWheel", no_opening)
        code, second, err = run(capsys, monkeypatch, tmp_path / "cache", *args, no_index=True)
    assert code == 0, err
    assert json.loads(second)["modules"] == json.loads(first)["modules"]

    other = local / "hostpkg-1.0-py3-none-any.whl"  # hostpkg 2.0's bytes under 1.0's name
    other.write_bytes(next(wheels_dir.glob("hostpkg-2.0-*")).read_bytes())
    code, third, err = run(capsys, monkeypatch, tmp_path / "cache", "check", str(ext),
                           "--with", str(other), "--json", no_index=True)
    assert code == 1, err
    assert {f["kind"] for f in json.loads(third)["findings"]} == {"undefined-symbol"}


def test_inspect_reads_a_wheel_named_by_its_path_like_one_on_an_index(
        wheels_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`inspect PATH.whl` reads the wheel in place through the member reader of index wheels
    (a large member inflated forward, CRC checked) and reports exactly what reading each member
    whole through the zip reader reports; a second run opens no wheel."""
    def whole(path: str, flt: inspect_module.SymbolFilter, _ctx: object,
              progress: Callable[[str], None]) -> list[inspect_module.ObjectReport]:
        return list(inspect_module._inspect_wheel(path, flt, progress))

    for wheel in sorted(wheels_dir.glob("*.whl")):
        args = ["inspect", str(wheel), "--symbols", "all", "--json"]
        code, out, err = run(capsys, monkeypatch, tmp_path / "cache", *args, no_index=True)
        assert code == 0, err
        with monkeypatch.context() as patched:
            patched.setattr(inspect_module, "_inspect_local_wheel", whole)
            assert run(capsys, monkeypatch, tmp_path / "none", *args, no_index=True)[1] == out
        with monkeypatch.context() as patched:
            patched.setattr(abifit.remote.wheels, "open_wheel", _no_opening)
            assert run(capsys, monkeypatch, tmp_path / "cache", *args, no_index=True)[1] == out
        objects = json.loads(out)["objects"]
        assert objects and all(o["path"] == str(wheel) and o["symbols"] for o in objects)


def _no_opening(*_args: object) -> None:
    raise AssertionError("a wheel was opened")


def test_a_file_named_like_no_wheel_is_one_error(wheels_dir: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """`check PATH.whl` whose name is not a wheel's (a download saved as `x.whl`): one error
    line, exit 2, not an internal error."""
    odd = tmp_path / "download.whl"
    odd.write_bytes(next(wheels_dir.glob("hostpkg-1.0-py3*")).read_bytes())
    code, out, err = run(capsys, monkeypatch, tmp_path / "cache", "check", str(odd),
                         no_index=True)
    assert (code, out) == (2, "")
    assert err.strip() == f"error: {odd}: not a wheel: its name is not " \
        "NAME-VERSION[-BUILD]-PYTHON-ABI-PLATFORM.whl"
