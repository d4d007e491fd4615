"""Which wheel ships a soname: file lists of wheels on a loopback PEP 503 index built here, the
table's patterns, misses as lines rather than exceptions, the cache, and the fix in words."""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from abifit.errors import FormatError
from abifit.remote.diskcache import Cache
from abifit.remote.http import HttpClient
from abifit.remote.packageindex import IndexConfig, PackageIndex, Target
from abifit.remote.pagefetch import cached_fetch
from abifit.remote.runcontext import RemoteContext
from abifit.remote.wheelfiles import (
    LibrarySearch,
    LibraryWheel,
    find_library_wheels,
    load_library_table,
    origin_path,
    parse_library_table,
    render_library_fix,
)
from helpers import SRC
from httpserver import LoopbackIndex, LoopbackServer, Projects

TARGET = Target((3, 12), platforms=("manylinux_2_28_x86_64",))
TAG = "py3-none-manylinux_2_17_x86_64"
BLOB = os.urandom(2 << 20)  # incompressible bulk: the directory sits behind 2 MB

TABLE = parse_library_table({"libraries": [
    {"sonames": ["libfoo.so.13"], "wheels": [{"requirement": "nvidia-foo>=13,<14", "cuda": 13}]},
    {"sonames": ["libfoo-builtins.so.13.{minor}"],
     "wheels": [{"requirement": "nvidia-foo==13.{minor}.*", "cuda": 13}]},
    {"sonames": ["libbar.so.1"], "wheels": [{"requirement": "nvidia-bar-cu12"}]},
    {"sonames": ["libgone.so.1"], "wheels": [{"requirement": "nvidia-gone"}]},
    {"sonames": ["libarm.so.1"], "wheels": [{"requirement": "nvidia-arm"}]},
    {"sonames": ["libshared*.so.9"], "wheels": [
        {"requirement": "nvidia-shared-cu13", "cuda": 13},
        {"requirement": "nvidia-shared-cu12", "cuda": 12}]},
    {"sonames": ["libdriver.so.1"], "wheels": [], "note": "it comes with the driver"},
]}, "test table")


def make_wheel(name: str, version: str, files: dict[str, bytes], tag: str = TAG
               ) -> tuple[str, bytes]:
    """A wheel with the given members plus METADATA and WHEEL; bulk members are STORED."""
    dist = f"{name.replace('-', '_')}-{version}.dist-info"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, data in files.items():
            method = zipfile.ZIP_STORED if data is BLOB else zipfile.ZIP_DEFLATED
            zf.writestr(path, data, compress_type=method)
        metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        zf.writestr(f"{dist}/METADATA", metadata)
        zf.writestr(f"{dist}/WHEEL", f"Wheel-Version: 1.0\nTag: {tag}\n")
    return f"{name.replace('-', '_')}-{version}-{tag}.whl", buffer.getvalue()


def so(text: str) -> bytes:
    return b"\x7fELF" + text.encode()  # a directory listing needs no real ELF file


def projects() -> dict[str, list[tuple[str, bytes]]]:
    return {
        "nvidia-foo": [
            make_wheel("nvidia-foo", "12.9.0", {"nvidia/foo/lib/libfoo.so.12": so("12")}),
            make_wheel("nvidia-foo", "13.0.1", {
                "nvidia/cu13/lib/libfoo.so.13": so("13.0"),
                "nvidia/cu13/lib/libfoo-builtins.so.13.0": so("b13.0")}),
            make_wheel("nvidia-foo", "13.1.0", {
                "nvidia/cu13/lib/libfoo.so.13": so("13.1"),
                "nvidia/cu13/lib/libfoo-builtins.so.13.1": so("b13.1"),
                "nvidia/cu13/share/bulk.bin": BLOB}),
            make_wheel("nvidia-foo", "14.0.0", {"nvidia/cu14/lib/libfoo.so.14": so("14")}),
        ],
        "nvidia-bar-cu12": [
            make_wheel("nvidia-bar-cu12", "1.0", {"nvidia/bar/lib/libbar.so.1.0.5": so("bar")})],
        "nvidia-arm": [make_wheel("nvidia-arm", "1.0", {"nvidia/arm/lib/libarm.so.1": so("a")},
                                  tag="py3-none-manylinux_2_17_aarch64")],
        "nvidia-shared-cu13": [make_wheel("nvidia-shared-cu13", "9.1", {
            "nvidia/shared/lib/libshared.so.9": so("s13"),
            "nvidia/shared/lib/libshared_ops.so.9": so("o13")})],
        "nvidia-shared-cu12": [make_wheel("nvidia-shared-cu12", "9.0", {
            "nvidia/shared/lib/libshared.so.9": so("s12")})],
    }


