"""`abifit resolve` against a real loopback index serving wheels built here
(tests/fixtures/resolve/): a host package in three releases whose 2.0 changes a parameter from
`int` to `unsigned int` (1.0 and 1.1 keep it), an extension package whose 1.0 is built against
the `int` form and whose 2.0 against the `unsigned int` one, both requiring only
`hostpkg>=1.0` (metadata that admits pairs whose binaries do not fit), and `nopin`, built
against the `int` form, which declares no requirement at all (as sgl-kernel declares no torch).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from abifit.cli import main
from helpers import RESOLVE_TAG as TAG
from helpers import (
    RESOLVE_WIDE_HOSTS,
    make_wheel,
    resolve_binaries,
    resolve_projects,
    schema,
    validate,
)
from httpserver import LoopbackIndex, LoopbackServer, Projects, publish_index

SCHEMA = schema("resolve")
TARGET = ["--python-version", "3.11", "--platform", "linux_x86_64"]
INT_FORM = "hostlib::check_impl(int, char const*, char const*, int, bool)"
UNSIGNED_FORM = "hostlib::check_impl(int, char const*, char const*, unsigned int, bool)"

if TYPE_CHECKING:
    from abifit.host.profile import HostProfile
    from abifit.remote.runcontext import RemoteContext

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


@pytest.fixture(scope="module")
def binaries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """libhost.so in its two forms, hostpkg's own module, and the extensions built against
    each form (`helpers.resolve_binaries`)."""
    return resolve_binaries(tmp_path_factory.mktemp("resolve"))


@pytest.fixture(scope="module")
def index_projects(binaries: dict[str, bytes]) -> Projects:
    return resolve_projects(binaries)


def run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        index: LoopbackIndex, cache: Path, *args: str) -> tuple[int, str, str]:
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS"):
        monkeypatch.delenv(var, raising=False)
    code = main(["resolve", *args, *TARGET, "--index-url", index.url, "--cache-dir", str(cache)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def resolved(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
             index: LoopbackIndex, cache: Path, *args: str) -> tuple[int, dict[str, object]]:
    code, out, err = run(capsys, monkeypatch, index, cache, *args, "--json")
    assert code in (0, 1), err
    doc: dict[str, object] = json.loads(out)
    validate(doc, SCHEMA)
    return code, doc


def pins(doc: dict[str, object]) -> dict[str, str]:
    listed = doc["pins"]
    assert isinstance(listed, list)
    return {p["name"]: p["version"] for p in listed}


def newer(doc: dict[str, object], name: str) -> list[dict[str, object]]:
    listed = doc["pins"]
    assert isinstance(listed, list)
    return next(p["newer"] for p in listed if p["name"] == name)


def test_the_newest_loadable_host_for_an_extension_without_a_pin(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """nopin declares no requirement, so the metadata admits hostpkg 2.0; its binaries do not
    fit, and resolve walks back to 1.1, saying that 2.0 does not define the `int` form and which
    parameter changed."""
    code, doc = resolved(capsys, monkeypatch, loopback_index, tmp_path, "nopin", "hostpkg")
    assert code == 0 and doc["found"] is True
    assert pins(doc) == {"nopin": "0.1", "hostpkg": "1.1"}
    [rejected] = newer(doc, "hostpkg")
    assert (rejected["version"], rejected["why"], rejected["against"]) == (
        "2.0", "binary", "nopin 0.1")
    assert f"`{INT_FORM}`" in rejected["reason"]
    assert "parameter 4: `int` → `unsigned int`" in rejected["reason"]
    assert "hostpkg 2.0 does not define" in rejected["reason"]
    assert doc["set_check"]["verdict"] == "fits" and doc["set_check"]["failing"] == 0  # type: ignore[index]
    stats = doc["stats"]
    assert isinstance(stats, dict)
    # 2.0, then 1.1; the search over hostpkg that nopin's pin starts finds both verdicts known:
    # a rejection already known widens no window, so 1.0 is not read ahead of need
    assert stats["pairs_checked"] == 2
    assert stats["naive_pairs"] == 3  # 1 release of nopin x 3 of hostpkg
    code, doc = resolved(capsys, monkeypatch, loopback_index, tmp_path / "one", "nopin",
                         "hostpkg", "--jobs", "1")
    assert pins(doc) == {"nopin": "0.1", "hostpkg": "1.1"}
    assert doc["stats"]["pairs_checked"] == 2  # type: ignore[index]  # 2.0, then 1.1


def test_text_output_and_the_verdict_line(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The text lists the pins, then each newer release with its reason, and ends with the
    verdict (what --quiet prints)."""
    code, out, _err = run(capsys, monkeypatch, loopback_index, tmp_path, "nopin", "hostpkg")
    assert code == 0
    assert "  hostpkg==1.1  (requirement, native)" in out
    assert "hostpkg (chosen 1.1):" in out
    assert f"2.0: nopin 0.1 needs `{INT_FORM}`, which hostpkg 2.0 does not define" in out
    assert out.rstrip().splitlines()[-1] == "resolved: hostpkg==1.1, nopin==0.1"
    code, out, _err = run(capsys, monkeypatch, loopback_index, tmp_path, "nopin", "hostpkg",
                          "-q")
    assert (code, out) == (0, "resolved: hostpkg==1.1, nopin==0.1\n")


