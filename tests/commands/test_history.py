"""`abifit history`: which releases of a package define a symbol, and where its signature changed.

A host library is built at test time in three releases (tests/fixtures/history/hostlib.cpp):
1.0 and 1.1 define `c10::cuda::check_impl(int, char const*, char const*, int, bool)` and
`c10::gone(double)`, 2.0 takes an `unsigned int` line and drops `gone`. They are served as wheels
by the loopback index; the mangled names are checked against `nm -D`.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from abifit.cli import main
from abifit.engines.history import Form, changes_of, is_mangled, ranges
from fixtures.build import compile_c
from helpers import FIXTURES, make_wheel, schema, validate
from httpserver import LoopbackIndex, Projects

SOURCE = FIXTURES / "history" / "hostlib.cpp"
SCHEMA = schema("history")
TARGET = ("--python-version", "3.10", "--platform", "manylinux_2_28_x86_64")
OLD = "_ZN3c104cuda10check_implEiPKcS2_ib"
NEW = "_ZN3c104cuda10check_implEiPKcS2_jb"


@pytest.fixture(scope="module")
def libraries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("history")
    return {
        "old": compile_c(SOURCE, root / "old" / "libhost.so", cxx=True, soname="libhost.so",
                         flags=["-DLINE_TYPE=int", "-DWITH_GONE"]),
        "new": compile_c(SOURCE, root / "new" / "libhost.so", cxx=True, soname="libhost.so",
                         flags=["-DLINE_TYPE=unsigned int"]),
    }


@pytest.fixture(scope="module")
def extensions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """extpkg 1.0, built against the int form, and 2.0, against the unsigned int one."""
    root = tmp_path_factory.mktemp("history-ext")
    return {version: compile_c(SOURCE.parent / "ext.cpp", root / version / "_ops.abi3.so",
                               cxx=True, flags=[f"-DLINE_TYPE={line}"])
            for version, line in (("1.0", "int"), ("2.0", "unsigned int"))}


@pytest.fixture(scope="module")
def index_projects(libraries: dict[str, Path], extensions: dict[str, Path]) -> Projects:
    """hostpkg 1.0, 1.1 (the int form) and 2.0 (unsigned int); the same wheels as torch (whose
    C++ namespace c10 is), and extpkg 1.0 and 2.0."""
    old, new = libraries["old"].read_bytes(), libraries["new"].read_bytes()
    tag = "cp310-abi3-linux_x86_64"
    return {name: [
        make_wheel(name, version, {f"{name}/__init__.py": b"",
                                   f"{name}/lib/libhost.so": data}, tag=tag)
        for version, data in (("1.0", old), ("1.1", old), ("2.0", new))]
        for name in ("hostpkg", "torch")} | {"extpkg": [
            make_wheel("extpkg", version, {"extpkg/__init__.py": b"",
                                           "extpkg/_ops.abi3.so": path.read_bytes()}, tag=tag)
            for version, path in extensions.items()]}


def run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        index: LoopbackIndex, cache: Path, *args: str) -> tuple[int, str, str]:
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS"):
        monkeypatch.delenv(var, raising=False)
    code = main(["history", *args, *TARGET, "--index-url", index.url,
                 "--cache-dir", str(cache)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_fixture_names_are_those_nm_lists(libraries: dict[str, Path]) -> None:
    """The two forms the tests look for are the names `nm -D` gives the built libraries."""
    def defined(path: Path) -> set[str]:
        out = subprocess.run(["nm", "-D", "--defined-only", str(path)], capture_output=True,
                             text=True, check=True).stdout
        return {line.split()[-1] for line in out.splitlines() if line.strip()}

    assert OLD in defined(libraries["old"]) and NEW not in defined(libraries["old"])
    assert NEW in defined(libraries["new"]) and OLD not in defined(libraries["new"])


def test_history_finds_the_release_where_a_parameter_changed(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Given the old mangled name, history lists both forms with their releases and says that
    2.0 changed parameter 4 from int to unsigned int; JSON follows its schema."""
    code, out, _err = run(capsys, monkeypatch, loopback_index, tmp_path, OLD, "--in", "hostpkg",
                          "--versions", ">=1.0", "--json")
    assert code == 0
    doc = json.loads(out)
    validate(doc, SCHEMA)
    assert doc["releases"] == ["1.0", "1.1", "2.0"]
    assert doc["read"] == ["1.0", "1.1", "2.0"]
    forms = {f["name"]: f["releases"] for f in doc["forms"]}
    assert forms == {OLD: ["1.0", "1.1"], NEW: ["2.0"]}
    [change] = doc["changes"]
    assert (change["release"], change["previous"], change["old"], change["new"]) == \
        ("2.0", "1.1", OLD, NEW)
    assert "parameter 4: `int` → `unsigned int`" in change["description"]
    assert doc["transfer"]["bytes_fetched"] > 0