@pytest.fixture(scope="module")
def index_projects() -> Projects:
    """What `loopback_index` (conftest.py) serves to this module: the projects above."""
    return projects()


def context(index_url: str, cache: Cache | None, *, online: bool = True) -> RemoteContext:
    client = HttpClient(retries=0, backoff=0.01) if online else None
    fetch = cached_fetch(client, cache)
    return RemoteContext(PackageIndex(fetch, IndexConfig(index_url=index_url)), client, cache,
                         TARGET)


def fetched(ctx: RemoteContext) -> tuple[int, int]:
    assert ctx.client is not None
    return ctx.client.transfer.requests, ctx.client.transfer.bytes_fetched


# --- finding ----------------------------------------------------------------------------------


def test_hit_is_in_the_newest_wheel_the_specifier_selects(loopback_index: LoopbackIndex) -> None:
    """libfoo.so.13 is found in nvidia-foo 13.1.0 (not 14.0.0, which ships libfoo.so.14), at
    nvidia/cu13/lib, with a few KB of a 2 MB wheel read."""
    ctx = context(loopback_index.url, None)
    search = find_library_wheels("libfoo.so.13", ctx, table=TABLE)
    assert search.wheels == (LibraryWheel(
        "libfoo.so.13", "nvidia-foo", "13.1.0",
        "nvidia_foo-13.1.0-py3-none-manylinux_2_17_x86_64.whl", "nvidia/cu13/lib/libfoo.so.13",
        "nvidia-foo>=13,<14", 13),)
    hit = search.wheels[0]
    assert hit.directory == "nvidia/cu13/lib"
    assert hit.command == "pip install 'nvidia-foo==13.1.0'"
    assert search.misses == () and search.reason == ""
    requests, size = fetched(ctx)
    assert size < 100_000, size
    assert ctx.state.wheel_sizes[hit.filename] > 2_000_000
    assert requests <= 3, requests  # the page, the directory (one suffix read)


def test_pattern_field_picks_the_release_of_that_minor(loopback_index: LoopbackIndex) -> None:
    """libfoo-builtins.so.13.0 fills `==13.{minor}.*` with 0: found in 13.0.1 although 13.1.0
    is newer."""
    search = find_library_wheels("libfoo-builtins.so.13.0", context(loopback_index.url, None),
                                 table=TABLE)
    assert [(w.version, w.member, w.requirement) for w in search.wheels] == [
        ("13.0.1", "nvidia/cu13/lib/libfoo-builtins.so.13.0", "nvidia-foo==13.0.*")]


def test_star_pattern_and_every_candidate_is_read(loopback_index: LoopbackIndex) -> None:
    """`libshared*.so.9` covers libshared_ops.so.9; a soname both CUDA lines ship is found in
    both, in table order."""
    ctx = context(loopback_index.url, None)
    both = find_library_wheels("libshared.so.9", ctx, table=TABLE)
    assert [(w.project, w.cuda) for w in both.wheels] == [
        ("nvidia-shared-cu13", 13), ("nvidia-shared-cu12", 12)]
    ops = find_library_wheels("libshared_ops.so.9", ctx, table=TABLE)
    assert [w.project for w in ops.wheels] == ["nvidia-shared-cu13"]
    assert ops.misses == ("nvidia-shared-cu12 9.0 has no file named libshared_ops.so.9",)


