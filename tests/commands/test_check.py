"""`abifit check`, `matrix` and `variants` against a real loopback index serving wheels built
here: a host package whose 2.0 changes a parameter from `int` to `unsigned int`, an extension
built against 1.0, and an extension that links the NVIDIA driver directly."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from abifit.cli import main
from abifit.formats.pins import pylock_toml, requirements_txt, uv_lock
from fixtures.build import compile_c
from helpers import CHECK_SOURCES, TARGET, make_wheel, run_cli, schema, validate, wheels
from httpserver import LoopbackIndex, LoopbackServer, Projects, publish_index

SCHEMA = schema("check")
MATRIX_SCHEMA = schema("matrix")
VARIANTS_SCHEMA = schema("variants")

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


@pytest.fixture(scope="module")
def index_projects(binaries: dict[str, bytes]) -> Projects:
    """What `loopback_index` (conftest.py) serves to this module: the projects of `wheels`."""
    return wheels(binaries)


def test_extension_fits_the_host_it_was_built_for(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """extpkg requires hostpkg==1.0; checked alone, the dependency is resolved and it fits."""
    code, out, _err = run_cli(capsys, monkeypatch, tmp_path, "check", "extpkg==1.0", "--index-url",
                              loopback_index.url, "--json")
    doc = json.loads(out)
    validate(doc, SCHEMA)
    assert code == 0, out
    assert doc["verdict"] == "fits"
    assert {(w["name"], w["version"], w["role"]) for w in doc["wheels"]} == {
        ("extpkg", "1.0", "target"), ("hostpkg", "1.0", "dependency")}
    assert [m["module"] for m in doc["modules"]] == ["extpkg._ops"]
    assert doc["modules"][0]["loads"] is True
    assert doc["transfer"]["bytes_fetched"] > 0


def test_new_host_fails_naming_the_parameter(loopback_index: LoopbackIndex,
                                             tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """With hostpkg 2.0 the symbol is undefined; the finding names it, demangled, with the
    parameter that changed, and a note says the metadata forbids this pairing."""
    code, out, _err = run_cli(capsys, monkeypatch, tmp_path, "check", "extpkg==1.0", "--with",
                              "hostpkg==2.0", "--index-url", loopback_index.url, "--json")
    doc = json.loads(out)
    validate(doc, SCHEMA)
    assert code == 1
    assert doc["verdict"] == "fails"
    finding = doc["findings"][0]
    assert finding["kind"] == "undefined-symbol"
    assert finding["symbol"] == "_ZN7hostlib10check_implEiPKcS1_ib"
    assert "parameter 4: `int` → `unsigned int`" in finding["explanation"]
    assert any("requires hostpkg==1.0" in n and "forbids" in n for n in doc["notes"])
    code, text, _err = run_cli(capsys, monkeypatch, tmp_path, "check", "extpkg==1.0", "--with",
                               "hostpkg==2.0", "--index-url", loopback_index.url)
    assert "hostlib::check_impl(int, char const*, char const*, int, bool)" in text
    verdict = text.rstrip().splitlines()[-1]
    assert verdict.startswith("fails: ")
    assert verdict.endswith("; the metadata forbids this pairing (extpkg 1.0 requires "
                            "hostpkg==1.0, but hostpkg 2.0)")


def test_a_dependency_is_chosen_by_every_requirement_on_it(
        loopback_index: LoopbackIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """anyhost (read first, as --with) asks for hostpkg>=1.0, whose newest is 2.0; extpkg then
    asks for hostpkg==1.0. The stack judged is the one both allow, hostpkg 1.0, as pip would
    install it: it fits, with no note of a forbidden pairing."""
    code, out, _err = run_cli(capsys, monkeypatch, tmp_path, "check", "extpkg==1.0", "--with",
                              "anyhost", "--index-url", loopback_index.url, "--json")
    doc = json.loads(out)
    validate(doc, SCHEMA)
    assert {(w["name"], w["version"]) for w in doc["wheels"]} == {
        ("extpkg", "1.0"), ("anyhost", "1.0"), ("hostpkg", "1.0")}
    assert (code, doc["verdict"]) == (0, "fits"), doc["findings"]
    assert not any("forbids" in n for n in doc["notes"])


def test_a_check_is_not_simulated_twice(loopback_index: LoopbackIndex, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The same wheels (by sha256) on the same host give the stored answer without a second
    simulation; --refresh simulates again."""
    import abifit.engines.check

    args = ("check", "extpkg==1.0", "--with", "hostpkg==2.0", "--index-url", loopback_index.url,
            "--json")
    code, first, _err = run_cli(capsys, monkeypatch, tmp_path, *args)
    assert code == 1

    def simulate_again(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("simulated a second time")

    monkeypatch.setattr(abifit.engines.check, "simulate", simulate_again)
    code, second, _err = run_cli(capsys, monkeypatch, tmp_path, *args)
    assert code == 1
    strip = lambda doc: {k: v for k, v in json.loads(doc).items() if k != "transfer"}  # noqa: E731
    assert strip(second) == strip(first)
    assert len(list((tmp_path / "checks-v2").rglob("*"))) >= 1
    code, _out, err = run_cli(capsys, monkeypatch, tmp_path, *args, "--refresh")
    assert code == 3 and "simulated a second time" in err  # the command line: a bug is exit 3


def test_local_wheel_target(loopback_index: LoopbackIndex, tmp_path: Path,
                            capsys: pytest.CaptureFixture[str],
                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A local .whl file is a target like a requirement; its dependency comes from the index."""
    filename = "extpkg-1.0-cp310-abi3-linux_x86_64.whl"
    path = tmp_path / filename
    path.write_bytes(loopback_index.files[filename])
    code, out, _err = run_cli(capsys, monkeypatch, tmp_path / "cache", "check", str(path),
                              "--index-url", loopback_index.url, "--json")
    assert code == 0 and json.loads(out)["verdict"] == "fits"


def test_driver_is_reported_apart(loopback_index: LoopbackIndex, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """An extension linking libcuda.so.1: on a machine without the driver the verdict says the
    ABI fits but the driver is missing (exit 1); with --assume-driver it fits (exit 0)."""
    has_driver = b"libcuda.so.1" in subprocess.run(["/sbin/ldconfig", "-p"],
                                                   capture_output=True).stdout
    code, out, _err = run_cli(capsys, monkeypatch, tmp_path, "check", "drvpkg==1.0", "--index-url",
                              loopback_index.url, "--json")
    doc = json.loads(out)
    assert doc["findings"] == []
    if has_driver:
        assert (code, doc["verdict"]) == (0, "fits")
    else:
        assert (code, doc["verdict"], doc["host_missing"]) == (
            1, "fits-but-host-lacks-driver", ["libcuda.so.1"])
    code, out, _err = run_cli(capsys, monkeypatch, tmp_path, "check", "drvpkg==1.0", "--index-url",
                              loopback_index.url, "--assume-driver", "580.95", "--json")
    assert (code, json.loads(out)["verdict"]) == (0, "fits")


def test_matrix_singles_out_the_fitting_host(loopback_index: LoopbackIndex,
                                             tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """`matrix extpkg==1.0 --against hostpkg>=1`: 1.0 fits, 2.0 fails on the changed symbol;
    the HTML page holds both rows."""
    page = tmp_path / "m.html"
    code, out, _err = run_cli(capsys, monkeypatch, tmp_path, "matrix", "extpkg==1.0", "--against",
                              "hostpkg>=1", "--index-url", loopback_index.url, "--json", "--html",
                              str(page))
    doc = json.loads(out)
    validate(doc, MATRIX_SCHEMA)
    assert code == 0
    assert doc["fits"] == ["1.0"]
    rows = {r["version"]: r for r in doc["rows"]}
    assert rows["2.0"]["verdict"] == "fails" and rows["2.0"]["failing_symbols"] == 1
    assert rows["2.0"]["first"] == "hostlib::check_impl(int, char const*, char const*, int, bool)"
    html = page.read_text()
    assert html.startswith("<!doctype html>") and 'class="fits"' in html
    assert "hostlib::check_impl" in html


def test_variants_groups_identical_wheels(loopback_index: LoopbackIndex, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """hostpkg 2.0 has two wheels with identical binaries and one whose library also calls
    puts: two groups, and the difference is told by needs."""
    code, out, _err = run_cli(capsys, monkeypatch, tmp_path, "variants", "hostpkg==2.0",
                              "--index-url", loopback_index.url, "--json")
    doc = json.loads(out)
    validate(doc, VARIANTS_SCHEMA)
    assert code == 0
    groups = sorted(sorted(g["filenames"]) for g in doc["groups"])
    assert groups == [["hostpkg-2.0-1-py3-none-linux_x86_64.whl",
                       "hostpkg-2.0-py3-none-linux_x86_64.whl"],
                      ["hostpkg-2.0-2-py3-none-linux_x86_64.whl"]]
    (diff,) = doc["differences"]
    assert diff["path"] == "hostpkg/lib/libhost.so"
    assert diff["undefined_added"] == ["puts"] and diff["undefined_removed"] == []
    assert diff["same_needs"] is False


@pytest.mark.parametrize(("args", "needle"), [
    (["check", "nosuchpkg==1.0"], "nosuchpkg"),
    (["check", "extpkg==9.9"], "extpkg"),
    (["check", "extpkg=1.0"], "invalid requirement"),
    (["variants", "hostpkg==7.0"], "no wheels for 7.0"),
    (["matrix", "extpkg==1.0", "--against", "hostpkg>=9"], "hostpkg"),
], ids=["unknown-package", "unknown-version", "typo", "variants-unknown-version",
        "matrix-no-host-release"])
def test_errors_are_one_line_with_exit_2(loopback_index: LoopbackIndex, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch, args: list[str],
                                         needle: str) -> None:
    """Unknown packages and versions and malformed requirements are an `error:` line, exit 2."""
    code, out, err = run_cli(capsys, monkeypatch, tmp_path, *args, "--index-url",
                             loopback_index.url)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and needle in err.splitlines()[0]
    assert "Traceback" not in err


def test_index_down_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                monkeypatch: pytest.MonkeyPatch) -> None:
    """An index that refuses connections is one error line and exit 2."""
    with LoopbackServer() as server:
        url = server.url("/simple")
    code, _out, err = run_cli(capsys, monkeypatch, tmp_path, "check", "extpkg==1.0", "--index-url",
                              url)
    assert code == 2 and err.startswith("error: ")


def test_requirement_files() -> None:
    """requirements.txt lines, uv.lock and pylock.toml packages become pinned requirements."""
    digest = "ab" * 32
    reqs, included, skipped = requirements_txt(
        f"# comment\ntorch==2.9.1 --hash=sha256:{digest}\n-r more.txt\n--index-url x\n"
        "-e ./local\nsgl-kernel==0.3.21 ; sys_platform == 'linux'  # pinned\n"
        "pywin32==306 ; sys_platform == 'win32'\n\n", {"sys_platform": "linux"})
    assert [(p.requirement, p.hashes) for p in reqs] == [("torch==2.9.1", (digest,)),
                                                         ("sgl-kernel==0.3.21", ())]
    assert included == ["more.txt"] and skipped == ["-e ./local"]
    lock = uv_lock('version = 1\n[[package]]\nname = "torch"\nversion = "2.9.1"\n'
                   'source = { registry = "https://pypi.org/simple" }\n'
                   '[[package]]\nname = "app"\nversion = "0.1"\nsource = { editable = "." }\n')
    assert lock.requirements == ("torch==2.9.1",) and lock.skipped == ("app (source editable)",)
    pylock = pylock_toml('lock-version = "1.0"\n[[packages]]\nname = "numpy"\n'
                         'version = "2.1.0"\n[[packages.wheels]]\nname = "numpy.whl"\n')
    assert pylock.requirements == ("numpy==2.1.0",)


def test_check_from_a_requirements_file(loopback_index: LoopbackIndex, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """`check -r FILE` checks every native wheel the file pins, with the pinned versions."""
    pins = tmp_path / "requirements.txt"
    pins.write_text("extpkg==1.0\nhostpkg==2.0\n")
    code, out, _err = run_cli(capsys, monkeypatch, tmp_path, "check", "-r", str(pins),
                              "--index-url", loopback_index.url, "--json")
    doc = json.loads(out)
    assert code == 1 and doc["verdict"] == "fails"
    assert {w["name"]: w["version"] for w in doc["wheels"]} == {"extpkg": "1.0", "hostpkg": "2.0"}


@pytest.fixture(scope="module")
def host_profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This machine's host profile, saved by `abifit doctor --save-host` on a bare venv."""
    import sys

    root = tmp_path_factory.mktemp("profiled")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")],
                   check=True)
    profile = root / "host.profile"
    code = main(["doctor", "--python", str(root / "venv" / "bin" / "python"), "--no-index",
                 "--no-cache", "--save-host", str(profile)])
    assert code == 0
    return profile


def test_check_against_a_saved_host_profile(loopback_index: LoopbackIndex,
                                            host_profile: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A profile of this machine gives the same modules and findings as this machine itself;
    the report says which host it checked for."""
    capsys.readouterr()
    args = ("check", "extpkg==1.0", "--with", "hostpkg==2.0", "--index-url", loopback_index.url,
            "--json")
    code, here, _err = run_cli(capsys, monkeypatch, tmp_path / "a", *args)
    code_p, there, _err = run_cli(capsys, monkeypatch, tmp_path / "b", *args, "--host",
                                  str(host_profile))
    here_doc, there_doc = json.loads(here), json.loads(there)
    validate(there_doc, SCHEMA)
    assert code == code_p == 1
    assert there_doc["modules"] == here_doc["modules"]
    assert [f["symbol"] for f in there_doc["findings"]] == [f["symbol"]
                                                             for f in here_doc["findings"]]
    assert any(n.startswith("host: a saved profile of an ELF64") for n in there_doc["notes"])
    code, out, _err = run_cli(capsys, monkeypatch, tmp_path / "c", "check", "drvpkg==1.0",
                              "--index-url", loopback_index.url, "--json", "--host",
                              str(host_profile))
    assert json.loads(out)["verdict"] in ("fits", "fits-but-host-lacks-driver")


def test_a_host_profile_that_is_not_one_is_refused(loopback_index: LoopbackIndex,
                                                   tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A file that is not a profile, or a pickle that would run code (profiles were pickles
    before format 2), is one error line, exit 2; the pickle is not unpickled."""
    import gzip
    import pickle

    class Evil:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return (print, ("pwned",))

    bad = tmp_path / "text.profile"
    bad.write_text("hello")
    evil = tmp_path / "evil.profile"
    evil.write_bytes(gzip.compress(pickle.dumps({"format": "abifit-host-profile", "version": 1,
                                                 "snapshot": Evil()})))
    for path, problem in ((bad, "not an abifit host profile"),
                          (evil, "a pickle, as abifit saved host profiles before format 2")):
        code, out, err = run_cli(capsys, monkeypatch, tmp_path, "check", "extpkg==1.0",
                                 "--index-url", loopback_index.url, "--host", str(path))
        assert code == 2 and out == ""
        assert err.startswith(f"error: {path}: {problem}") and err.count("\n") == 1, err
        assert "pwned" not in out + err


@pytest.mark.parametrize(("host", "fits"), [("manylinux_2_28", False), ("manylinux2014", False),
                                            ("manylinux_2_34", True)])
def test_manylinux_presets_check_symbol_versions(loopback_index: LoopbackIndex,
                                                 tmp_path: Path, host: str, fits: bool,
                                                 capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A module that calls close_range (GLIBC_2.34) does not load on a manylinux_2_28 host
    and does on a manylinux_2_34 one; the finding names the version and libc.so.6."""
    code, out, _err = run_cli(capsys, monkeypatch, tmp_path, "check", "newglibc==1.0",
                              "--index-url", loopback_index.url, "--json", "--host", host)
    doc = json.loads(out)
    validate(doc, SCHEMA)
    assert any(n.startswith(f"host: the {host.replace('manylinux2014', 'manylinux_2_17')} "
                            "preset") for n in doc["notes"]), doc["notes"]
    if fits:
        assert code == 0 and doc["verdict"] == "fits", doc["findings"]
    else:
        assert code == 1 and doc["verdict"] == "fails"
        (finding,) = doc["findings"]
        assert finding["kind"] == "missing-version"
        assert finding["version"] == "GLIBC_2.34"
        assert finding["library"].endswith("libc.so.6")


def _glibc() -> tuple[int, ...]:
    import os

    version = os.confstr("CS_GNU_LIBC_VERSION") or "glibc 0"
    return tuple(int(part) for part in version.split()[-1].split("."))


@pytest.mark.skipif(_glibc() < (2, 34), reason="needs glibc >= 2.34 on this machine")
def test_this_machine_has_the_newer_glibc(loopback_index: LoopbackIndex, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a preset, the module loads here (this machine's glibc is at least 2.34)."""
    code, out, _err = run_cli(capsys, monkeypatch, tmp_path, "check", "newglibc==1.0",
                              "--index-url", loopback_index.url, "--json")
    assert code == 0 and json.loads(out)["verdict"] == "fits"


def test_matrix_cells_read_a_shared_dependency_once(
        binaries: dict[str, bytes], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two host releases that require the same dependency wheel, checked at once without a
    cache: the dependency's bytes are fetched as often as for one check, not once per cell."""
    dep = make_wheel("depkg", "1.0", {"depkg/__init__.py": b"",
                                      "depkg/lib/libdep.so": binaries["v2m"]})
    projects = {
        "hostpkg": [make_wheel("hostpkg", v, {"hostpkg/__init__.py": b"",
                                              "hostpkg/lib/libhost.so": binaries["v1"]},
                               requires=("depkg==1.0",)) for v in ("1.0", "1.1")],
        "depkg": [dep],
        "extpkg": wheels(binaries)["extpkg"],
    }
    with LoopbackServer(delay_s=0.05) as server:
        publish_index(server, projects, sha256=False)
        dep_path = f"/files/{dep[0]}"
        code, _out, _err = run_cli(capsys, monkeypatch, tmp_path, "check", "extpkg==1.0", "--with",
                                   "hostpkg==1.0", "--index-url", server.url("/simple"),
                                   "--no-cache")
        assert code == 0, _out
        once = server.count(path=dep_path)
        assert once > 0
        server.reset_counters()
        code, out, _err = run_cli(capsys, monkeypatch, tmp_path, "matrix", "extpkg==1.0",
                                  "--against", "hostpkg>=1", "--index-url", server.url("/simple"),
                                  "--no-cache", "--jobs", "2", "--json")
        assert code == 0, out
        doc = json.loads(out)
        validate(doc, MATRIX_SCHEMA)
        assert doc["fits"] == ["1.1", "1.0"]
        assert server.count(path=dep_path) == once


@pytest.mark.parametrize(("host", "tag"), [("manylinux2014", "manylinux_2_17_x86_64"),
                                           ("manylinux_2_28", "manylinux_2_28_x86_64")])
def test_a_preset_sets_the_target_platform(loopback_index: LoopbackIndex, tmp_path: Path,
                                           host: str, tag: str,
                                           capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --platform, a preset host's glibc is the target platform (the wheels pip would
    choose there); a --platform given still wins."""
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS"):
        monkeypatch.delenv(var, raising=False)
    args = ["check", "newglibc==1.0", "--index-url", loopback_index.url, "--json", "--host",
            host, "--python-version", "3.11", "--cache-dir", str(tmp_path)]
    main(args)
    doc = json.loads(capsys.readouterr().out)
    assert str(doc["target"]).startswith(f"cp311 on {tag}")
    main([*args, "--platform", "linux_x86_64"])
    doc = json.loads(capsys.readouterr().out)
    assert str(doc["target"]).startswith("cp311 on linux_x86_64")


@pytest.mark.parametrize(("host", "fits"), [("manylinux_2_28", True), ("manylinux2014", False)])
def test_a_preset_has_the_libraries_its_policy_allows(
        tmp_path: Path, host: str, fits: bool, capsys: pytest.CaptureFixture[str]) -> None:
    """libz.so.1 is on the policy's list: a preset host has this machine's copy, limited to
    the policy's ZLIB nodes (ZLIB_1.2.9 from manylinux_2_28 on, not in manylinux2014)."""
    zlib = Path("/lib/x86_64-linux-gnu/libz.so.1")
    if not zlib.exists():
        pytest.skip("no /lib/x86_64-linux-gnu/libz.so.1 on this machine")
    so = compile_c(CHECK_SOURCES / "zlib_user.c", tmp_path / "_z.abi3.so", libs=[zlib])
    name, data = make_wheel("zlibuser", "1.0", {"zlibuser/__init__.py": b"",
                                                "zlibuser/_z.abi3.so": so.read_bytes()},
                            tag="cp310-abi3-linux_x86_64")
    (tmp_path / name).write_bytes(data)
    code = main(["check", str(tmp_path / name), "--host", host, *TARGET, "--offline",
                 "--no-cache", "--json"])
    doc = json.loads(capsys.readouterr().out)
    if fits:
        assert (code, doc["findings"]) == (0, [])
    else:
        assert code == 1
        (finding,) = doc["findings"]
        assert (finding["kind"], finding["version"]) == ("missing-version", "ZLIB_1.2.9")
        assert finding["library"].endswith("libz.so.1")