def test_a_second_history_is_a_query_of_the_store(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Once the releases are recorded, history reads no wheel again: by the demangled name,
    and without --versions (the releases in the store), the same forms, nothing read."""
    run(capsys, monkeypatch, loopback_index, tmp_path, OLD, "--in", "hostpkg",
        "--versions", ">=1.0")
    code, out, _err = run(capsys, monkeypatch, loopback_index, tmp_path,
                          "c10::cuda::check_impl", "--in", "hostpkg", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["read"] == []
    assert doc["transfer"] is None or doc["transfer"]["bytes_fetched"] == 0
    assert {f["name"]: f["releases"] for f in doc["forms"]} == {OLD: ["1.0", "1.1"],
                                                               NEW: ["2.0"]}
    code, out, _err = run(capsys, monkeypatch, loopback_index, tmp_path,
                          "c10::cuda::check_impl", "--in", "hostpkg")
    assert "1.0-1.1: c10::cuda::check_impl(int, char const*, char const*, int, bool)" in out
    assert "2.0: c10::cuda::check_impl(int, char const*, char const*, unsigned int, bool)" in out
    assert "changed in 2.0 (after 1.1): same function c10::cuda::check_impl; parameter 4" in out
    code, out, _err = run(capsys, monkeypatch, loopback_index, tmp_path,
                          "check_impl", "--in", "hostpkg", "--json")  # the function's name alone
    assert code == 0
    assert {f["name"]: f["releases"] for f in json.loads(out)["forms"]} == {
        OLD: ["1.0", "1.1"], NEW: ["2.0"]}
    code, out, _err = run(capsys, monkeypatch, loopback_index, tmp_path,
                          "check_imp", "--in", "hostpkg", "--json")  # not a whole name
    assert (code, json.loads(out)["forms"]) == (1, [])


def test_globs_and_a_symbol_no_release_defines(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A glob over mangled or demangled names finds what it matches; a function dropped by the
    last release shows where it stopped; a name no release defines exits 1."""
    code, out, _ = run(capsys, monkeypatch, loopback_index, tmp_path, "_ZN3c104cuda*",
                       "--in", "hostpkg", "--versions", ">=1.0", "--json")
    assert code == 0
    assert {f["name"] for f in json.loads(out)["forms"]} == {OLD, NEW}
    code, out, _ = run(capsys, monkeypatch, loopback_index, tmp_path, "c10::gone*",
                       "--in", "hostpkg", "--json")
    doc = json.loads(out)
    assert code == 0
    assert [(f["demangled"], f["releases"]) for f in doc["forms"]] == \
        [("c10::gone(double)", ["1.0", "1.1"])]
    code, out, _ = run(capsys, monkeypatch, loopback_index, tmp_path,
                       "_ZN3c104cuda10check_implEiPKcS2_lb", "--in", "hostpkg", "--json")
    assert code == 0  # a form no release defines (a long line): the forms the function took
    assert {f["name"] for f in json.loads(out)["forms"]} == {OLD, NEW}
    code, out, _ = run(capsys, monkeypatch, loopback_index, tmp_path, "_Z7missingv",
                       "--in", "hostpkg")
    assert code == 1
    assert "defined by no release of hostpkg examined (3 releases, 1.0 to 2.0)" in out


def test_an_imported_store_answers_the_same_with_nothing_fetched(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A store exported on one cache and imported into an empty one gives the same history
    (of the releases it holds) with nothing fetched."""
    first, second, shared = tmp_path / "one", tmp_path / "two", tmp_path / "store.abifit"
    _, before, _ = run(capsys, monkeypatch, loopback_index, first, OLD, "--in", "hostpkg",
                       "--versions", ">=1.0", "--json")
    assert main(["index", "export", str(shared), "--cache-dir", str(first)]) == 0
    assert main(["index", "import", str(shared), "--cache-dir", str(second)]) == 0
    capsys.readouterr()
    code, after, _ = run(capsys, monkeypatch, loopback_index, second, OLD, "--in", "hostpkg",
                         "--json")
    assert code == 0
    old, new = json.loads(before), json.loads(after)
    assert new["read"] == [] and (new["transfer"] is None
                                  or new["transfer"]["bytes_fetched"] == 0)
    assert (new["forms"], new["changes"]) == (old["forms"], old["changes"])


def test_explain_names_the_releases_that_define_it_and_the_extensions_that_fit(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The pasted error of extpkg 1.0 with torch 2.0 standing in: torch 1.0-1.1 define the
    symbol, 2.0 changed parameter 4, and extpkg 2.0 needs only what torch 2.0 defines."""
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS"):
        monkeypatch.delenv(var, raising=False)
    message = f"ImportError: /venv/lib/site-packages/extpkg/_ops.abi3.so: undefined symbol: {OLD}"
    code = main(["explain", message, "--with", "torch==2.0", "--releases", "3", *TARGET,
                 "--index-url", loopback_index.url, "--cache-dir", str(tmp_path), "--json"])
    doc = json.loads(capsys.readouterr().out)
    [e] = doc["explanations"]
    assert code == 0 and e["verdict"] == "not-in-environment"
    assert e["provider"] == "torch 1.0-1.1 define it (of 3 releases, 1.0 to 2.0)"
    assert "extpkg releases that need only symbols torch 2.0 defines (of the 2 newest): 2.0" \
        in e["notes"]
    assert e["fix"] == ("`pip install torch==1.1` (the newest release examined that defines it), "
                        "or rebuild the extension against torch 2.0, or `pip install "
                        "extpkg==2.0` (the newest extpkg release that needs only symbols "
                        "torch 2.0 defines)")


def test_history_and_explain_as_library_calls(
        loopback_index: LoopbackIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`abifit.history` and `abifit.explain` return the reports the commands print."""
    import abifit

    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS"):
        monkeypatch.delenv(var, raising=False)
    report = abifit.history(OLD, "hostpkg", versions=">=1.0", python_version="3.10",
                            index_url=loopback_index.url, cache_dir=tmp_path)
    assert [(f.name, f.releases) for f in report.forms] == [(OLD, ("1.0", "1.1")),
                                                            (NEW, ("2.0",))]
    message = f"ImportError: /venv/lib/site-packages/extpkg/_ops.abi3.so: undefined symbol: {OLD}"
    explained = abifit.explain(message, with_=["torch==2.0"], releases=3, python_version="3.10",
                               index_url=loopback_index.url, cache_dir=tmp_path)
    assert explained.explanations[0].provider == ("torch 1.0-1.1 define it (of 3 releases, 1.0 "
                                                  "to 2.0)")
    with pytest.raises(abifit.UsageError):
        abifit.explain("Segmentation fault (core dumped)", cache_dir=tmp_path)


def test_history_needs_the_cache(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """With --no-cache there is no store to keep what is read, and --versions must be a
    specifier: one error line each, exit 2."""
    code, out, err = run(capsys, monkeypatch, loopback_index, tmp_path, OLD, "--in", "hostpkg",
                         "--no-cache")
    assert code == 2 and out == ""
    assert err.startswith("error: history keeps what it reads") and err.count("error:") == 1
    code, out, err = run(capsys, monkeypatch, loopback_index, tmp_path, OLD, "--in", "hostpkg",
                         "--versions", ">>2")
    assert code == 2 and out == ""
    assert err.startswith("error: --versions '>>2': not a version specifier")
    assert err.count("error:") == 1


def test_ranges_join_consecutive_releases() -> None:
    """Runs of consecutive releases read as ranges, the others alone."""
    releases = ["2.6.0", "2.7.0", "2.8.0", "2.9.1", "2.10.0", "2.11.0"]
    assert ranges(["2.6.0", "2.7.0", "2.8.0", "2.11.0"], releases) == "2.6.0-2.8.0, 2.11.0"
    assert ranges(["2.10.0"], releases) == "2.10.0"


def test_changes_pair_the_forms_of_one_function() -> None:
    """Between two releases, the forms gone and come of one function pair up; a function that
    only goes is said alone; releases that define none are not compared."""
    releases = ["1", "2", "3", "4"]
    forms = [Form(OLD, "", ("1", "2"), (), ()), Form(NEW, "", ("3",), (), ()),
             Form("_ZN3c104goneEd", "", ("1", "2"), (), ())]
    changes = changes_of(forms, releases)
    assert [(c.release, c.old, c.new) for c in changes] == [("3", OLD, NEW),
                                                           ("3", "_ZN3c104goneEd", "")]
    assert changes[1].description == "no longer defined: c10::gone(double)"


@pytest.mark.parametrize(("query", "mangled"), [
    (OLD, True), ("PyInit_x", True), ("_ZN3c10*", True),
    ("c10::cuda::check_impl", False), ("f(int, bool)", False), ("c10::gone*", False)])
def test_mangled_or_demangled(query: str, mangled: bool) -> None:
    """A name without spaces, colons or parentheses is read as the object files spell it."""
    assert is_mangled(query) is mangled
