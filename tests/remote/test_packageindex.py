"""Package index client: PEP 691/503 pages, PEP 658 metadata, pip configuration, wheel selection."""

from __future__ import annotations

import hashlib
import json
import re
import urllib.error
import urllib.request
import zipfile
from collections.abc import Mapping
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.tags import Tag, sys_tags
from packaging.version import Version

from abifit.errors import AbifitError, FormatError, UsageError
from abifit.remote.packageindex import (
    ACCEPT,
    Candidate,
    IndexConfig,
    IndexFile,
    IndexUnavailable,
    NoMatchingWheel,
    PackageIndex,
    PackageNotFound,
    Target,
    compatible_platforms,
    find_links_files,
    parse_simple_html,
    parse_simple_json,
    parse_simple_page,
    pip_config_files,
    pip_index_config,
    releases,
    select,
    select_one,
)

PYPI = "https://pypi.org/simple"
CU130 = "https://docs.sglang.ai/whl/cu130"
FILES = "https://files.pythonhosted.org/packages"
JSON_TYPE = "application/vnd.pypi.simple.v1+json"

Response = tuple[int, Mapping[str, str], bytes, str]


def sha(text: str) -> str:
    """A real-looking sha256 for a fixture file."""
    return hashlib.sha256(text.encode()).hexdigest()


def pypi_entry(filename: str, requires_python: str = ">=3.10", yanked: bool | str = False,
               metadata: bool = False) -> dict[str, object]:
    """One files[] entry the way PyPI writes it."""
    entry: dict[str, object] = {
        "filename": filename,
        "hashes": {"sha256": sha(filename)},
        "requires-python": requires_python,
        "size": 378865481,
        "upload-time": "2025-09-09T09:29:11.627959Z",
        "url": f"{FILES}/75/13/{sha(filename)[:56]}/{filename}",
        "yanked": yanked,
    }
    if metadata:
        entry["core-metadata"] = {"sha256": sha(filename + ".metadata")}
        entry["data-dist-info-metadata"] = {"sha256": sha(filename + ".metadata")}
    return entry


SGL_PYPI_FILES = [
    pypi_entry("sgl_kernel-0.1.0-cp39-abi3-manylinux2014_x86_64.whl", ">=3.9"),
    pypi_entry("sgl_kernel-0.3.19-cp310-abi3-manylinux2014_x86_64.whl",
               yanked="broken build: missing common_ops"),
    pypi_entry("sgl_kernel-0.3.20-cp310-abi3-manylinux2014_aarch64.whl"),
    pypi_entry("sgl_kernel-0.3.20-cp310-abi3-manylinux2014_x86_64.whl"),
    pypi_entry("sgl_kernel-0.3.21-cp310-abi3-manylinux2014_aarch64.whl", metadata=True),
    pypi_entry("sgl_kernel-0.3.21-cp310-abi3-manylinux2014_x86_64.whl", metadata=True),
    pypi_entry("sgl_kernel-0.3.21-cp312-cp312-manylinux_2_28_x86_64.whl", ">=3.12"),
    pypi_entry("sgl_kernel-0.3.22rc1-cp310-abi3-manylinux2014_x86_64.whl"),
    pypi_entry("sgl_kernel-0.3.21.tar.gz"),
    pypi_entry("sgl_kernel-not-a-wheel.whl"),
]


def simple_json(name: str, files: list[dict[str, object]], api: str = "1.1") -> bytes:
    """A PEP 691 project page."""
    versions = sorted({str(f["filename"]).split("-")[1] for f in files})
    return json.dumps({"meta": {"_last-serial": 39611960, "api-version": api}, "name": name,
                       "versions": versions, "files": files}).encode()


SGL_PYPI = simple_json("sgl-kernel", SGL_PYPI_FILES)

# The cu130 index serves relative URLs, like a static file tree.
SGL_CU130 = simple_json("sgl-kernel", [
    {"filename": "sgl_kernel-0.3.21+cu130-cp310-abi3-manylinux2014_x86_64.whl",
     "url": "../../files/sgl_kernel-0.3.21%2Bcu130-cp310-abi3-manylinux2014_x86_64.whl",
     "hashes": {"sha256": sha("0.3.21+cu130")}, "requires-python": ">=3.10",
     "dist-info-metadata": True},
    {"filename": "sgl_kernel-0.3.20+cu130-cp310-abi3-manylinux2014_x86_64.whl",
     "url": "../../files/sgl_kernel-0.3.20%2Bcu130-cp310-abi3-manylinux2014_x86_64.whl",
     "hashes": {"sha256": sha("0.3.20+cu130")}},
    # also on PyPI: the primary index's copy wins
    pypi_entry("sgl_kernel-0.3.21-cp310-abi3-manylinux2014_x86_64.whl") | {"size": 1},
], api="1.0")

