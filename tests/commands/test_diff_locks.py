"""`abifit diff` of locks: each lock or requirements file is checked as `check -r FILE` checks it
(its wheels read from the index by range requests and simulated), and its modules' records
compared as a snapshot's are.

The world: a loopback index serving hostpkg 1.0 and 2.0 (2.0 changes a parameter of
`hostlib::check_impl` from `int` to `unsigned int`) and extfree 1.0, whose module extpkg._ops
was built against 1.0's libhost.so and declares no requirement, so that a lock can pin it
beside 2.0; and a CUDA runtime stand-in in two majors (libcudart.so.12 and .13, each in a
wheel of its own) with cudaext 1.0 and 2.0, whose module links one or the other. Locks are
requirements files written here, and uv's `uv.lock` and its `pylock.toml` export.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import abifit
from abifit.cli import main
from abifit.report.diff import diff_json
from abifit.report.json import dumps
from fixtures.build import STUBS, compile_c
from helpers import (
    CHECK_SOURCES,
    lock_world,
    lock_world_venv,
    make_wheel,
    schema,
    uv_project,
    validate,
)
from httpserver import LoopbackIndex, LoopbackServer, publish_index

TARGET = ["--python-version", "3.11", "--platform", "linux_x86_64"]
OLD = "hostlib::check_impl(int, char const*, char const*, int, bool)"
MANGLED = "_ZN7hostlib10check_implEiPKcS1_ib"
GOOD = "hostpkg==1.0\nextfree==1.0\n"
BROKEN = "hostpkg==2.0\nextfree==1.0\n"

pytestmark = [pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++"),
              pytest.mark.usefixtures("pip_alone")]


def cuda_wheels(root: Path) -> list[tuple[str, tuple[str, bytes]]]:
    """The CUDA runtime stand-in of each major in its wheel, and cudaext built against each
    (its module finds the runtime through an RPATH into the runtime's wheel)."""
    out = []
    for major, ext_version, runtime in ((12, "1.0", "nvidia-cuda-runtime-cu12"),
                                        (13, "2.0", "nvidia-cuda-runtime")):
        soname = f"libcudart.so.{major}"
        lib = compile_c(STUBS / "cudart_stub.c", root / str(major) / soname, soname=soname,
                        flags=[f"-DCUDART_VERSION={major}000"])
        ext = compile_c(CHECK_SOURCES / "cudart_ext.c", root / str(major) / "_kernels.abi3.so",
                        libs=[lib], rpath=["$ORIGIN/../nvidia/cuda_runtime/lib"])
        out.append((runtime, make_wheel(runtime.replace("-", "_"), f"{major}.0", {
            "nvidia/cuda_runtime/lib/" + soname: lib.read_bytes()})))
        out.append(("cudaext", make_wheel("cudaext", ext_version, {
            "cudaext/__init__.py": b"", "cudaext/_kernels.abi3.so": ext.read_bytes()},
            tag="cp310-abi3-linux_x86_64")))
    return out


@pytest.fixture(scope="module")
def index(binaries: dict[str, bytes],
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackIndex]:
    projects = lock_world(binaries)
    for project, wheel in cuda_wheels(tmp_path_factory.mktemp("cudart")):
        projects.setdefault(project, []).append(wheel)
    with LoopbackServer() as server:
        yield publish_index(server, projects)


def locks(root: Path, a: str, b: str) -> tuple[Path, Path]:
    """Two requirements files, A's and B's."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "a.txt").write_text(a)
    (root / "b.txt").write_text(b)
    return root / "a.txt", root / "b.txt"


def diff(capsys: pytest.CaptureFixture[str], index: LoopbackIndex, cache: Path,
         *args: str) -> tuple[int, dict[str, object], str]:
    """`abifit diff ARGS --json` against the loopback index: (exit code, document validated
    by its schema, stderr)."""
    code = main(["diff", *args, "--index-url", index.url, "--cache-dir", str(cache), "--json"])
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    validate(doc, schema("diff"))
    return code, doc, captured.err


def changes(doc: dict[str, object], part: str = "abi") -> list[dict[str, object]]:
    found = doc[part]
    assert isinstance(found, list)
    return found


def test_a_lock_that_breaks_a_module(index: LoopbackIndex, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    """hostpkg 1.0 -> 2.0 beside extfree: B breaks extpkg._ops (exit 1), with the undefined
    symbol and the derivation of B's check (the signature that changed); both sides checked
    for the target."""
    a, b = locks(tmp_path, GOOD, BROKEN)
    code, doc, err = diff(capsys, index, tmp_path / "cache", str(a), str(b), *TARGET)
    assert code == 1, err
    assert doc["abi_compared"] is True and doc["breaks"] == 1
    assert doc["sides"] == [{"kind": "checked-lock", "target": "cp311 on linux_x86_64"}] * 2
    [broken] = changes(doc)
    assert (broken["kind"], broken["subject"], broken["before"], broken["breaks"]) == (
        "stops-loading", "extpkg._ops", "loads", True)
    assert f"undefined symbol: {MANGLED}" in str(broken["after"])
    detail = str(broken["detail"])
    assert detail.startswith("Because ") and f"needs `{OLD}`" in detail, detail
    assert "parameter 4: `int` → `unsigned int`" in detail
    assert [(c["subject"], c["before"], c["after"]) for c in changes(doc, "versions")] == [
        ("hostpkg", "1.0", "2.0")]


def test_a_lock_that_fixes_a_module(index: LoopbackIndex, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The same locks swapped: extpkg._ops starts loading on B, nothing breaks (exit 0); the
    text says so."""
    a, b = locks(tmp_path, BROKEN, GOOD)
    code, doc, err = diff(capsys, index, tmp_path / "cache", str(a), str(b), *TARGET)
    assert code == 0, err
    assert [(c["kind"], c["subject"], c["after"], c["breaks"]) for c in changes(doc)] == [
        ("starts-loading", "extpkg._ops", "loads", False)]
    assert main(["diff", str(a), str(b), *TARGET, "--index-url", index.url, "--cache-dir",
                 str(tmp_path / "cache")]) == 0
    out = capsys.readouterr().out
    assert "  now loads: extpkg._ops: " in out and out.endswith("B breaks nothing A loaded\n")


def test_equal_locks_differ_in_nothing(index: LoopbackIndex, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """A lock against a copy of itself: no ABI change, no version change, exit 0."""
    a, b = locks(tmp_path, GOOD, GOOD)
    code, doc, err = diff(capsys, index, tmp_path / "cache", str(a), str(b), *TARGET)
    assert code == 0, err
    assert (doc["abi"], doc["versions"], doc["breaks"], doc["abi_compared"]) == ([], [], 0, True)


def test_the_comment_and_annotations_name_the_broken_module(
        index: LoopbackIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`--markdown`: the comment's Breaks table names extpkg._ops of extfree and says what the
    locks were checked for; `--github`: an error at the line of B that pins extfree."""
    monkeypatch.chdir(tmp_path)
    locks(tmp_path, GOOD, BROKEN)
    code = main(["diff", "a.txt", "b.txt", *TARGET, "--index-url", index.url, "--cache-dir",
                 str(tmp_path / "cache"), "--markdown", "comment.md", "--github"])
    out = capsys.readouterr().out
    assert code == 1
    comment = Path("comment.md").read_text()
    assert comment.startswith("### abifit diff: breaks\n\nA: `a.txt` → B: `b.txt`\n\n"
                              "B breaks 1 module(s) that A loaded\n\n`a.txt` and `b.txt`: the "
                              "wheels pinned were checked for `cp311 on linux_x86_64`"), comment
    assert "| extfree | `extpkg._ops` | " in comment and MANGLED in comment
    assert "| hostpkg | 1.0 | 2.0 |" in comment
    [command] = [line for line in out.splitlines() if line.startswith("::")]
    assert command.startswith("::error file=b.txt,line=2,title=stops-loading%3A extpkg._ops::")


@pytest.fixture(scope="module")
def uv_projects(index: LoopbackIndex, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two uv projects, `a` (hostpkg 1.0) and `b` (hostpkg 2.0) beside extfree 1.0, each
    locked by uv (`uv.lock`) and exported as `pylock.toml`."""
    root = tmp_path_factory.mktemp("uvdiff")
    for name, host in (("a", "1.0"), ("b", "2.0")):
        uv_project(root / name, index.url, f'"extfree==1.0", "hostpkg=={host}"')
    return root


@pytest.mark.parametrize("lock", ["uv.lock", "pylock.toml"])
def test_uv_locks_and_their_pylock_exports(lock: str, uv_projects: Path, index: LoopbackIndex,
                                           tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """uv's two lock forms are checked from the files they name: B breaks extpkg._ops."""
    a, b = uv_projects / "a" / lock, uv_projects / "b" / lock
    code, doc, err = diff(capsys, index, tmp_path / "cache", str(a), str(b), *TARGET)
    assert code == 1, err
    assert [(c["kind"], c["subject"]) for c in changes(doc)] == [("stops-loading",
                                                                  "extpkg._ops")]
    assert ("hostpkg", "1.0", "2.0") in [(c["subject"], c["before"], c["after"])
                                         for c in changes(doc, "versions")]


def test_another_cuda_major(index: LoopbackIndex, tmp_path: Path,
                            capsys: pytest.CaptureFixture[str]) -> None:
    """cudaext 1.0 (built for libcudart.so.12) -> 2.0 (for libcudart.so.13), each beside its
    runtime's wheel: the module loads on both, and maps the runtime of another CUDA major; the
    comment lists it under CUDA majors."""
    a, b = locks(tmp_path, "cudaext==1.0\nnvidia-cuda-runtime-cu12==12.0\n",
                 "cudaext==2.0\nnvidia-cuda-runtime==13.0\n")
    code, doc, err = diff(capsys, index, tmp_path / "cache", str(a), str(b), *TARGET,
                          "--markdown", str(tmp_path / "comment.md"))
    assert code == 0, err
    [major] = [c for c in changes(doc) if c["kind"] == "cuda-major"]
    assert (major["subject"], major["before"], major["after"]) == (
        "cudaext._kernels", "libcudart CUDA 12", "libcudart CUDA 13")
    assert not any(c["breaks"] for c in changes(doc))
    comment = (tmp_path / "comment.md").read_text()
    assert "#### CUDA majors" in comment
    assert "| `cudaext._kernels` | libcudart CUDA 12 | libcudart CUDA 13 |" in comment


def test_a_lock_beside_a_snapshot_or_an_environment(
        index: LoopbackIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A venv with hostpkg 1.0 and extfree, and its snapshot: against the lock of the same
    pins, nothing differs either way (a library the lock's check takes for a module is the
    one the environment's module loads); against the lock with hostpkg 2.0, B breaks
    extpkg._ops. The lock is checked for the Python the other side records."""
    python = lock_world_venv(tmp_path, index)
    snapshot = tmp_path / "pylock.env.toml"
    assert main(["snapshot", "--python", python, "--no-index", "--no-cache", "-o",
                 str(snapshot)]) == 0
    capsys.readouterr()
    good, broken = locks(tmp_path / "locks", GOOD, BROKEN)
    cache = tmp_path / "cache"
    here = f"cp{sys.version_info.major}{sys.version_info.minor} on linux_x86_64"
    platform = ["--platform", "linux_x86_64"]
    for a, b in ((python, good), (good, python), (snapshot, good), (good, snapshot)):
        code, doc, err = diff(capsys, index, cache, str(a), str(b), *platform)
        assert (code, doc["abi"], doc["versions"]) == (0, [], []), (a, b, err)
        assert {"kind": "checked-lock", "target": here} in doc["sides"]  # type: ignore[operator]
    for a in (python, snapshot):
        code, doc, err = diff(capsys, index, cache, str(a), str(broken), *platform)
        assert code == 1, err
        assert [c["subject"] for c in changes(doc) if c["breaks"]] == ["extpkg._ops"]


def test_versions_only(index: LoopbackIndex, tmp_path: Path,
                       capsys: pytest.CaptureFixture[str]) -> None:
    """`--versions-only` reads the locks' versions alone, asking no index (`--offline` and an
    empty cache): no ABI claim, exit 0, the verdict word and last line say so."""
    a, b = locks(tmp_path, GOOD, BROKEN)
    code, doc, err = diff(capsys, index, tmp_path / "cache", str(a), str(b), *TARGET,
                          "--versions-only", "--offline")
    assert code == 0, err
    assert (doc["abi"], doc["abi_compared"]) == ([], False)
    assert doc["sides"] == [{"kind": "lock", "target": None}] * 2
    assert main(["diff", str(a), str(b), "--versions-only", "-q"]) == 0
    assert capsys.readouterr().out.startswith("versions only: whether B loads what A loaded "
                                              "was not compared")


def test_offline_reads_the_checks_from_the_cache(index: LoopbackIndex, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """`--offline` with an empty cache cannot check the locks: exit 2, the error names the
    lock and the hint --versions-only; once a run has filled the cache, the same answer
    offline (the modules' records are kept beside the check's result)."""
    a, b = locks(tmp_path, GOOD, BROKEN)
    cache = tmp_path / "cache"
    args = ["diff", str(a), str(b), *TARGET, "--index-url", index.url, "--cache-dir",
            str(cache), "--json"]
    assert main([*args, "--offline"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {a}: its wheels could not be checked: "), err
    assert "\nhint: --versions-only compares the versions" in err
    assert main(args) == 1
    online = json.loads(capsys.readouterr().out)
    assert main([*args, "--offline"]) == 1
    assert json.loads(capsys.readouterr().out) == online


def test_the_api_and_the_command_agree_on_two_locks(
        index: LoopbackIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`abifit.diff` with the index options gives the document the command prints."""
    a, b = locks(tmp_path, GOOD, BROKEN)
    code, cli, err = diff(capsys, index, tmp_path / "cli", str(a), str(b), *TARGET)
    assert code == 1, err
    report = abifit.diff(a, b, python_version="3.11", platforms=["linux_x86_64"],
                         index_url=index.url, cache_dir=tmp_path / "api")
    assert json.loads(dumps(diff_json(report))) == cli