@pytest.mark.parametrize(("major", "projects"), [
    pytest.param(12, ["nvidia-shared-cu12"], id="cuda-12-only"),
    pytest.param(13, ["nvidia-shared-cu13"], id="cuda-13-only"),
    pytest.param(11, ["nvidia-shared-cu13", "nvidia-shared-cu12"], id="no-match-keeps-all"),
])
def test_cuda_major_leaves_out_the_other_line(loopback_index: LoopbackIndex, major: int,
                                              projects: list[str]) -> None:
    """With a CUDA major, candidates built for another major are left out, unless none is left."""
    search = find_library_wheels("libshared.so.9", context(loopback_index.url, None), table=TABLE,
                                 cuda_major=major)
    assert [w.project for w in search.wheels] == projects


@pytest.mark.parametrize(("soname", "miss"), [
    pytest.param("libbar.so.1", "nvidia-bar-cu12 1.0 has no file named libbar.so.1",
                 id="longer-file-name-is-no-hit"),
    pytest.param("libgone.so.1", "nvidia-gone: no project 'nvidia-gone' on http://",
                 id="project-not-on-index"),
    pytest.param("libarm.so.1", "nvidia-arm: no wheel of nvidia-arm fits cp312 on ",
                 id="no-wheel-for-target"),
])
def test_misses_are_lines_not_exceptions(loopback_index: LoopbackIndex, soname: str,
                                         miss: str) -> None:
    """A candidate that does not ship the soname, or cannot be read, is one line in `misses`,
    repeated in the one-line reason."""
    search = find_library_wheels(soname, context(loopback_index.url, None), table=TABLE)
    assert search.wheels == ()
    assert len(search.misses) == 1 and search.misses[0].startswith(miss), search.misses
    assert search.reason.startswith(f"abifit found no wheel that ships {soname} (")
    assert search.misses[0] in search.reason


def test_unknown_soname_and_noted_soname() -> None:
    """A soname no rule matches reads nothing; a rule with a note says why no wheel ships it."""
    ctx = context("http://127.0.0.1:9/simple", None)
    unknown = find_library_wheels("libnone.so.1", ctx, table=TABLE)
    assert unknown == LibrarySearch("libnone.so.1", ())
    assert unknown.reason == "abifit knows no wheel that may ship libnone.so.1"
    driver = find_library_wheels("libdriver.so.1", ctx, table=TABLE)
    assert driver.reason == "no wheel ships libdriver.so.1: it comes with the driver"
    assert fetched(ctx) == (0, 0)


def test_index_down_is_a_reason(tmp_path: Path) -> None:
    """An index that no longer answers gives a miss naming the URL, not an exception."""
    server = LoopbackServer().start()
    url = server.url("/simple")
    server.stop()
    search = find_library_wheels("libfoo.so.13", context(url, Cache(tmp_path)), table=TABLE)
    assert search.wheels == ()
    assert search.misses[0].startswith(f"nvidia-foo>=13,<14: {url}/nvidia-foo/: "), search.misses


def test_offline_without_cache_is_a_reason(loopback_index: LoopbackIndex, tmp_path: Path) -> None:
    """Offline with an empty cache, the miss says the page is not cached."""
    offline = context(loopback_index.url, Cache(tmp_path), online=False)
    search = find_library_wheels("libfoo.so.13", offline, table=TABLE)
    assert search.wheels == ()
    assert "offline" in search.misses[0] and "not in the cache" in search.misses[0]


def test_second_search_is_served_from_the_cache(loopback_index: LoopbackIndex,
                                                tmp_path: Path) -> None:
    """A second search with a new client and the same cache makes no request; offline, the cache
    alone gives the same answer."""
    first_ctx = context(loopback_index.url, Cache(tmp_path))
    first = find_library_wheels("libshared.so.9", first_ctx, table=TABLE)
    assert fetched(first_ctx)[0] > 0
    again_ctx = context(loopback_index.url, Cache(tmp_path))
    assert find_library_wheels("libshared.so.9", again_ctx, table=TABLE) == first
    assert fetched(again_ctx) == (0, 0)
    offline = context(loopback_index.url, Cache(tmp_path), online=False)
    assert find_library_wheels("libshared.so.9", offline, table=TABLE) == first