TORCH_HTML = b"""<!DOCTYPE html>
<html>
  <head><title>Links for torch</title><base href="/whl/"></head>
  <body>
    <h1>Links for torch</h1>
    <a href="cu130/torch-2.9.1%2Bcu130-cp311-cp311-manylinux_2_28_x86_64.whl#sha256=aaa111"
       data-requires-python="&gt;=3.10" data-core-metadata="sha256=bbb222"
       >torch-2.9.1+cu130-cp311-cp311-manylinux_2_28_x86_64.whl</a><br/>
    <a href="cu130/torch-2.9.0%2Bcu130-cp311-cp311-manylinux_2_28_x86_64.whl#sha256=ccc333"
       data-requires-python="&gt;=3.9.0, !=3.9.1" data-yanked="bad &amp; broken"
       data-dist-info-metadata="true"
       >torch-2.9.0+cu130-cp311-cp311-manylinux_2_28_x86_64.whl</a><br/>
    <a href="https://other.example/torch-2.8.0-cp311-cp311-win_amd64.whl" data-yanked
       >torch-2.8.0-cp311-cp311-win_amd64.whl</a>
    <a>no href</a>
  </body>
</html>
"""


class FakeIndex:
    """A fetch function over canned responses that records what was asked."""

    def __init__(self, pages: Mapping[str, Response]) -> None:
        self.pages = dict(pages)
        self.requests: list[tuple[str, dict[str, str]]] = []

    def __call__(self, url: str, headers: Mapping[str, str]) -> Response:
        self.requests.append((url, dict(headers)))
        if url not in self.pages:
            return 404, {"Content-Type": "text/html"}, b"<h1>Not Found</h1>", url
        return self.pages[url]


def json_page(url: str, body: bytes) -> Response:
    return 200, {"Content-Type": JSON_TYPE}, body, url


def sgl_index() -> FakeIndex:
    return FakeIndex({f"{PYPI}/sgl-kernel/": json_page(f"{PYPI}/sgl-kernel/", SGL_PYPI),
                      f"{CU130}/sgl-kernel/": json_page(f"{CU130}/sgl-kernel/", SGL_CU130)})


def sgl_files() -> list[IndexFile]:
    config = IndexConfig(index_url=PYPI, extra_index_urls=(CU130,))
    return PackageIndex(sgl_index(), config).project_files("sgl-kernel")


TARGET = Target((3, 11), platforms=("manylinux_2_28_x86_64",))


def chosen(requirement: str, target: Target = TARGET, prereleases: bool = False) -> list[str]:
    return [c.file.filename for c in select(sgl_files(), Requirement(requirement), target,
                                            prereleases=prereleases)]


# --- parsing -------------------------------------------------------------------------------------


def test_json_page_fields() -> None:
    """A PEP 691 page yields every file with hashes, requires-python, yanked, metadata and size."""
    files = parse_simple_json(SGL_PYPI, f"{PYPI}/sgl-kernel/")
    assert len(files) == len(SGL_PYPI_FILES)
    yanked = files[1]
    assert yanked.is_yanked and yanked.yanked == "broken build: missing common_ops"
    meta = files[5]
    assert meta.filename == "sgl_kernel-0.3.21-cp310-abi3-manylinux2014_x86_64.whl"
    assert meta.sha256 == sha(meta.filename) and meta.size == 378865481
    assert meta.metadata == {"sha256": sha(meta.filename + ".metadata")}
    assert meta.requires_python == ">=3.10" and not meta.is_yanked
    assert meta.upload_time == "2025-09-09T09:29:11.627959Z"
    assert meta.url.startswith(FILES) and meta.is_wheel
    assert files[0].metadata is False and not files[0].has_metadata


def test_json_relative_urls_and_legacy_metadata_key() -> None:
    """Relative URLs resolve against the page; `dist-info-metadata` (PEP 658) still counts."""
    files = parse_simple_json(SGL_CU130, f"{CU130}/sgl-kernel/")
    assert files[0].url == ("https://docs.sglang.ai/whl/files/"
                            "sgl_kernel-0.3.21%2Bcu130-cp310-abi3-manylinux2014_x86_64.whl")
    assert files[0].metadata is True and files[1].metadata is False
    assert files[1].requires_python is None and files[1].size is None


@pytest.mark.parametrize(
    ("body", "problem"),
    [(b"<html>", "not a PEP 691 JSON page"),
     (b"[]", "not an object"),
     (b'{"meta": {"api-version": "2.0"}, "files": []}', "unsupported simple API version '2.0'"),
     (b'{"meta": {"api-version": "1.0"}}', "no files list"),
     (b'{"meta": {"api-version": "1.0"}, "files": [{"filename": "x.whl"}]}',
      "lacks filename or url")],
    ids=["not-json", "not-object", "api-v2", "no-files", "no-url"],
)
def test_json_page_errors(body: bytes, problem: str) -> None:
    """A broken JSON page is a FormatError naming the page URL and the problem."""
    with pytest.raises(FormatError, match=problem) as caught:
        parse_simple_json(body, "https://idx.example/simple/x/")
    assert str(caught.value).startswith("https://idx.example/simple/x/: ")


