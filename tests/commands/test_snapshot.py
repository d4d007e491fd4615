"""`abifit snapshot`, `diff` and `check --snapshot`: the lock read back as written and valid PEP
751, malformed files as one error, the pure comparison, and a fixture stack whose library only
an ld.so.conf.d entry finds (an ld.so.conf and ld.so.cache built here with the real ldconfig,
never /etc's), replayed on a host profile without that entry."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from packaging.pylock import Pylock

from abifit.cli import main
from abifit.engines.diff import ChangeKind, Side, SideKind, compare
from abifit.engines.snapshot import take_snapshot
from abifit.errors import FormatError
from abifit.formats.pins import pylock_toml
from abifit.formats.pylock import (
    CudaRecord,
    GpuRecord,
    HostRecord,
    LibraryDir,
    LockedPackage,
    ModuleRecord,
    Needed,
    Snapshot,
    Toolkit,
    WheelFile,
    bindings_digest,
    dumps,
    loads,
)
from fixtures.build import compile_c
from helpers import FIXTURES, make_wheel, schema, validate
from httpserver import LoopbackServer, publish_index

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

SOURCES = FIXTURES / "snapshot"
SHA = "ab" * 32

MODULE = ModuleRecord(
    "extpkg._ops", "extpkg", "extpkg/_ops.abi3.so", True, None,
    (Needed("libhost.so", "hostpkg/lib/libhost.so", "DT_RPATH"),
     Needed("libcudart.so.12", "/usr/local/cuda-12.8/lib64/libcudart.so.12", "ld.so.cache")),
    ("libc.so.6:GLIBC_2.2.5",), (("libhost.so", 3),),
    bindings_digest([("f", None, "libhost.so")]))
FULL = Snapshot(
    "abifit 0.1.0",
    (LockedPackage("extpkg", "1.0", WheelFile("extpkg-1.0-cp310-abi3-linux_x86_64.whl", SHA,
                                               url="https://example.org/extpkg.whl", size=10)),
     LockedPackage("hostpkg", "1.0", WheelFile("hostpkg-1.0-py3-none-linux_x86_64.whl", SHA,
                                                path="/wheels/hostpkg.whl")),
     LockedPackage("local", "0.1", directory="/src/local"),
     LockedPackage("debian-thing", "2", directory="/usr/lib/python3/dist-packages",
                   recorded=False)),
    "==3.11.*", ("sys_platform == 'linux'",), "/venv/bin/python", "3.11.7",
    HostRecord("x86_64", "2.36", "GLIBCXX_3.4.30",
               (LibraryDir("/opt/foo/lib", ("libfoo.so.1",), "/etc/ld.so.conf.d/foo.conf", 1),),
               (LibraryDir("/opt/bar", ("libbar.so",)),)),
    CudaRecord("580.65", "13.0", (Toolkit("12.8", "/usr/local/cuda-12.8"),),
               (GpuRecord("NVIDIA H200", "sm_90"),)),
    (MODULE, replace(MODULE, module="extpkg._other", loads=False,
                     error="x.so: undefined symbol: g", providers=())),
)


@pytest.mark.parametrize("snapshot", [
    FULL,
    Snapshot("abifit 0.1.0", ()),
    replace(FULL, host=HostRecord("aarch64", None, None), cuda=CudaRecord(None, None)),
    replace(FULL, cuda=None, modules=()),
], ids=["full", "empty-lock", "empty-facts", "no-cuda-no-modules"])
def test_read_back_equals_written(snapshot: Snapshot) -> None:
    """A snapshot written and read back is the same value."""
    assert loads(dumps(snapshot)) == snapshot


def pep751_problems(doc: dict[str, object]) -> list[str]:
    """The structure PEP 751 gives `pylock.toml`, checked key by key (the spec's File Format
    section): required keys, their types, one kind of source per package, hashes on every
    file, and nothing outside the spec's keys except under `[tool]`."""
    top = {"lock-version": str, "environments": list, "requires-python": str, "extras": list,
           "dependency-groups": list, "default-groups": list, "created-by": str,
           "packages": list, "tool": dict}
    package = {"name": str, "version": str, "marker": str, "requires-python": str,
               "dependencies": list, "vcs": dict, "directory": dict, "archive": dict,
               "index": str, "sdist": dict, "wheels": list, "attestation-identities": list,
               "tool": dict}
    wheel = {"name": str, "upload-time": object, "url": str, "path": str, "size": int,
             "hashes": dict}
    out = []

    def keys(table: dict[str, object], allowed: dict[str, type], where: str) -> None:
        out.extend(f"{where}: unknown key {k}" for k in table if k not in allowed)
        out.extend(f"{where}.{k}: not {t.__name__}" for k, t in allowed.items()
                   if k in table and not isinstance(table[k], t))

    keys(doc, top, "")
    out.extend(f"missing {k}" for k in ("lock-version", "created-by", "packages") if k not in doc)
    if doc.get("lock-version") != "1.0":
        out.append("lock-version is not 1.0")
    for i, p in enumerate(doc.get("packages", [])):  # type: ignore[arg-type]
        keys(p, package, f"packages[{i}]")
        if "name" not in p:
            out.append(f"packages[{i}]: no name")
        direct = [k for k in ("vcs", "directory", "archive") if k in p]
        files = [k for k in ("sdist", "wheels") if k in p]
        if len(direct) + bool(files) != 1:
            out.append(f"packages[{i}]: sources {direct + files}")
        if "directory" in p and not isinstance(p["directory"].get("path"), str):
            out.append(f"packages[{i}].directory: no path")
        for j, w in enumerate(p.get("wheels", [])):
            keys(w, wheel, f"packages[{i}].wheels[{j}]")
            if not ("url" in w or "path" in w) or not w.get("hashes"):
                out.append(f"packages[{i}].wheels[{j}]: no url/path or no hashes")
    return out