def test_progress_names_each_wheel_read(loopback_index: LoopbackIndex) -> None:
    """Progress gets one line per wheel whose file list is read."""
    lines: list[str] = []
    find_library_wheels("libshared.so.9", context(loopback_index.url, None), table=TABLE,
                        progress=lines.append)
    assert lines == [
        "libshared.so.9: reading the file list of "
        "nvidia_shared_cu13-9.1-py3-none-manylinux_2_17_x86_64.whl",
        "libshared.so.9: reading the file list of "
        "nvidia_shared_cu12-9.0-py3-none-manylinux_2_17_x86_64.whl"]


# --- the table --------------------------------------------------------------------------------


def test_shipped_table_agrees_with_soname_packages() -> None:
    """Every soname in data/soname_packages.json finds its package among the table's candidates;
    the ones without a package have a note."""
    data = SRC / "abifit/data/soname_packages.json"
    packages: dict[str, str | None] = json.loads(data.read_text("utf-8"))["sonames"]
    table = load_library_table()
    for soname, package in packages.items():
        names = [Requirement(c.requirement).name for c in table.candidates(soname)]
        if package is None:
            assert names == [] and table.note(soname), soname
        else:
            assert Requirement(package).name in names, (soname, names)


@pytest.mark.parametrize(("soname", "requirements"), [
    pytest.param("libnvrtc.so.13", ["nvidia-cuda-nvrtc>=13,<14"], id="cu13-unsuffixed"),
    pytest.param("libcudart.so.12", ["nvidia-cuda-runtime-cu12"], id="cu12-suffixed"),
    pytest.param("libnvrtc-builtins.so.13.0", ["nvidia-cuda-nvrtc==13.0.*"], id="minor-field"),
    pytest.param("libcudnn_graph.so.9", ["nvidia-cudnn-cu13>=9", "nvidia-cudnn-cu12>=9,<10"],
                 id="cudnn-both-lines"),
    pytest.param("libnvToolsExt.so.1", ["nvidia-nvtx-cu12<12.9"], id="nvtx-before-12.9"),
    pytest.param("libcuda.so.1", [], id="driver"),
])
def test_shipped_table_candidates(soname: str, requirements: list[str]) -> None:
    """The shipped table's candidates for a few sonames."""
    assert [c.requirement for c in load_library_table().candidates(soname)] == requirements


@pytest.mark.parametrize(("document", "problem"), [
    pytest.param({}, "no 'libraries' list", id="no-list"),
    pytest.param({"libraries": [{"sonames": [], "wheels": []}]}, "not a list of patterns",
                 id="no-sonames"),
    pytest.param({"libraries": [{"sonames": ["a.so"], "wheels": []}]}, "neither wheels nor a note",
                 id="no-wheels-no-note"),
    pytest.param({"libraries": [{"sonames": ["a.so.{x}"], "wheels": [{"requirement": "a=={y}"}]}]},
                 "'a=={y}' uses y, which not every pattern", id="unknown-field"),
    pytest.param({"libraries": [{"sonames": ["a.so"], "wheels": [{"requirement": "a b"}]}]},
                 "invalid requirement 'a b'", id="bad-requirement"),
    pytest.param({"libraries": [{"sonames": ["a.so"], "wheels": [{"requirement": "a",
                                                                  "cuda": "12"}]}]},
                 "'cuda' is not a number", id="cuda-not-int"),
])
def test_bad_table_is_a_format_error(document: object, problem: str) -> None:
    """A malformed table is a FormatError that names the table and the problem."""
    with pytest.raises(FormatError, match=r"^table\.json: ") as caught:
        parse_library_table(document, "table.json")
    assert problem in str(caught.value)


# --- the fix in words -------------------------------------------------------------------------


def wheel(project: str, version: str, member: str, cuda: int | None = 13) -> LibraryWheel:
    name = member.rsplit("/", 1)[1]
    return LibraryWheel(name, project, version, f"{project}-{version}.whl", member, project, cuda)