def test_html_page_attributes() -> None:
    """PEP 503 anchors: base href, sha256 fragments, unescaped data attributes, PEP 714 keys."""
    files = parse_simple_html(TORCH_HTML, "https://download.pytorch.org/whl/cu130/torch/")
    assert [f.filename for f in files] == [
        "torch-2.9.1+cu130-cp311-cp311-manylinux_2_28_x86_64.whl",
        "torch-2.9.0+cu130-cp311-cp311-manylinux_2_28_x86_64.whl",
        "torch-2.8.0-cp311-cp311-win_amd64.whl"]
    new, yanked, bare = files
    assert new.url == ("https://download.pytorch.org/whl/cu130/"
                       "torch-2.9.1%2Bcu130-cp311-cp311-manylinux_2_28_x86_64.whl")
    assert new.hashes == {"sha256": "aaa111"} and new.requires_python == ">=3.10"
    assert new.metadata == {"sha256": "bbb222"} and not new.is_yanked
    assert yanked.yanked == "bad & broken" and yanked.metadata is True
    assert yanked.requires_python == ">=3.9.0, !=3.9.1"
    assert bare.yanked is True and bare.url == "https://other.example/torch-2.8.0-cp311-cp311-win_amd64.whl"
    assert bare.hashes == {} and bare.metadata is False


@pytest.mark.parametrize(
    ("content_type", "body"),
    [(JSON_TYPE, SGL_CU130), ("application/vnd.pypi.simple.v1+html", TORCH_HTML),
     ("text/html; charset=utf-8", TORCH_HTML), ("", SGL_CU130),
     ("application/octet-stream", TORCH_HTML)],
    ids=["json", "v1-html", "html-charset", "sniffed-json", "sniffed-html"],
)
def test_parser_chosen_by_content_type(content_type: str, body: bytes) -> None:
    """The Content-Type picks the parser; unknown types are sniffed."""
    assert len(parse_simple_page(body, "https://x.example/simple/p/", content_type)) == 3


def test_wheel_name_parts_and_bad_names() -> None:
    """wheel() gives name, version, build and tags; sdists and invalid names give None."""
    good = IndexFile("sgl_kernel-0.3.21+cu130-2-cp310-abi3-manylinux2014_x86_64.whl", "u")
    wheel = good.wheel()
    assert wheel is not None
    name, version, build, tags = wheel
    assert (name, version, build) == ("sgl-kernel", Version("0.3.21+cu130"), (2, ""))
    assert tags == {Tag("cp310", "abi3", "manylinux2014_x86_64")}
    assert IndexFile("sgl_kernel-0.3.21.tar.gz", "u").wheel() is None
    assert IndexFile("sgl_kernel-not-a-wheel.whl", "u").wheel() is None
    assert IndexFile("sgl_kernel-0.3.21.tar.gz", "u").project() == "sgl-kernel"


# --- targets -------------------------------------------------------------------------------------


def test_manylinux_implies_older_glibc() -> None:
    """manylinux_2_28_x86_64 accepts 2_27 .. 2_5 and the legacy names, newest first."""
    platforms = compatible_platforms("manylinux_2_28_x86_64")
    assert platforms[:3] == ["linux_x86_64", "manylinux_2_28_x86_64", "manylinux_2_27_x86_64"]
    for older in ("manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux2010_x86_64",
                  "manylinux1_x86_64", "manylinux_2_5_x86_64"):
        assert older in platforms
    assert platforms.index("manylinux2014_x86_64") == platforms.index("manylinux_2_17_x86_64") + 1
    assert "manylinux_2_29_x86_64" not in platforms


@pytest.mark.parametrize(
    ("platform", "oldest", "absent"),
    [("manylinux_2_28_aarch64", "manylinux2014_aarch64", "manylinux_2_16_aarch64"),
     ("manylinux2014_x86_64", "manylinux1_x86_64", "manylinux_2_18_x86_64"),
     ("musllinux_1_2_x86_64", "musllinux_1_0_x86_64", "manylinux_2_17_x86_64"),
     ("macosx_14_0_arm64", "macosx_10_4_universal2", "macosx_10_9_x86_64"),
     ("win_amd64", "win_amd64", "linux_x86_64")],
    ids=["aarch64-stops-at-2_17", "legacy-name", "musllinux", "macos", "windows"],
)
def test_platform_expansion(platform: str, oldest: str, absent: str) -> None:
    """Each platform family expands to the platforms an installer there accepts."""
    platforms = compatible_platforms(platform)
    assert platforms[-1] == oldest and absent not in platforms


def test_current_target_is_sys_tags() -> None:
    """Target.current() accepts exactly packaging's sys_tags(), in the same order."""
    assert Target.current().supported_tags() == tuple(sys_tags())


def test_requires_python() -> None:
    """Requires-Python is checked against the target's Python; an invalid one admits all."""
    assert TARGET.python_fits(">=3.10") and not TARGET.python_fits(">=3.12")
    assert TARGET.python_fits("this is not a specifier") and TARGET.python_fits(None)


# --- selection -----------------------------------------------------------------------------------