def test_metadata_alone_picks_the_newest_that_fits(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """extpkg 2.0 is built against hostpkg 2.0: the newest of both load together, and the
    pure package comes along without a check."""
    code, doc = resolved(capsys, monkeypatch, loopback_index, tmp_path, "extpkg", "toolpkg")
    assert code == 0
    assert pins(doc) == {"extpkg": "2.0", "hostpkg": "2.0", "toolpkg": "1.0"}
    assert newer(doc, "extpkg") == [] and newer(doc, "hostpkg") == []
    roles = {p["name"]: (p["role"], p["native"]) for p in doc["pins"]}  # type: ignore[union-attr]
    assert roles == {"extpkg": ("requirement", True), "hostpkg": ("dependency", True),
                     "toolpkg": ("requirement", False)}


def test_the_extension_walks_back_when_the_host_is_held(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """With hostpkg held below 2.0, the rejection goes the other way: extpkg 2.0 needs the
    `unsigned int` form that hostpkg 1.1 lacks, so extpkg 1.0 is chosen."""
    code, doc = resolved(capsys, monkeypatch, loopback_index, tmp_path, "extpkg",
                         "--with", "hostpkg<2")
    assert code == 0
    assert pins(doc) == {"extpkg": "1.0", "hostpkg": "1.1"}
    [rejected] = newer(doc, "extpkg")
    assert (rejected["version"], rejected["why"]) == ("2.0", "binary")
    assert f"extpkg 2.0 needs `{UNSIGNED_FORM}`, which hostpkg 1.1 does not define" in \
        rejected["reason"]
    assert "parameter 4: `unsigned int` → `int`" in rejected["reason"]
    assert {p["name"]: p["role"] for p in doc["pins"]}["hostpkg"] == "with"  # type: ignore


def test_backtracking_undoes_the_first_pin(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """extpkg 2.0 and hostpkg 2.0 are pinned first (the newest, and they fit); nopin then
    needs a hostpkg 1.x, which extpkg 2.0 does not load with, so resolvelib backtracks to
    extpkg 1.0. A second resolution checks no pair again: every verdict is in the cache."""
    code, doc = resolved(capsys, monkeypatch, loopback_index, tmp_path, "extpkg", "nopin")
    assert code == 0
    assert pins(doc) == {"extpkg": "1.0", "hostpkg": "1.1", "nopin": "0.1"}
    reasons = {r["version"]: r for r in newer(doc, "extpkg")}
    assert reasons["2.0"]["why"] == "binary"
    assert "extpkg 2.0 needs" in str(reasons["2.0"]["reason"])
    assert [r["version"] for r in newer(doc, "hostpkg")] == ["2.0"]
    first = doc["stats"]
    assert isinstance(first, dict) and first["pairs_checked"] > 0
    assert doc["set_check"]["verdict"] == "fits"  # type: ignore[index]
    code, again = resolved(capsys, monkeypatch, loopback_index, tmp_path, "extpkg", "nopin")
    assert code == 0 and pins(again) == pins(doc)
    second = again["stats"]
    assert isinstance(second, dict)
    assert second["pairs_checked"] == 0
    assert second["pairs_cached"] == first["pairs_checked"] + first["pairs_cached"]
    assert newer(again, "extpkg") == newer(doc, "extpkg")


def test_no_set_gives_the_smallest_conflict(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """nopin with hostpkg>=2: no set; the derivation names the symbol, the parameter and the
    requirement, and the exit status is 1."""
    code, doc = resolved(capsys, monkeypatch, loopback_index, tmp_path, "nopin",
                         "hostpkg>=2")
    assert code == 1 and doc["found"] is False and doc["pins"] == []
    conflict = doc["conflict"]
    assert isinstance(conflict, dict)
    assert set(conflict["packages"]) == {"nopin", "hostpkg"}
    text = conflict["derivation"]
    assert text.startswith("Because ")
    assert "you asked for hostpkg>=2" in text
    assert f"`{INT_FORM}`" in text and "parameter 4: `int` → `unsigned int`" in text
    assert text.endswith("no set of nopin and hostpkg loads together.") or \
        text.endswith("no set of hostpkg and nopin loads together.")
    code, out, _err = run(capsys, monkeypatch, loopback_index, tmp_path, "nopin", "hostpkg>=2")
    assert code == 1
    assert out.splitlines()[0].startswith("no set fits (cp311 on linux_x86_64")
    assert out.rstrip().splitlines()[-1] == "no set fits"


def test_output_files(loopback_index: LoopbackIndex, tmp_path: Path,
                      capsys: pytest.CaptureFixture[str],
                      monkeypatch: pytest.MonkeyPatch) -> None:
    """-o writes requirements with the index's sha256, constraints by the file's name or
    --format, or a PEP 751 lock for pylock.toml (which packaging's PEP 751 reader takes, each
    wheel with its URL and sha256); another *.toml name is refused (exit 2)."""
    out_file = tmp_path / "requirements.txt"
    code, _out, _err = run(capsys, monkeypatch, loopback_index, tmp_path / "c", "nopin",
                           "hostpkg", "-o", str(out_file))
    assert code == 0
    lines = [line for line in out_file.read_text().splitlines() if not line.startswith("#")]
    import hashlib

    digest = hashlib.sha256(loopback_index.files["hostpkg-1.1-cp310-abi3-linux_x86_64.whl"]
                            ).hexdigest()
    assert lines[0] == f"--index-url {loopback_index.url}"
    assert f"hostpkg==1.1 --hash=sha256:{digest}" in lines
    constraints = tmp_path / "constraints.txt"
    run(capsys, monkeypatch, loopback_index, tmp_path / "c", "nopin", "hostpkg", "-o",
        str(constraints))
    assert [x for x in constraints.read_text().splitlines() if not x.startswith("#")] == [
        "hostpkg==1.1", "nopin==0.1"]
    lock = tmp_path / "pylock.toml"
    code, _out, err = run(capsys, monkeypatch, loopback_index, tmp_path / "c", "nopin",
                          "hostpkg", "-o", str(lock))
    assert code == 0, err
    tomllib = pytest.importorskip("tomllib")
    from packaging.pylock import Pylock

    locked = Pylock.from_dict(tomllib.loads(lock.read_text()))
    wheels = {p.name: (str(p.version), p.wheels[0].hashes["sha256"], p.wheels[0].url)
              for p in locked.packages if p.wheels}
    assert wheels["hostpkg"][:2] == ("1.1", digest)
    assert wheels["hostpkg"][2].endswith("/hostpkg-1.1-cp310-abi3-linux_x86_64.whl")
    assert set(wheels) == {"hostpkg", "nopin"}
    assert locked.requires_python is not None and "3.11" in str(locked.requires_python)
    code, _out, err = run(capsys, monkeypatch, loopback_index, tmp_path / "c", "nopin", "-o",
                          str(tmp_path / "lock.toml"))
    assert code == 2 and err.startswith("error: -o ") and "pylock.toml" in err


@pytest.mark.parametrize(("args", "message"), [
    (("nopin==",), "invalid requirement 'nopin=='"),
    (("no-such-package",), "no-such-package"),
    (("nopin==9.9",), "no wheel of nopin==9.9 fits"),
], ids=["typo", "unknown-package", "no-release"])
def test_errors_are_one_line_with_exit_2(
        loopback_index: LoopbackIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], message: str) -> None:
    """A typo, an unknown package or a release with no wheel is an error, not a conflict."""
    code, out, err = run(capsys, monkeypatch, loopback_index, tmp_path, *args)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and message in err.splitlines()[0]


def test_an_unreachable_index_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """An index that does not answer: exit 2, one error line naming it."""
    with LoopbackServer() as server:
        dead = publish_index(server, {})
        url = dead.url
    code, _out, err = run(capsys, monkeypatch, dead, tmp_path, "nopin")
    assert code == 2
    assert err.startswith("error: ") and url.split("//")[1].split("/")[0] in err


# --- CUDA variants -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cuda_index(binaries: dict[str, bytes]) -> LoopbackIndex:
    """An extra index, as PyTorch's: hostpkg 2.0's cu128 and cu130 builds (local versions, the
    `int` form, so that nopin loads with them), and gpupkg, whose 2.0 requires a -cu13 library
    family and 1.0 a -cu12 one."""
    def host(version: str) -> tuple[str, bytes]:
        return make_wheel("hostpkg", version, {
            "hostpkg/__init__.py": b"", "hostpkg/_C.abi3.so": binaries["module"],
            "hostpkg/lib/libhost.so": binaries["lib-int"]}, tag=TAG)

    def lib(name: str) -> tuple[str, bytes]:
        module = name.replace("-", "_")
        return make_wheel(module, "1.0", {f"{module}/__init__.py": b""},
                          tag="py3-none-linux_x86_64")

    server = LoopbackServer().start()
    index = publish_index(server, {
        "hostpkg": [host("2.0+cu128"), host("2.0+cu130")],
        "gpupkg": [make_wheel("gpupkg", "1.0", {"gpupkg/__init__.py": b""},
                              requires=("nvidia-fake-cu12",)),
                   make_wheel("gpupkg", "2.0", {"gpupkg/__init__.py": b""},
                              requires=("nvidia-fake-cu13",))],
        "nvidia-fake-cu12": [lib("nvidia-fake-cu12")],
        "nvidia-fake-cu13": [lib("nvidia-fake-cu13")],
    })
    yield index  # type: ignore[misc]
    server.stop()


def test_cuda_variants_from_an_extra_index(
        loopback_index: LoopbackIndex, cuda_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The local-label builds are candidates, newest first: +cu130 is chosen; --cuda 12 keeps
    +cu128 and says why +cu130 was not chosen."""
    extra = ("--extra-index-url", cuda_index.url)
    code, doc = resolved(capsys, monkeypatch, loopback_index, tmp_path, "nopin", "hostpkg",
                         *extra)
    assert code == 0 and pins(doc)["hostpkg"] == "2.0+cu130"
    assert {p["name"]: p["cuda"] for p in doc["pins"]}["hostpkg"] == "13.0"  # type: ignore
    code, doc = resolved(capsys, monkeypatch, loopback_index, tmp_path, "nopin", "hostpkg",
                         "--cuda", "12", *extra)
    assert code == 0 and pins(doc)["hostpkg"] == "2.0+cu128"
    reasons = {r["version"]: r for r in newer(doc, "hostpkg")}
    assert reasons["2.0+cu130"]["why"] == "cuda"
    assert "built for CUDA 13.0, not CUDA 12 (--cuda)" in str(reasons["2.0+cu130"]["reason"])


def test_the_driver_rejects_a_newer_cuda(
        loopback_index: LoopbackIndex, cuda_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A host whose driver supports CUDA 12.4 at most rejects the +cu130 build with that
    reason; --cuda 13 on that host leaves no set, and the conflict says why."""
    extra = ("--extra-index-url", cuda_index.url)
    code, doc = resolved(capsys, monkeypatch, loopback_index, tmp_path, "nopin", "hostpkg",
                         "--assume-driver", "550.54.14", *extra)
    assert code == 0 and pins(doc)["hostpkg"] == "2.0+cu128"
    assert (doc["driver"], doc["driver_cuda"]) == ("550.54.14", "12.4")
    reason = {r["version"]: r for r in newer(doc, "hostpkg")}["2.0+cu130"]
    assert reason["why"] == "driver"
    assert "the host's driver 550.54.14 supports CUDA up to 12.4" in str(reason["reason"])
    code, doc = resolved(capsys, monkeypatch, loopback_index, tmp_path, "gpupkg",
                         "--assume-driver", "550.54.14", "--cuda", "13", *extra)
    assert code == 1
    conflict = doc["conflict"]
    assert isinstance(conflict, dict)
    assert "nvidia-fake-cu13 1.0 is built for CUDA 13; the host's driver 550.54.14 supports " \
        "CUDA up to 12.4" in conflict["derivation"]


def test_a_cuda_family_in_the_metadata_decides(
        loopback_index: LoopbackIndex, cuda_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """--cuda 12 rejects the nvidia-*-cu13 family, so gpupkg 2.0, which requires it, is not
    chosen: gpupkg 1.0 is, and 2.0's reason names the requirement."""
    code, doc = resolved(capsys, monkeypatch, loopback_index, tmp_path, "gpupkg", "--cuda",
                         "12", "--extra-index-url", cuda_index.url)
    assert code == 0
    assert pins(doc) == {"gpupkg": "1.0", "nvidia-fake-cu12": "1.0"}
    [rejected] = newer(doc, "gpupkg")
    assert rejected["why"] == "metadata"
    assert "gpupkg 2.0 requires nvidia-fake-cu13" in str(rejected["reason"])
    assert "built for CUDA 13, not CUDA 12" in str(rejected["reason"])


def test_the_library_api(loopback_index: LoopbackIndex, tmp_path: Path,
                         monkeypatch: pytest.MonkeyPatch) -> None:
    """`abifit.resolve` returns the report the command prints: the pins and, for hostpkg, the
    newer release and why."""
    import abifit

    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    report = abifit.resolve(["nopin", "hostpkg"], python_version="3.11",
                            platforms=["linux_x86_64"], index_url=loopback_index.url,
                            cache_dir=tmp_path)
    assert isinstance(report, abifit.ResolveReport) and report.found
    assert {p.name: p.version for p in report.pins} == {"hostpkg": "1.1", "nopin": "0.1"}
    [rejection] = report.rejections
    assert (rejection.name, rejection.version, rejection.why.value) == ("hostpkg", "2.0",
                                                                        "binary")


def test_directions_judged_elsewhere(binaries: dict[str, bytes], tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Given an `Elsewhere` (what `--ray` gives: here a judge in this process over a cache of
    its own, standing for a cluster of 8 CPUs), every direction of two native wheels is asked
    of it, the counts come from its verdicts, the read-ahead widens from 2 to its 8 CPUs (every
    hostpkg release is checked at once after the rejections) and the set and the rejections
    are the local run's; a direction it could not judge rejects the release with the error
    and is not kept in the cache."""
    from abifit.commands.contexts import HostOptions, IndexOptions, Session, host_and_index
    from abifit.engines.pairwise import Elsewhere, PairJudge, PairVerdict, label
    from abifit.engines.resolve import ResolveReport, resolve
    from abifit.remote.packageindex import IndexFile

    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    sessions: list[Session] = []
    with LoopbackServer() as server:
        index = publish_index(server, resolve_projects(binaries, RESOLVE_WIDE_HOSTS))

        def opened(cache: Path) -> tuple[HostProfile, Callable[[], RemoteContext]]:
            session = Session({"PIP_CONFIG_FILE": "/dev/null"})
            sessions.append(session)
            return host_and_index(HostOptions(), IndexOptions(
                python_version="3.11", platforms=("linux_x86_64",), index_url=index.url,
                cache_dir=str(cache)), session)

        def run(cache: Path, elsewhere: Elsewhere | None = None) -> ResolveReport:
            host, remote = opened(cache)
            return resolve(["nopin==0.1", "hostpkg"], (), remote(), host, lambda _m: None,
                           jobs=2, elsewhere=elsewhere)

        host, remote = opened(tmp_path / "elsewhere")
        there = PairJudge(remote(), host, lambda _m: None, jobs=1)
        asked: list[tuple[str, str]] = []

        def judge(extension: IndexFile, other: IndexFile) -> PairVerdict:
            asked.append((label(extension), label(other)))
            if label(other) == "hostpkg 2.3":
                return PairVerdict(label(extension), label(other), True, False,
                                   error="lost after 3 retries: the node died")
            return there.judged(extension, other)

        try:
            local = run(tmp_path / "local")
            wide = run(tmp_path / "wide", Elsewhere(judge, 8))
            first = list(asked)
            again = run(tmp_path / "wide", Elsewhere(judge, 8))
        finally:
            there.close()
            for session in sessions:
                session.close()
    assert {p.name: p.version for p in local.pins} == {"nopin": "0.1", "hostpkg": "1.5"}
    assert [(r.version, r.why.value) for r in local.rejections] == [
        ("2.3", "binary"), ("2.2", "binary"), ("2.1", "binary"), ("2.0", "binary")]
    assert local.stats.pairs_checked == 6  # 2.3 to 2.0, then 1.5 and 1.4 read ahead of need
    assert [(p.name, p.version) for p in wide.pins] == [(p.name, p.version) for p in local.pins]
    assert [(r.version, r.why.value) for r in wide.rejections] == [
        ("2.3", "error"), ("2.2", "binary"), ("2.1", "binary"), ("2.0", "binary")]
    assert "could not be checked: lost after 3 retries" in wide.rejections[0].reason
    assert wide.rejections[1:] == local.rejections[1:]
    # all ten hostpkg releases at once; the direction that erred is not counted
    assert (wide.stats.pairs_checked, wide.stats.pairs_unchecked) == (9, 10)
    assert len(first) == len(set(first)) == 20  # each direction asked once
    assert again.stats.pairs_cached == 9 and again.stats.pairs_checked == 0
    assert asked[len(first):] == [("nopin 0.1", "hostpkg 2.3")]  # not kept: asked anew


def test_requirements_from_a_file(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`resolve -r FILE`: the file's requirements, markers evaluated for the target (a
    Windows-only line is left out), resolved as if named: the same set."""
    reqs = tmp_path / "requirements.in"
    reqs.write_text("nopin\nhostpkg\nnotthere ; sys_platform == 'win32'\n")
    code, doc = resolved(capsys, monkeypatch, loopback_index, tmp_path, "-r", str(reqs))
    assert code == 0 and pins(doc) == {"nopin": "0.1", "hostpkg": "1.1"}


def test_the_project_venv_is_the_default_environment(tmp_path: Path) -> None:
    """No VIRTUAL_ENV or CONDA_PREFIX: the `.venv` of the working directory, or of the
    nearest directory above it that has one, as uv finds a project's environment."""
    from abifit.host.environment import default_interpreter

    python = tmp_path / "project" / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("")
    inner = tmp_path / "project" / "src" / "pkg"
    inner.mkdir(parents=True)
    env = {"PATH": "/usr/bin:/bin"}
    assert default_interpreter(env, inner) == str(python)
    other = tmp_path / "elsewhere" / ".venv" / "bin" / "python"
    other.parent.mkdir(parents=True)
    other.write_text("")
    assert default_interpreter({**env, "VIRTUAL_ENV": str(other.parent.parent)},
                               inner) == str(other)