def test_written_file_is_pep751() -> None:
    """The written file has PEP 751's structure, which packaging's validator agrees with, and
    abifit's facts only under [tool.abifit]; `check -r` pins its wheel entries."""
    text = dumps(FULL)
    doc = tomllib.loads(text)
    assert pep751_problems(doc) == []
    Pylock.from_dict(doc)  # raises PylockValidationError when not spec-compliant
    assert set(doc["tool"]) == {"abifit"}
    assert doc["tool"]["abifit"]["unrecorded"] == ["debian-thing"]
    assert pylock_toml(text).requirements == ("extpkg==1.0", "hostpkg==1.0")


def test_validator_catches_what_the_spec_forbids() -> None:
    """The structural check in this file fails a package with two sources, a wheel without
    hashes and a key outside the spec (so that its passing means something)."""
    doc = tomllib.loads(dumps(FULL))
    doc["packages"][0]["directory"] = {"path": "/x"}
    del doc["packages"][1]["wheels"][0]["hashes"]
    doc["abifit"] = {}
    assert len(pep751_problems(doc)) == 3


MALFORMED = {
    "not-toml": "lock-version = \n",
    "lock-version-2": dumps(FULL).replace('lock-version = "1.0"', 'lock-version = "2.0"'),
    "no-created-by": dumps(FULL).replace('created-by = "abifit 0.1.0"', ""),
    "no-packages": 'lock-version = "1.0"\ncreated-by = "x"\n',
    "package-without-name": dumps(FULL).replace('name = "extpkg"\n', "", 1),
    "loads-not-bool": dumps(FULL).replace("loads = true", 'loads = "yes"', 1),
    "machine-not-string": dumps(FULL).replace('machine = "x86_64"', "machine = 1"),
    "format-not-int": dumps(FULL).replace("format = 1", 'format = "1"'),
    "wheel-without-hashes": dumps(FULL).replace(f'sha256 = "{SHA}"', "", 1),
}