def test_picks_manylinux2014_for_glibc_2_28() -> None:
    """cp311 on manylinux_2_28 takes the cp310-abi3 manylinux2014 wheel, all there is."""
    pypi = parse_simple_json(SGL_PYPI, f"{PYPI}/sgl-kernel/")
    best = select_one(pypi, Requirement("sgl-kernel==0.3.20"), TARGET)
    assert best.file.filename == "sgl_kernel-0.3.20-cp310-abi3-manylinux2014_x86_64.whl"
    assert best.tag == Tag("cp310", "abi3", "manylinux2014_x86_64")
    assert best.version == Version("0.3.20")


def test_cp312_only_and_other_arch_excluded() -> None:
    """A cp312 wheel is not for 3.11, and aarch64 wheels are not for x86_64."""
    names = chosen("sgl-kernel==0.3.21")
    assert "sgl_kernel-0.3.21-cp312-cp312-manylinux_2_28_x86_64.whl" not in names
    assert not any("aarch64" in n for n in names)
    cp312 = chosen("sgl-kernel==0.3.21", Target((3, 12), platforms=("manylinux_2_28_x86_64",)))
    assert cp312[1] == "sgl_kernel-0.3.21-cp312-cp312-manylinux_2_28_x86_64.whl"


def test_cp312_wheel_ranks_above_abi3_for_cp312() -> None:
    """For 3.12 the version-specific wheel ranks before the abi3 wheel of the same version."""
    target = Target((3, 12), platforms=("manylinux_2_28_x86_64",))
    found = select(sgl_files(), Requirement("sgl-kernel==0.3.21"), target)
    plain = [c for c in found if c.version == Version("0.3.21")]
    assert [c.tag.abi for c in plain] == ["cp312", "abi3"]
    assert plain[0].tag_rank < plain[1].tag_rank


def test_abi3_for_cp39_and_newer() -> None:
    """A cp39-abi3 wheel fits 3.9 and 3.13, not 3.8."""
    for minor, fits in ((8, False), (9, True), (13, True)):
        names = chosen("sgl-kernel<0.2", Target((3, minor), platforms=("manylinux_2_28_x86_64",)))
        assert bool(names) is fits, minor


def test_order_newest_first() -> None:
    """Candidates come newest version first; local labels sort above the plain release."""
    assert chosen("sgl-kernel") == [
        "sgl_kernel-0.3.21+cu130-cp310-abi3-manylinux2014_x86_64.whl",
        "sgl_kernel-0.3.21-cp310-abi3-manylinux2014_x86_64.whl",
        "sgl_kernel-0.3.20+cu130-cp310-abi3-manylinux2014_x86_64.whl",
        "sgl_kernel-0.3.20-cp310-abi3-manylinux2014_x86_64.whl",
        "sgl_kernel-0.1.0-cp39-abi3-manylinux2014_x86_64.whl",
    ]


@pytest.mark.parametrize(
    ("specifier", "expected"),
    [("==0.3.21", ["0.3.21+cu130", "0.3.21"]),
     ("==0.3.21+cu130", ["0.3.21+cu130"]),
     ("===0.3.21+cu130", ["0.3.21+cu130"]),
     ("==0.3.21+cu128", []),
     (">0.3.20", ["0.3.21+cu130", "0.3.21"]),
     (">0.3.21", []),
     ("<=0.3.20", ["0.3.20+cu130", "0.3.20", "0.1.0"]),
     ("==0.3.*", ["0.3.21+cu130", "0.3.21", "0.3.20+cu130", "0.3.20"])],
    ids=["plain-matches-local", "local-exact", "arbitrary-equality", "other-local",
         "gt", "gt-excludes-local-of-same", "le-includes-local", "wildcard"],
)
def test_local_version_labels(specifier: str, expected: list[str]) -> None:
    """Local labels follow PEP 440: ==X matches X+label, ==X+label only that label."""
    found = select(sgl_files(), Requirement(f"sgl-kernel{specifier}"), TARGET)
    assert [str(c.version) for c in found] == expected


@pytest.mark.parametrize(
    ("specifier", "included"),
    [("", False), (">=0.3.19,<0.3.20", False), ("==0.3.19", True), ("===0.3.19", True),
     ("==0.3.19.*", False)],
    ids=["unpinned", "range", "pinned", "arbitrary", "wildcard"],
)
def test_yanked_only_when_pinned(specifier: str, included: bool) -> None:
    """A yanked file is used only when == (no wildcard) or === pins its version."""
    names = chosen(f"sgl-kernel{specifier}")
    assert ("sgl_kernel-0.3.19-cp310-abi3-manylinux2014_x86_64.whl" in names) is included


def test_prereleases() -> None:
    """Pre-releases are used when asked for or when the specifier names one."""
    rc = "sgl_kernel-0.3.22rc1-cp310-abi3-manylinux2014_x86_64.whl"
    assert rc not in chosen("sgl-kernel")
    assert chosen("sgl-kernel", prereleases=True)[0] == rc
    assert chosen("sgl-kernel>=0.3.22rc1") == [rc]
    assert chosen("sgl-kernel>0.3.21") == []