@pytest.mark.parametrize(("module", "directory", "entry"), [
    pytest.param("torch/lib/libtorch_cuda.so", "nvidia/cu13/lib", "$ORIGIN/../../nvidia/cu13/lib",
                 id="two-down"),
    pytest.param("pkg/_C.so", "nvidia/cudnn/lib", "$ORIGIN/../nvidia/cudnn/lib", id="one-down"),
    pytest.param("top.so", "nvidia/cu13/lib", "$ORIGIN/nvidia/cu13/lib", id="top-level"),
    pytest.param("nvidia/cu13/lib/x.so", "nvidia/cu13/lib", "$ORIGIN", id="same-directory"),
])
def test_origin_path(module: str, directory: str, entry: str) -> None:
    """The RPATH entry from a module to a directory, both relative to site-packages."""
    assert origin_path(module, directory) == entry


def test_fix_for_one_wheel() -> None:
    """One hit: the command, the file's path under site-packages, and the RPATH entry that would
    reach it from the module that needs it."""
    search = LibrarySearch("libnvrtc.so.13", (
        wheel("nvidia-cuda-nvrtc", "13.0.88", "nvidia/cu13/lib/libnvrtc.so.13"),))
    text = render_library_fix(search, site_packages="/venv/lib/python3.12/site-packages",
                              needed_by="sgl_kernel/common_ops.abi3.so")
    assert text.splitlines() == [
        "pip install 'nvidia-cuda-nvrtc==13.0.88'  # puts "
        "/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc.so.13",
        "The loader looks in that directory only when the RPATH or RUNPATH of "
        "sgl_kernel/common_ops.abi3.so reaches it ($ORIGIN/../nvidia/cu13/lib), when "
        "LD_LIBRARY_PATH names it, or when a library of that soname is already loaded "
        "(importing torch loads the NVIDIA libraries torch links)."]


def test_fix_for_two_cuda_lines() -> None:
    """Two hits: a line naming both with their CUDA majors, aligned commands, one note for the
    directories; without a module, the RPATH example is generic."""
    search = LibrarySearch("libcurand.so.10", (
        wheel("nvidia-curand", "10.4.5.25", "nvidia/cu13/lib/libcurand.so.10", 13),
        wheel("nvidia-curand-cu12", "10.3.10.19", "nvidia/curand/lib/libcurand.so.10", 12)))
    lines = render_library_fix(search).splitlines()
    assert lines[0] == ("libcurand.so.10 is in nvidia-curand 10.4.5.25 (CUDA 13) and "
                        "nvidia-curand-cu12 10.3.10.19 (CUDA 12); install the one built for the "
                        "CUDA the rest of the environment uses:")
    assert lines[1:3] == [
        "pip install 'nvidia-curand==10.4.5.25'        # puts "
        "<site-packages>/nvidia/cu13/lib/libcurand.so.10",
        "pip install 'nvidia-curand-cu12==10.3.10.19'  # puts "
        "<site-packages>/nvidia/curand/lib/libcurand.so.10"]
    assert lines[3].startswith("The loader looks in those directories only when the RPATH or "
                               "RUNPATH of the module that needs it reaches them "
                               "($ORIGIN/../nvidia/cu13/lib from a module one directory below")


def test_fix_outside_nvidia_and_cuda() -> None:
    """The remark about torch is made only for libraries under nvidia/, and CUDA is named only
    when the wheels are built for different CUDA majors."""
    search = LibrarySearch("libx.so.1", (wheel("x", "1.0", "x/lib/libx.so.1", None),
                                         wheel("y", "2.0", "y/libx.so.1", None)))
    text = render_library_fix(search)
    assert text.splitlines()[0] == "libx.so.1 is in x 1.0 and y 2.0; install one of them:"
    assert "torch" not in text and "CUDA" not in text


def test_fix_when_nothing_is_found_is_the_reason() -> None:
    """Without hits, the text is the search's one-line reason."""
    search = LibrarySearch("libfoo.so.1", (), ("foo: no project 'foo' on https://pypi.org/simple",))
    assert render_library_fix(search) == (
        "abifit found no wheel that ships libfoo.so.1 "
        "(foo: no project 'foo' on https://pypi.org/simple)")