@pytest.mark.parametrize("text", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_snapshot_is_one_error(text: str, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """A malformed snapshot is a FormatError, and on the command line one `error:` line and
    exit status 2 (diff and check --snapshot alike)."""
    with pytest.raises(FormatError):
        loads(text)
    bad = tmp_path / "pylock.toml"
    bad.write_text(text)
    for argv in (["diff", str(bad), str(bad)], ["check", "--snapshot", str(bad), "--offline"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("error:") == 1 and err.startswith("error: "), err
        assert ": : " not in err, err  # a key at the top level is named without a blank


# --- comparing -------------------------------------------------------------------------------


def side(snapshot: Snapshot, kind: SideKind = SideKind.SNAPSHOT) -> Side:
    return Side(kind.value, kind, snapshot)


def test_diff_of_a_snapshot_with_itself_is_empty() -> None:
    """Nothing changed, nothing breaks."""
    report = compare(side(FULL), side(FULL))
    assert (report.abi, report.versions, report.breaks) == ((), (), ())


def test_module_that_stops_loading_breaks() -> None:
    """A module A loaded that does not load on B breaks, with B's error, listed first; the
    version change comes after."""
    broken = replace(MODULE, loads=False, error="_ops.abi3.so: undefined symbol: f")
    b = replace(FULL, modules=(broken, FULL.modules[1]),
                packages=(replace(FULL.packages[0], version="1.1"), *FULL.packages[1:]))
    report = compare(side(FULL), side(b))
    assert [(c.kind, c.subject, c.after, c.breaks) for c in report.breaks] == [
        (ChangeKind.STOPS_LOADING, "extpkg._ops", "_ops.abi3.so: undefined symbol: f", True)]
    assert report.abi[0].breaks
    assert [(c.subject, c.before, c.after) for c in report.versions] == [("extpkg", "1.0", "1.1")]


def test_cuda_major_bindings_and_host_facts() -> None:
    """A soname of another CUDA major, other bindings, and an ld.so.conf directory B's loader
    did not use are ABI changes that break nothing by themselves."""
    moved = replace(MODULE, needed=(MODULE.needed[0], Needed(
        "libcudart.so.13", "/usr/local/cuda-13.0/lib64/libcudart.so.13", "ld.so.cache")),
        providers=(("libhost.so", 2),), bindings_sha256=bindings_digest([]))
    assert FULL.host is not None
    b = replace(FULL, modules=(moved, FULL.modules[1]), host=replace(FULL.host, ld_so_conf=()))
    kinds = {c.kind: c for c in compare(side(FULL), side(b)).abi}
    assert kinds[ChangeKind.CUDA_MAJOR].before == "libcudart CUDA 12"
    assert kinds[ChangeKind.CUDA_MAJOR].after == "libcudart CUDA 13"
    assert "libhost.so 3 -> 2" in kinds[ChangeKind.BINDINGS].detail
    assert kinds[ChangeKind.HOST].subject == "ld.so.conf"
    assert "/etc/ld.so.conf.d/foo.conf:1" in (kinds[ChangeKind.HOST].before or "")
    assert not any(c.breaks for c in kinds.values())


def test_a_module_built_against_another_numpy_c_api() -> None:
    """A module rebuilt with NumPy 2.x headers (for NumPy 1.23 and newer) where it had 1.x
    ones: an ABI change that names both; the fields are written and read back."""
    before = replace(MODULE, numpy_headers=1)
    after = replace(MODULE, numpy_headers=2, numpy_feature="1.23")
    a = replace(FULL, modules=(before, FULL.modules[1]))
    b = replace(FULL, modules=(after, FULL.modules[1]))
    assert loads(dumps(b)) == b
    [change] = [c for c in compare(side(a), side(b)).abi if c.kind is ChangeKind.NUMPY_C_API]
    assert (change.subject, change.before, change.after) == (
        "extpkg._ops", "NumPy 1.x headers", "NumPy 2.x headers, NumPy 1.23 or newer")
    assert not change.breaks


def test_lock_side_compares_versions_only(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """A requirements file as B with --versions-only: versions compared, no ABI claim (no
    index asked), exit 0; JSON per schema, the side a lock read for its versions."""
    snap = tmp_path / "pylock.toml"
    snap.write_text(dumps(FULL))
    reqs = tmp_path / "requirements.txt"
    reqs.write_text("extpkg==2.0\nhostpkg==1.0\n")
    assert main(["diff", str(snap), str(reqs), "--versions-only", "--offline", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    validate(doc, schema("diff"))
    assert doc["abi"] == [] and doc["abi_compared"] is False
    assert doc["sides"] == [{"kind": "snapshot", "target": None},
                            {"kind": "lock", "target": None}]
    assert {(c["kind"], c["subject"]) for c in doc["versions"]} == {
        ("version", "extpkg"), ("removed", "local"), ("removed", "debian-thing")}
    assert any("versions alone" in n for n in doc["notes"])


# --- a library found through ld.so.conf.d ----------------------------------------------------


@pytest.fixture(scope="module")
def conf_stack(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """libfoo.so.1 in <root>/opt/foo/lib, named by <root>/etc/ld.so.conf.d/foo.conf and in the
    ld.so cache ldconfig builds from it; a wheel whose extension needs it; a venv with the wheel
    installed by pip."""
    if shutil.which("gcc") is None or shutil.which("ldconfig") is None:
        pytest.skip("needs gcc and ldconfig")
    root = tmp_path_factory.mktemp("confstack")
    lib = compile_c(SOURCES / "libfoo.c", root / "opt/foo/lib/libfoo.so.1", soname="libfoo.so.1")
    ext = compile_c(SOURCES / "ext_foo.c", root / "build/_foo.abi3.so", libs=[lib])
    (root / "etc/ld.so.conf.d").mkdir(parents=True)
    (root / "etc/ld.so.conf").write_text(f"include {root}/etc/ld.so.conf.d/*.conf\n")
    (root / "etc/ld.so.conf.d/foo.conf").write_text(f"{root}/opt/foo/lib\n")
    subprocess.run(["ldconfig", "-X", "-C", str(root / "ld.so.cache"), "-f",
                    str(root / "etc/ld.so.conf")], check=True, capture_output=True)
    name, data = make_wheel("foopkg", "1.0", {"foopkg/__init__.py": b"",
                                              "foopkg/_foo.abi3.so": ext.read_bytes(),
                                              "foopkg-1.0.dist-info/RECORD": b""},
                            tag="cp311-abi3-linux_x86_64")
    wheel = root / "wheels" / name
    wheel.parent.mkdir()
    wheel.write_bytes(data)
    python = shutil.which("python3.11") or sys.executable
    venv = root / "venv"
    subprocess.run([python, "-m", "venv", "--without-pip", str(venv)], check=True)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin/python"),
                    "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True)
    return {"root": root, "venv": venv, "wheel": wheel}


def test_snapshot_records_the_ld_so_conf_entry(conf_stack: dict[str, Path]) -> None:
    """The snapshot records the ld.so.conf.d file, line and directory that found libfoo.so.1,
    the module's fingerprint, and the wheel pip installed (its file URL and sha256)."""
    root = conf_stack["root"]
    snap = take_snapshot(str(conf_stack["venv"] / "bin/python"), cache_dir=None, environ={},
                         progress=lambda _m: None, remote=None, cuda=False,
                         ld_so_conf=str(root / "etc/ld.so.conf"),
                         ld_so_cache=str(root / "ld.so.cache"))
    assert snap.host is not None
    assert LibraryDir(f"{root}/opt/foo/lib", ("libfoo.so.1",),
                      f"{root}/etc/ld.so.conf.d/foo.conf", 1) in snap.host.ld_so_conf
    (module,) = [m for m in snap.modules if m.distribution == "foopkg"]
    assert module.loads and module.module == "foopkg._foo"
    assert Needed("libfoo.so.1", f"{root}/opt/foo/lib/libfoo.so.1", "ld.so.cache") in \
        module.needed
    assert module.providers == (("libfoo.so.1", 1),)
    assert module.bindings_sha256 == bindings_digest([("foo_answer", None, "libfoo.so.1")])
    (foo,) = [p for p in snap.packages if p.name == "foopkg"]
    assert foo.wheel is not None and foo.wheel.name == conf_stack["wheel"].name
    import hashlib
    assert foo.wheel.sha256 == hashlib.sha256(conf_stack["wheel"].read_bytes()).hexdigest()
    assert loads(dumps(snap)) == snap


def test_check_snapshot_gives_the_recorded_fix(conf_stack: dict[str, Path], tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """`check --snapshot` on a host profile saved from this machine (whose ld.so.conf has no
    such entry) reports libfoo.so.1 missing, with the directory and file the snapshot recorded
    and ldconfig as the fix; the snapshot's JSON follows its schema."""
    root, venv = conf_stack["root"], conf_stack["venv"]
    lock = tmp_path / "pylock.toml"
    assert main(["snapshot", "--python", str(venv / "bin/python"), "-o", str(lock), "--no-index",
                 "--ld-so-conf", str(root / "etc/ld.so.conf"),
                 "--ld-so-cache", str(root / "ld.so.cache"), "--no-cache", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    validate(doc, schema("snapshot"))
    profile = tmp_path / "host.profile"
    assert main(["doctor", "--python", str(venv / "bin/python"), "--no-index", "--no-cache",
                 "--save-host", str(profile)]) == 1  # this machine does not find libfoo
    capsys.readouterr()
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS"):
        monkeypatch.delenv(var, raising=False)
    with LoopbackServer() as server:
        index = publish_index(server, {"foopkg": [(conf_stack["wheel"].name,
                                                   conf_stack["wheel"].read_bytes())]})
        code = main(["check", "--snapshot", str(lock), "--host", str(profile), "--index-url",
                     index.url, "--platform", "linux_x86_64", "--cache-dir", str(tmp_path / "c"),
                     "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1
    (finding,) = [f for f in out["findings"] if f["kind"] == "missing-library"]
    assert finding["library"] == "libfoo.so.1"
    assert f"add {root}/opt/foo/lib to {root}/etc/ld.so.conf.d/foo.conf" in finding["hint"]
    assert "run ldconfig" in finding["hint"]
    assert "snapshot's machine" in finding["explanation"]


@pytest.mark.parametrize(("name", "warned"), [("pylock.toml", False), ("pylock.gpu.toml", False),
                                              ("stack.toml", True), ("pylock.a.b.toml", True)])
def test_an_output_name_installers_do_not_read_is_warned_of(
        conf_stack: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        name: str, warned: bool) -> None:
    """PEP 751 names the file `pylock.toml` or `pylock.NAME.toml` (uv refuses other names):
    `-o` with another name is written, with a warning."""
    out = tmp_path / name
    assert main(["snapshot", "--python", str(conf_stack["venv"] / "bin/python"), "-o", str(out),
                 "--no-index", "--no-cache"]) == 0
    err = capsys.readouterr().err
    assert out.is_file()
    assert ("warning: " in err and "pylock.NAME.toml" in err) == warned


def test_snapshot_and_diff_as_library_calls(conf_stack: dict[str, Path], tmp_path: Path) -> None:
    """`abifit.snapshot` writes the lock and returns the report the command prints;
    `abifit.diff` of that lock against the same environment finds nothing broken."""
    import abifit

    lock = tmp_path / "pylock.toml"
    python = str(conf_stack["venv"] / "bin/python")
    report = abifit.snapshot(python, output=lock, no_index=True, cache_dir=tmp_path / "cache")
    assert isinstance(report, abifit.SnapshotReport)
    assert loads(lock.read_text("utf-8")) == report.snapshot
    assert [m.module for m in report.snapshot.modules] == ["foopkg._foo"]
    compared = abifit.diff(lock, conf_stack["venv"], cache_dir=tmp_path / "cache")
    assert isinstance(compared, abifit.DiffReport)
    assert (compared.breaks, compared.abi, compared.versions) == ((), (), ())


def test_requirements_never_mix_hashed_and_unhashed_lines() -> None:
    """pip's hash-checking mode refuses a file that hashes some lines only: with some wheels
    known, the others are comments under a line that says why; with none known, all are
    plain pins."""
    from abifit.report.snapshot import requirements_text

    text = requirements_text(FULL)
    pins = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert pins == [f"extpkg==1.0 --hash=sha256:{SHA}", f"hostpkg==1.0 --hash=sha256:{SHA}"]
    assert "# local==0.1  # built from /src/local" in text
    assert "hash-checking mode refuses" in text
    bare = replace(FULL, packages=tuple(replace(p, wheel=None) for p in FULL.packages))
    assert [line for line in requirements_text(bare).splitlines()
            if line and not line.startswith("#")] == [
        "extpkg==1.0  # no wheel or source recorded", "hostpkg==1.0  # no wheel or source recorded",
        "local==0.1  # built from /src/local", "debian-thing==2  # no wheel or source recorded"]


def test_a_wheel_renamed_after_its_wheel_file_was_written_is_found() -> None:
    """sgl-kernel's WHEEL says cp310-abi3-linux_x86_64 while PyPI's file is
    manylinux2014_x86_64: the one file of that version with the same interpreters, ABIs, C
    library and architecture is the installed wheel; two such files are not told apart."""
    from types import SimpleNamespace

    from abifit.engines.snapshot import _matches
    from abifit.remote.packageindex import IndexFile

    dist = SimpleNamespace(version="0.3.21")
    tags = frozenset({"cp310-abi3-linux_x86_64"})
    pypi = IndexFile("sgl_kernel-0.3.21-cp310-abi3-manylinux2014_x86_64.whl", "u")
    arm = IndexFile("sgl_kernel-0.3.21-cp310-abi3-manylinux2014_aarch64.whl", "u")
    older = IndexFile("sgl_kernel-0.3.20-cp310-abi3-manylinux2014_x86_64.whl", "u")
    assert not _matches(pypi, dist, tags)  # type: ignore[arg-type]
    assert _matches(pypi, dist, tags, loosely=True)  # type: ignore[arg-type]
    assert not _matches(arm, dist, tags, loosely=True)  # type: ignore[arg-type]
    assert not _matches(older, dist, tags, loosely=True)  # type: ignore[arg-type]


def test_the_installer_and_this_machines_paths_are_not_locked(tmp_path: Path) -> None:
    """A venv made with pip (and nothing requiring it): the snapshot locks neither pip nor
    setuptools, and records the interpreter relative to the environment (`bin/python`), not
    this machine's absolute path."""
    from venvs import clean_environ

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    installed = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "list",
                                "--format=json"], capture_output=True, text=True, check=True)
    assert "pip" in {d["name"] for d in json.loads(installed.stdout)}
    lock = tmp_path / "pylock.toml"
    done = subprocess.run([sys.executable, "-m", "abifit", "snapshot", "--python",
                           str(venv / "bin" / "python"), "-o", str(lock), "--no-index",
                           "--no-cache"], capture_output=True, text=True, env=clean_environ(),
                          timeout=300, check=False)
    assert done.returncode in (0, 1), done.stderr
    snap = loads(lock.read_text(), str(lock))
    assert not {"pip", "setuptools"} & {p.name for p in snap.packages}
    assert snap.python == "bin/python" and str(tmp_path) not in lock.read_text()


def test_check_snapshot_checks_the_wheels_the_snapshot_recorded() -> None:
    """`check --snapshot`'s pins are the recorded wheels: a wheel with its URL is that file
    (URL, sha256, size), one known by its path only is found on the index by its sha256, and
    a directory is not checked."""
    from abifit.engines.snapshot import snapshot_pins

    pins, skipped = snapshot_pins(FULL)
    by_name = {p.name: p for p in pins}
    ext = by_name["extpkg"]
    assert ext.requirement == "extpkg==1.0" and ext.hashes == (SHA,)
    assert [(f.url, f.sha256, f.size) for f in ext.files] == [
        ("https://example.org/extpkg.whl", SHA, 10)]
    host = by_name["hostpkg"]
    assert host.hashes == (SHA,) and host.files == ()
    assert [s.split(" ")[0] for s in skipped] == ["local", "debian-thing"]