def test_requires_python_respected() -> None:
    """A file whose Requires-Python excludes the target is not a candidate."""
    old = Target((3, 9), platforms=("manylinux_2_28_x86_64",))
    assert chosen("sgl-kernel", old) == ["sgl_kernel-0.1.0-cp39-abi3-manylinux2014_x86_64.whl"]


def test_releases_groups_wheels() -> None:
    """releases() lists every wheel of each version, newest first, sdists and bad names left out."""
    grouped = releases(sgl_files(), "SGL_Kernel")
    assert list(grouped)[:3] == [Version("0.3.22rc1"), Version("0.3.21+cu130"), Version("0.3.21")]
    assert [f.filename for f in grouped[Version("0.3.21")]] == [
        "sgl_kernel-0.3.21-cp310-abi3-manylinux2014_aarch64.whl",
        "sgl_kernel-0.3.21-cp310-abi3-manylinux2014_x86_64.whl",
        "sgl_kernel-0.3.21-cp312-cp312-manylinux_2_28_x86_64.whl"]


def test_build_tag_breaks_ties() -> None:
    """Of two uploads of one version with the same tag, the higher build number ranks first."""
    files = [IndexFile(f"demo-1.0-{b}-py3-none-any.whl", f"u{b}") for b in ("1", "3", "2")]
    found = select(files, Requirement("demo"), TARGET)
    assert [c.file.filename for c in found] == [
        "demo-1.0-3-py3-none-any.whl", "demo-1.0-2-py3-none-any.whl", "demo-1.0-1-py3-none-any.whl"]
    assert isinstance(found[0], Candidate) and len(set(found)) == 3  # hashable values


# --- errors --------------------------------------------------------------------------------------


def no_match(requirement: str, target: Target = TARGET) -> NoMatchingWheel:
    with pytest.raises(NoMatchingWheel) as caught:
        select_one(sgl_files(), Requirement(requirement), target)
    return caught.value


def test_no_version_matches() -> None:
    """An unknown version names the nearest versions that fit and the platforms offered."""
    error = no_match("sgl-kernel==0.3.23")
    assert str(error) == (
        "no wheel of sgl-kernel==0.3.23 fits cp311 on manylinux_2_28_x86_64: no version matches"
        " ==0.3.23; platforms offered: manylinux2014_aarch64, manylinux2014_x86_64,"
        " manylinux_2_28_x86_64\n"
        "hint: nearest versions with a wheel for cp311 on manylinux_2_28_x86_64:"
        " 0.3.21+cu130, 0.3.21, 0.3.20+cu130")
    assert error.nearest == (Version("0.3.21+cu130"), Version("0.3.21"), Version("0.3.20+cu130"))
    assert isinstance(error, AbifitError)


def test_no_wheel_for_platform() -> None:
    """A platform no wheel is built for: the message lists the platforms that exist."""
    error = no_match("sgl-kernel==0.3.21", Target((3, 11), platforms=("macosx_14_0_arm64",)))
    assert error.line == (
        "no wheel of sgl-kernel==0.3.21 fits cp311 on macosx_14_0_arm64: the wheels of"
        " 0.3.21+cu130, 0.3.21 are for cp310-abi3; platforms offered:"
        " manylinux2014_aarch64, manylinux2014_x86_64, manylinux_2_28_x86_64")
    assert error.hint == ("no version of sgl-kernel has a wheel for cp311 on macosx_14_0_arm64;"
                          " nearest versions: 0.3.21+cu130, 0.3.21, 0.3.20+cu130")


def test_a_wheel_for_a_newer_glibc_names_it() -> None:
    """A release whose wheels for the machine type are all manylinux_2_35 (mlx-cpu 0.32.4)
    on a manylinux_2_34 target: the glibc it needs, and the way to check the rest of it."""
    files = [IndexFile(f"mlx_cpu-0.32.4-py3-none-{p}.whl", p)
             for p in ("manylinux_2_35_x86_64", "manylinux_2_35_aarch64", "win_amd64")]
    with pytest.raises(NoMatchingWheel) as caught:
        select_one(files, Requirement("mlx-cpu==0.32.4"),
                   Target((3, 11), platforms=("manylinux_2_34_x86_64",)))
    assert "need glibc 2.35 or newer (manylinux_2_35_x86_64)" in caught.value.line
    assert caught.value.hint is not None and caught.value.hint.startswith(
        "a host with glibc 2.35 or newer, or an older release; `--platform "
        "manylinux_2_35_x86_64` checks what else it needs")


@pytest.mark.parametrize(
    ("requirement", "target", "reason", "hint"),
    [("sgl-kernel>0.3.21", TARGET, "only pre-releases match",
      "allow pre-releases to use 0.3.22rc1"),
     ("sgl-kernel>=0.3.19,<0.3.20", TARGET, "every matching file is yanked",
      "pin ==0.3.19 to use a yanked release"),
     ("sgl-kernel===0.3.20", Target((3, 9), platforms=("manylinux_2_28_x86_64",)),
      "its wheels require Python >=3.10", "nearest versions with a wheel for cp39 on"
      " manylinux_2_28_x86_64: 0.1.0")],
    ids=["prerelease", "yanked", "requires-python"],
)
def test_no_match_reasons(requirement: str, target: Target, reason: str, hint: str) -> None:
    """Each filter that removes every wheel explains itself and hints at the way out."""
    error = no_match(requirement, target)
    assert reason in error.line and error.hint is not None and error.hint.startswith(hint)


def test_project_without_wheels() -> None:
    """A project with only sdists says so."""
    files = [IndexFile("demo-1.0.tar.gz", "u")]
    with pytest.raises(NoMatchingWheel, match="demo has no wheels"):
        select_one(files, Requirement("demo"), TARGET)


# --- the index client ----------------------------------------------------------------------------


def test_project_files_merges_indexes() -> None:
    """Primary then extra index; the first copy of a file name wins; names are canonicalized."""
    fetch = sgl_index()
    index = PackageIndex(fetch, IndexConfig(index_url=PYPI + "/", extra_index_urls=(CU130,)))
    files = index.project_files("SGL_Kernel")
    assert [url for url, _h in fetch.requests] == [f"{PYPI}/sgl-kernel/", f"{CU130}/sgl-kernel/"]
    assert fetch.requests[0][1] == {"Accept": ACCEPT}
    assert ACCEPT == "application/vnd.pypi.simple.v1+json, text/html;q=0.1"
    name = "sgl_kernel-0.3.21-cp310-abi3-manylinux2014_x86_64.whl"
    copies = [f for f in files if f.filename == name]
    assert len(copies) == 1 and copies[0].size == 378865481
    assert len(files) == len(SGL_PYPI_FILES) + 2
    index.project_files("sgl-kernel")
    assert len(fetch.requests) == 2  # cached


def test_html_fallback_and_redirect() -> None:
    """An HTML answer is parsed as PEP 503; relative links resolve against the final URL."""
    final = "https://mirror.example/simple/torch/"
    page = b'<a href="../../f/torch-2.9.1-cp311-cp311-manylinux_2_28_x86_64.whl#sha256=abc">t</a>'
    fetch = FakeIndex({"https://idx.example/simple/torch/":
                       (200, {"content-type": "text/html"}, page, final)})
    files = PackageIndex(fetch, IndexConfig(index_url="https://idx.example/simple")).project_files(
        "torch")
    assert files[0].url == "https://mirror.example/f/torch-2.9.1-cp311-cp311-manylinux_2_28_x86_64.whl"


def test_unknown_project() -> None:
    """A project no source has is PackageNotFound naming the sources; local names give a hint."""
    with pytest.raises(PackageNotFound) as caught:
        PackageIndex(FakeIndex({})).project_files("sgl-kernal")
    assert str(caught.value) == "no project 'sgl-kernal' on https://pypi.org/simple"


def test_unknown_project_did_you_mean(tmp_path: Path) -> None:
    """With a file:// index, close names are suggested."""
    for name in ("sgl-kernel", "torch", "flashinfer-python"):
        (tmp_path / name).mkdir()
    index = PackageIndex(FakeIndex({}), IndexConfig(extra_index_urls=(tmp_path.as_uri(),)))
    with pytest.raises(PackageNotFound) as caught:
        index.project_files("sgl_kernal")
    assert str(caught.value).splitlines() == [
        f"no project 'sgl_kernal' on https://pypi.org/simple, {tmp_path.as_uri()}",
        "hint: did you mean 'sgl-kernel'?"]


def test_unreachable_index() -> None:
    """A server error raises IndexUnavailable; with warn, the index is skipped and reported."""
    def down(url: str, headers: Mapping[str, str]) -> Response:
        raise ConnectionRefusedError(111, "Connection refused")

    with pytest.raises(IndexUnavailable, match=r"https://pypi.org/simple/x/: .*refused"):
        PackageIndex(down).project_files("x")
    fetch = FakeIndex({f"{PYPI}/sgl-kernel/": (503, {}, b"", f"{PYPI}/sgl-kernel/"),
                       f"{CU130}/sgl-kernel/": json_page(f"{CU130}/sgl-kernel/", SGL_CU130)})
    warnings: list[str] = []
    index = PackageIndex(fetch, IndexConfig(extra_index_urls=(CU130,)), warn=warnings.append)
    assert len(index.project_files("sgl-kernel")) == 3
    assert warnings == [f"skipping {PYPI}/sgl-kernel/: HTTP 503"]


def test_client_that_raises_for_404() -> None:
    """A fetch that raises an error with status 404 (as abifit.remote.http does): not here."""
    class Missing(AbifitError):
        status = 404

    def fetch(url: str, headers: Mapping[str, str]) -> Response:
        if url.startswith(CU130):
            raise Missing(f"{url}: not found (HTTP 404)")
        return json_page(url, SGL_PYPI)

    index = PackageIndex(fetch, IndexConfig(extra_index_urls=(CU130,)))
    assert len(index.project_files("sgl-kernel")) == len(SGL_PYPI_FILES)


def test_metadata_verified() -> None:
    """PEP 658 metadata is fetched from <url>.metadata and checked against its sha256."""
    body = b"Metadata-Version: 2.1\nName: sgl-kernel\nVersion: 0.3.21\n"
    file = IndexFile("sgl_kernel-0.3.21-cp310-abi3-manylinux2014_x86_64.whl",
                     f"{FILES}/x/sgl_kernel-0.3.21-cp310-abi3-manylinux2014_x86_64.whl",
                     metadata={"sha256": hashlib.sha256(body).hexdigest()})
    fetch = FakeIndex({file.url + ".metadata": (200, {}, body, file.url + ".metadata")})
    index = PackageIndex(fetch)
    assert index.metadata(file) == body
    assert index.metadata(IndexFile(file.filename, file.url)) is None
    assert len(fetch.requests) == 1
    tampered = FakeIndex({file.url + ".metadata": (200, {}, body + b"x", file.url)})
    with pytest.raises(FormatError, match=r"\.metadata: sha256 is [0-9a-f]{64}, the index says"):
        PackageIndex(tampered).metadata(file)


# --- local sources -------------------------------------------------------------------------------


def make_wheel(directory: Path, filename: str) -> Path:
    """A real (tiny) wheel file."""
    name, version = filename.split("-")[:2]
    dist_info = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(directory / filename, "w") as zf:
        zf.writestr(f"{name}/__init__.py", "")
        zf.writestr(f"{dist_info}/METADATA",
                    f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        zf.writestr(f"{dist_info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: false\n")
        zf.writestr(f"{dist_info}/RECORD", "")
    return directory / filename


def test_find_links_directory(tmp_path: Path) -> None:
    """A find-links directory lists its distributions as file:// URLs; other files are ignored."""
    wheel = make_wheel(tmp_path, "demo_ext-1.0+cu130-cp311-cp311-linux_x86_64.whl")
    (tmp_path / (wheel.name + ".metadata")).write_text("Name: demo-ext\n")
    make_wheel(tmp_path, "other-2.0-py3-none-any.whl")
    (tmp_path / "demo_ext-0.9.tar.gz").write_bytes(b"")
    (tmp_path / "README.txt").write_text("")
    files = find_links_files(tmp_path)
    assert [f.filename for f in files] == ["demo_ext-0.9.tar.gz", wheel.name,
                                           "other-2.0-py3-none-any.whl"]
    assert files[1].url == wheel.resolve().as_uri() and "%2B" in files[1].url
    assert files[1].size == wheel.stat().st_size and files[1].metadata is True
    index = PackageIndex(FakeIndex({}), IndexConfig(no_index=True, find_links=(str(tmp_path),)))
    demo = index.project_files("demo-ext")
    assert [f.filename for f in demo] == ["demo_ext-0.9.tar.gz", wheel.name]
    assert index.metadata(demo[1]) == b"Name: demo-ext\n"
    best = select_one(demo, Requirement("demo-ext==1.0"), TARGET)
    assert best.tag == Tag("cp311", "cp311", "linux_x86_64")


def test_file_index(tmp_path: Path) -> None:
    """A file:// simple index: index.html pages with relative links, or bare directories."""
    simple = tmp_path / "simple"
    (simple / "packaging").mkdir(parents=True)
    (simple / "packaging" / "index.html").write_text(
        '<!DOCTYPE html><html><body>\n<a href="../../files/packaging-26.3-py3-none-any.whl'
        '#sha256=d7193f7c8e4e93f444fde0262bf90af30e16fa0ad0ad44cb553c87339b23cd1c">'
        'packaging-26.3-py3-none-any.whl</a>\n</body></html>\n')
    (simple / "demo").mkdir()
    make_wheel(simple / "demo", "demo-1.0-py3-none-any.whl")
    fetch = FakeIndex({})
    index = PackageIndex(fetch, IndexConfig(no_index=False, index_url=simple.as_uri()))
    [pkg] = index.project_files("Packaging")
    assert pkg.url == (tmp_path / "files" / "packaging-26.3-py3-none-any.whl").as_uri()
    assert pkg.sha256 == "d7193f7c8e4e93f444fde0262bf90af30e16fa0ad0ad44cb553c87339b23cd1c"
    [demo] = index.project_files("demo")
    assert demo.url == (simple / "demo" / "demo-1.0-py3-none-any.whl").as_uri()
    assert fetch.requests == []
    assert sorted(index.project_names()) == ["demo", "packaging"]


# --- pip configuration ---------------------------------------------------------------------------


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_pip_config_precedence(tmp_path: Path) -> None:
    """Config files < PIP_* variables < arguments; [install] beats [global]; values split."""
    site = write(tmp_path / "etc/pip.conf",
                 "[global]\nindex-url = https://site.example/simple\n"
                 "extra-index-url = file:///opt/pypi/simple\n  file:///opt/pypi-more/simple\n")
    user = write(tmp_path / "home/.config/pip/pip.conf",
                 "[global]\nfind_links = /opt/wheels\n[install]\nextra-index-url = "
                 "https://download.pytorch.org/whl/cu130\n")
    config = pip_index_config({}, [site, user])
    assert config == IndexConfig("https://site.example/simple",
                                 ("https://download.pytorch.org/whl/cu130",), ("/opt/wheels",))
    env = {"PIP_INDEX_URL": "https://env.example/simple", "PIP_FIND_LINKS": "/a /b"}
    config = pip_index_config(env, [site, user])
    assert config.index_url == "https://env.example/simple" and config.find_links == ("/a", "/b")
    config = pip_index_config(env, [site, user], index_url="https://cli.example/simple",
                              extra_index_urls=["https://x.example/simple"], find_links=["/c"])
    assert config.index_urls == ("https://cli.example/simple",
                                 "https://download.pytorch.org/whl/cu130",
                                 "https://x.example/simple")
    assert config.find_links == ("/a", "/b", "/c")


def test_pip_config_defaults_and_no_index(tmp_path: Path) -> None:
    """No configuration means PyPI; no-index leaves only find-links; a broken file is an error."""
    assert pip_index_config({}, []) == IndexConfig()
    assert IndexConfig().index_urls == ("https://pypi.org/simple",)
    config = pip_index_config({"PIP_NO_INDEX": "yes", "PIP_FIND_LINKS": "/w"}, [])
    assert config.index_urls == () and config.sources == ("/w",)
    broken = write(tmp_path / "pip.conf", "index-url = no section\n")
    with pytest.raises(FormatError, match="not a valid pip configuration file"):
        pip_index_config({}, [broken])


def test_pip_config_locations(tmp_path: Path) -> None:
    """pip's Linux locations in load order; PIP_CONFIG_FILE replaces the user files."""
    env = {"HOME": "/home/u", "VIRTUAL_ENV": "/venv"}
    assert pip_config_files(env) == [
        Path("/etc/xdg/pip/pip.conf"), Path("/etc/pip.conf"), Path("/home/u/.pip/pip.conf"),
        Path("/home/u/.config/pip/pip.conf"), Path("/venv/pip.conf")]
    custom = write(tmp_path / "custom.conf", "[global]\nindex-url = https://custom.example/s\n")
    env = {"HOME": "/home/u", "XDG_CONFIG_DIRS": "/a:/b", "PIP_CONFIG_FILE": str(custom)}
    assert pip_config_files(env) == [
        Path("/a/pip/pip.conf"), Path("/b/pip/pip.conf"), Path("/etc/pip.conf"), custom]
    with_file = dict(env, XDG_CONFIG_DIRS=str(tmp_path / "none"))
    assert pip_index_config(with_file).index_url == "https://custom.example/s"


# --- the real PyPI -------------------------------------------------------------------------------


def urllib_fetch(url: str, headers: Mapping[str, str]) -> Response:
    request = urllib.request.Request(url, headers=dict(headers))
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read(), response.geturl()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read(), url


@pytest.mark.network
def test_pypi_sgl_kernel() -> None:
    """PyPI's sgl-kernel page lists a cp310-abi3 manylinux x86_64 wheel for 0.3.21."""
    index = PackageIndex(urllib_fetch, IndexConfig("https://pypi.org/simple/"))
    try:
        files = index.project_files("sgl-kernel")
    except IndexUnavailable as e:
        pytest.skip(f"PyPI is not reachable: {e}")
    wheels = releases(files, "sgl-kernel")[Version("0.3.21")]
    tags = {t for f in wheels if (w := f.wheel()) for t in w[3]}
    assert Tag("cp310", "abi3", "manylinux2014_x86_64") in tags
    assert all(f.sha256 for f in wheels)
    best = select_one(files, Requirement("sgl-kernel==0.3.21"), TARGET)
    assert best.tag.platform == "manylinux2014_x86_64"


def test_pip_config_file_devnull_turns_config_off(tmp_path: Path) -> None:
    """PIP_CONFIG_FILE=/dev/null loads no configuration file at all, as in pip."""
    assert pip_config_files({"PIP_CONFIG_FILE": "/dev/null", "HOME": str(tmp_path)}) == []


def test_target_for_python_is_the_running_interpreter_by_default() -> None:
    """With nothing given, the target is the running interpreter with its own ABI tags."""
    assert Target.for_python() == Target.current()


def test_target_for_python_keeps_this_machine_unless_told() -> None:
    """A version alone keeps this machine's platforms and implementation; platforms override."""
    current = Target.current()
    target = Target.for_python("3.12")
    assert (target.python_version, target.platforms, target.implementation) == (
        (3, 12), current.platforms, current.implementation)
    other = Target.for_python((3, 10), ["manylinux_2_28_aarch64"], "pp")
    assert (other.python_version, other.platforms, other.implementation) == (
        (3, 10), ("manylinux_2_28_aarch64",), "pp")


@pytest.mark.parametrize("text", ["banana", "3", "3.12.1", "", ".12", "3.x"])
def test_target_for_python_refuses_what_is_not_a_version(text: str) -> None:
    """A Python version that is not MAJOR.MINOR is a usage error that quotes it."""
    with pytest.raises(UsageError, match=re.escape(repr(text))):
        Target.for_python(text)
