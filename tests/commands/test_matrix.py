"""`abifit matrix EXT --versions SPEC --against HOST_SPEC`: the grid of extension releases by host
releases and their variants, against a real loopback index serving wheels built here.

hostpkg 1.0 defines `hostlib::check_impl(int, ..., int, bool)` and `hostlib::pick<char>(char
const&, int)`; 2.0 (with a `+cu130` variant of the same bytes) changes their line parameter to
`unsigned int`; 3.0 renames the library's soname to libhost.so.3. extpkg 1.0 is built against
1.0, extpkg 2.0 against 2.0 (tests/fixtures/matrix/). otherpkg 1.0's wheel for CPython 3.11
is built against hostpkg 1.0, its wheel for 3.12 against 2.0, and it has none for 3.13: with
extpkg, a grid of two extensions on two Pythons (`MATRIX_PYTHONS_GRID`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from helpers import (
    CHECK_IMPL_INT,
    CHECK_IMPL_UNSIGNED,
    MATRIX_GRID,
    MATRIX_PYTHONS_GRID,
    matrix_binaries,
    matrix_projects,
    run_grid,
    run_matrix,
    schema,
    validate,
)
from httpserver import LoopbackIndex, Projects

SCHEMA = schema("matrix")
GRID_SCHEMA = schema("matrix.grid")
TO_UNSIGNED = "parameter 4: `int` → `unsigned int`"

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


@pytest.fixture(scope="module")
def index_projects(tmp_path_factory: pytest.TempPathFactory) -> Projects:
    """What `loopback_index` (conftest.py) serves to this module."""
    return matrix_projects(matrix_binaries(tmp_path_factory.mktemp("matrix")))


def verdicts(doc: dict[str, object]) -> dict[tuple[str, str], str]:
    rows = doc["rows"]
    assert isinstance(rows, list)
    return {(r["release"], r["version"] + (f"+{r['variant']}" if r["variant"] else "")):
            r["verdict"] for r in rows}


def cell(doc: dict[str, object], release: str, host: str) -> dict[str, object]:
    rows = doc["rows"]
    assert isinstance(rows, list)
    return next(r for r in rows if r["release"] == release
                and r["version"] + (f"+{r['variant']}" if r["variant"] else "") == host)


def test_grid_of_extension_releases_by_host_releases(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows are extpkg's releases, newest first; columns hostpkg's releases with the +cu130
    variant apart; each extension fits the host release it was built against (and its variant),
    and fails on the others: missing symbols or the renamed soname."""
    code, out, _err = run_matrix(capsys, monkeypatch, loopback_index, tmp_path, *MATRIX_GRID,
                                 "--json")
    doc = json.loads(out)
    validate(doc, SCHEMA)
    assert code == 0
    assert doc["extension"] == "extpkg" and doc["versions"] == ">=1.0"
    assert doc["extension_releases"] == ["2.0", "1.0"]
    assert doc["host_releases"] == ["3.0", "2.0+cu130", "2.0", "1.0"]  # PEP 440 order
    assert verdicts(doc) == {
        ("2.0", "3.0"): "fails", ("2.0", "2.0"): "fits", ("2.0", "2.0+cu130"): "fits",
        ("2.0", "1.0"): "fails",
        ("1.0", "3.0"): "fails", ("1.0", "2.0"): "fails", ("1.0", "2.0+cu130"): "fails",
        ("1.0", "1.0"): "fits"}
    assert doc["fitting_pairs"] == [{"release": "2.0", "host": "2.0+cu130"},
                                    {"release": "2.0", "host": "2.0"},
                                    {"release": "1.0", "host": "1.0"}]
    assert cell(doc, "2.0", "3.0")["sonames"] == ["libhost.so"]
    assert cell(doc, "1.0", "2.0")["extension_filename"] == \
        "extpkg-1.0-cp310-abi3-linux_x86_64.whl"
    setting = doc["setting"]
    assert setting["python"] == "3.11 (cp311)" and setting["platforms"] == ["linux_x86_64"]
    assert doc["checked_at"].endswith(" UTC") and doc["abifit_version"]


def test_a_failing_cell_names_the_parameter_that_changed(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """extpkg 1.0 against hostpkg 2.0: both symbols demangled, each with the form hostpkg 2.0's
    libhost.so defines instead and the parameter that changed; the other way round, the change
    reads back."""
    code, out, _err = run_matrix(capsys, monkeypatch, loopback_index, tmp_path, *MATRIX_GRID,
                                 "--json")
    assert code == 0
    doc = json.loads(out)
    failing = cell(doc, "1.0", "2.0")
    assert failing["modules"] == ["extpkg._ops"]
    missing = {m["demangled"]: m for m in failing["missing"]}
    assert set(missing) == {CHECK_IMPL_INT, "int hostlib::pick<char>(char const&, int)"}
    [other] = missing[CHECK_IMPL_INT]["instead"]
    assert (other["demangled"], other["change"], other["where"], other["owner"]) == (
        CHECK_IMPL_UNSIGNED, TO_UNSIGNED, "hostpkg/lib/libhost.so", "hostpkg")
    assert missing[CHECK_IMPL_INT]["modules"] == ["extpkg._ops"]
    [pick] = missing["int hostlib::pick<char>(char const&, int)"]["instead"]
    assert pick["change"] == "parameter 2: `int` → `unsigned int`"
    back = {m["demangled"]: m for m in cell(doc, "2.0", "1.0")["missing"]}
    assert back[CHECK_IMPL_UNSIGNED]["instead"][0]["change"] == \
        "parameter 4: `unsigned int` → `int`"


def test_text_is_a_grid_with_why_and_the_fitting_pairs(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The text grid: a header of host labels, a line per extension release with a mark and a
    short reason per cell, why each failing pair fails, then the fitting pairs last."""
    code, out, _err = run_matrix(capsys, monkeypatch, loopback_index, tmp_path, *MATRIX_GRID)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("extpkg 1.0..2.0 against hostpkg 1.0..3.0 (cp311 on ")
    assert lines[2].split() == ["extpkg", "\\", "hostpkg", "3.0", "2.0+cu130", "2.0", "1.0"]
    assert lines[3].split() == ["2.0", "✗", "libhost.so", "✓", "fits", "✓", "fits", "✗", "2",
                                "symbols"]
    assert lines[4].split() == ["1.0", "✗", "libhost.so", "✗", "2", "symbols", "✗", "2",
                                "symbols", "✓", "fits"]
    assert ("  1.0 with 2.0+cu130; 1.0 with 2.0: int hostlib::pick<char>(char const&, int): "
            "defined as int hostlib::pick<char>(char const&, unsigned int) (parameter 2: `int` "
            "→ `unsigned int`) (+1 more symbol)") in lines
    assert "  1.0..2.0 with 3.0: missing libhost.so" in lines
    assert lines[-1] == "fits: 2.0 with hostpkg 2.0+cu130, 2.0; 1.0 with hostpkg 1.0"


def test_a_second_grid_fetches_and_simulates_nothing(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Each cell is a check whose result the cache keeps: the same grid again asks the server
    for no wheel byte and simulates no cell, and says the same."""
    import abifit.engines.check

    server = loopback_index.server
    code, first, _err = run_matrix(capsys, monkeypatch, loopback_index, tmp_path, *MATRIX_GRID,
                                   "--json")
    assert code == 0
    wheels = [f for f in loopback_index.files if "hostpkg" in f or "extpkg" in f]
    assert sum(server.count(path=f"/files/{f}") for f in wheels) > 0

    def simulate_again(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a cell was simulated a second time")

    monkeypatch.setattr(abifit.engines.check, "simulate", simulate_again)
    server.reset_counters()
    code, second, _err = run_matrix(capsys, monkeypatch, loopback_index, tmp_path, *MATRIX_GRID,
                                    "--json")
    assert code == 0
    assert sum(server.count(path=f"/files/{f}") for f in wheels) == 0
    strip = ("transfer", "checked_at")
    assert {k: v for k, v in json.loads(second).items() if k not in strip} == \
        {k: v for k, v in json.loads(first).items() if k not in strip}
    transfer = json.loads(second)["transfer"]
    assert transfer is None or transfer["bytes_fetched"] < 2000  # index pages at most


def test_no_release_in_the_spec_is_an_error(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """--versions that selects no release, or is not a specifier: one error line, exit 2."""
    code, out, err = run_matrix(capsys, monkeypatch, loopback_index, tmp_path, "matrix", "extpkg",
                                "--versions", ">=9", "--against", "hostpkg>=1")
    assert (code, out) == (2, "") and err.startswith("error:") and "extpkg" in err
    code, out, err = run_matrix(capsys, monkeypatch, loopback_index, tmp_path, "matrix", "extpkg",
                                "--versions", "latest", "--against", "hostpkg>=1")
    assert (code, out) == (2, "") and "--versions 'latest'" in err


def test_resolve_backtracks_over_a_host_that_ships_only_libraries(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """hostpkg has no extension module, so no pair verdict covers it: the whole-set check finds
    extpkg 1.0 failing next to hostpkg 3.0 and 2.0, and since extpkg==1.0 is asked for, those
    hostpkg releases are the ones set aside, until 1.0 fits."""
    code, out, err = run_matrix(capsys, monkeypatch, loopback_index, tmp_path / "cache", "resolve",
                                "extpkg==1.0", "hostpkg", "--json")
    assert code == 0, err
    doc = json.loads(out)
    pins = {p["name"]: p for p in doc["pins"]}
    assert (pins["extpkg"]["version"], pins["hostpkg"]["version"]) == ("1.0", "1.0")
    newer = {r["version"]: r for r in pins["hostpkg"]["newer"]}
    assert set(newer) == {"3.0", "2.0+cu130", "2.0"}
    assert all(r["why"] == "set" for r in newer.values())
    assert "(parameter 2: `int` → `unsigned int`)" in newer["2.0"]["reason"]


def test_the_pages_count_of_older_tags_is_the_texts() -> None:
    """The page's "(and N older tags it accepts)" counts as the target's text does (`cp311 on
    manylinux_2_36_x86_64 (and 34 older)`): the generic linux_ tag is not one of them."""
    from abifit.engines.pairs import setting_of
    from abifit.host.profile import host_profile
    from abifit.remote.packageindex import Target

    target = Target.for_python("3.11", ["manylinux_2_36_x86_64", "linux_x86_64"])
    setting = setting_of(target, host_profile(None, None, {}), None)
    expanded = target.expanded_platforms()
    assert setting.accepted - len(setting.platforms) == len(
        [p for p in expanded if not p.startswith("linux_")]) - 1


# --- a grid: several extensions on several Pythons ------------------------------------------


def grid_verdicts(doc: dict[str, object]) -> dict[tuple[str, str, str, str], str]:
    """(package, release, host label, Python) -> verdict, from the flat list of cells."""
    cells = doc["cells"]
    assert isinstance(cells, list)
    found = {(c["package"], c["release"],
              c["host_release"] + (f"+{c['variant']}" if c["variant"] else ""), c["python"]):
             c["verdict"] for c in cells}
    assert len(found) == len(cells)  # each cell named once
    return found


def test_a_grid_of_two_extensions_on_two_pythons(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """extpkg and otherpkg on CPython 3.11 and 3.12 against hostpkg 1.0, 2.0 and 2.0+cu130:
    one `matrix.grid` document with a matrix per extension and Python, in the order given, and
    every cell in one flat list; extpkg's abi3 wheels give the same verdicts on both Pythons,
    otherpkg's wheel for 3.11 fits hostpkg 1.0 and its wheel for 3.12 fits 2.0 and its
    variant; every matrix has a fit, so the exit status is 0."""
    code, out, err = run_grid(capsys, monkeypatch, loopback_index, tmp_path, *MATRIX_PYTHONS_GRID,
                              "--json")
    assert code == 0, err
    doc = json.loads(out)
    validate(doc, GRID_SCHEMA)
    assert list(doc)[:3] == ["schema_version", "command", "document"]
    assert (doc["command"], doc["document"]) == ("matrix", "matrix.grid")
    assert (doc["extensions"], doc["pythons"], doc["host"]) == (
        ["extpkg", "otherpkg"], ["3.11", "3.12"], "hostpkg")
    assert [(m["extension"], m["python"], m["target"]) for m in doc["matrices"]] == [
        ("extpkg", "3.11", "cp311 on linux_x86_64"), ("extpkg", "3.12", "cp312 on linux_x86_64"),
        ("otherpkg", "3.11", "cp311 on linux_x86_64"),
        ("otherpkg", "3.12", "cp312 on linux_x86_64")]
    assert all(m["host_releases"] == ["2.0+cu130", "2.0", "1.0"] and m["error"] is None
               for m in doc["matrices"])
    verdicts = grid_verdicts(doc)
    for python in ("3.11", "3.12"):
        assert {k[:3]: v for k, v in verdicts.items() if k[0] == "extpkg" and k[3] == python} \
            == {("extpkg", "2.0", "2.0+cu130"): "fits", ("extpkg", "2.0", "2.0"): "fits",
                ("extpkg", "2.0", "1.0"): "fails", ("extpkg", "1.0", "2.0+cu130"): "fails",
                ("extpkg", "1.0", "2.0"): "fails", ("extpkg", "1.0", "1.0"): "fits"}
    assert {k: v for k, v in verdicts.items() if k[0] == "otherpkg"} == {
        ("otherpkg", "1.0", "2.0+cu130", "3.11"): "fails",
        ("otherpkg", "1.0", "2.0", "3.11"): "fails",
        ("otherpkg", "1.0", "1.0", "3.11"): "fits",
        ("otherpkg", "1.0", "2.0+cu130", "3.12"): "fits",
        ("otherpkg", "1.0", "2.0", "3.12"): "fits",
        ("otherpkg", "1.0", "1.0", "3.12"): "fails"}
    assert len(verdicts) == 18
    other_311, other_312 = doc["matrices"][2], doc["matrices"][3]
    assert {r["extension_filename"] for r in other_311["rows"]} == {
        "otherpkg-1.0-cp311-cp311-linux_x86_64.whl"}
    assert {r["extension_filename"] for r in other_312["rows"]} == {
        "otherpkg-1.0-cp312-cp312-linux_x86_64.whl"}
    assert other_312["fitting_pairs"] == [{"release": "1.0", "host": "2.0+cu130"},
                                          {"release": "1.0", "host": "2.0"}]
    failing = next(r for r in other_311["rows"] if r["version"] == "2.0" and not r["variant"])
    instead = {m["demangled"]: m["instead"] for m in failing["missing"]}
    assert instead[CHECK_IMPL_INT][0]["change"] == TO_UNSIGNED
    assert other_311["setting"]["python"] == "3.11 (cp311)"
    assert other_312["setting"]["python"] == "3.12 (cp312)"


def test_the_grid_text_is_each_matrix_under_its_heading_then_a_summary(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The text: each matrix's grid (as `matrix` prints one) under a heading naming its
    extension and Python, in order, then one summary line."""
    code, out, _err = run_grid(capsys, monkeypatch, loopback_index, tmp_path, *MATRIX_PYTHONS_GRID)
    assert code == 0
    lines = out.splitlines()
    assert [line for line in lines if line.startswith("===")] == [
        "=== extpkg on Python 3.11 ===", "=== extpkg on Python 3.12 ===",
        "=== otherpkg on Python 3.11 ===", "=== otherpkg on Python 3.12 ==="]
    at = lines.index("=== otherpkg on Python 3.12 ===")
    assert lines[at + 1] == "otherpkg 1.0 against hostpkg 1.0..2.0+cu130 (cp312 on linux_x86_64)"
    assert lines[at + 3].split() == ["otherpkg", "\\", "hostpkg", "2.0+cu130", "2.0", "1.0"]
    assert lines[at + 4].split() == ["1.0", "✓", "fits", "✓", "fits", "✗", "2", "symbols"]
    assert "fits: 1.0 with hostpkg 2.0+cu130, 2.0" in lines[at:]
    at = lines.index("=== otherpkg on Python 3.11 ===")
    assert lines[at + 4].split() == ["1.0", "✗", "2", "symbols", "✗", "2", "symbols", "✓",
                                     "fits"]
    assert lines[-1] == ("grid: 9 of 18 cells fit in 4 matrices (extpkg, otherpkg on Python "
                         "3.11, 3.12 against hostpkg); each matrix has a hostpkg wheel that fits")


def test_a_matrix_without_a_fit_exits_1(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """extpkg==1.0 fits no hostpkg 2.0 wheel on either Python while otherpkg fits one on 3.12
    only: exit 1, and the summary names the matrices without a fit."""
    code, out, _err = run_grid(capsys, monkeypatch, loopback_index, tmp_path, "matrix",
                               "extpkg==1.0", "otherpkg", "--against", "hostpkg>=2,<3",
                               "--pythons", "3.11,3.12", "--platform", "linux_x86_64")
    assert code == 1
    assert out.splitlines()[-1] == (
        "grid: 2 of 8 cells fit in 4 matrices (extpkg==1.0, otherpkg on Python 3.11, 3.12 "
        "against hostpkg); no hostpkg wheel fits extpkg==1.0 on Python 3.11, extpkg==1.0 on "
        "Python 3.12, otherpkg on Python 3.11")


def test_a_python_without_a_wheel_is_that_matrix_not_checked(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """otherpkg has no wheel for 3.13: its matrix there holds the error and no cell, the other
    three are checked (extpkg's abi3 wheels serve 3.13 too), and the exit status is 2, as for
    a lone matrix of which nothing could be checked."""
    code, out, _err = run_grid(capsys, monkeypatch, loopback_index, tmp_path, "matrix", "extpkg",
                               "otherpkg", "--versions", ">=1.0", "--against", "hostpkg>=1,<3",
                               "--pythons", "3.11,3.13", "--platform", "linux_x86_64", "--json")
    assert code == 2
    doc = json.loads(out)
    validate(doc, GRID_SCHEMA)
    missing = doc["matrices"][3]
    assert (missing["extension"], missing["python"], missing["rows"]) == ("otherpkg", "3.13", [])
    assert missing["error"].startswith("no wheel of otherpkg>=1.0 fits cp313 on linux_x86_64")
    verdicts = grid_verdicts(doc)
    assert verdicts[("extpkg", "2.0", "2.0+cu130", "3.13")] == "fits"
    assert verdicts[("extpkg", "1.0", "2.0", "3.13")] == "fails"
    assert verdicts[("otherpkg", "1.0", "1.0", "3.11")] == "fits"
    assert not any(k[0] == "otherpkg" and k[3] == "3.13" for k in verdicts)


def test_one_python_in_pythons_is_the_matrix_of_one_python(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """One extension with `--pythons 3.12` prints what `--python-version 3.12` prints: the
    matrix's own text and document, not a grid."""
    args = ("matrix", "otherpkg", "--against", "hostpkg>=1,<3", "--platform", "linux_x86_64")
    texts, docs = [], []
    for python in (("--pythons", "3.12"), ("--python-version", "3.12")):
        code, text, _err = run_grid(capsys, monkeypatch, loopback_index, tmp_path, *args,
                                    *python)
        assert code == 0
        code, out, _err = run_grid(capsys, monkeypatch, loopback_index, tmp_path, *args,
                                   *python, "--json")
        doc = json.loads(out)
        validate(doc, SCHEMA)
        texts.append(text)
        docs.append({k: v for k, v in doc.items() if k not in ("checked_at", "transfer")})
    assert texts[0] == texts[1] and docs[0] == docs[1]
    assert texts[0].splitlines()[0] == "otherpkg against hostpkg (cp312 on linux_x86_64)"
    assert docs[0]["fits"] == ["2.0+cu130", "2.0"]


@pytest.mark.parametrize(("args", "needle"), [
    (("extpkg", "otherpkg", "--pythons", "3.11,3.x"), "not a Python version: '3.x'"),
    (("extpkg", "--pythons", ""), "--pythons: expected Pythons as X.Y[,X.Y...], not ''"),
    (("extpkg", "--pythons", " , "), "--pythons: expected Pythons"),
    (("extpkg", "otherpkg", "--pythons", "3.11,3.12", "--python-version", "3.11"),
     "--pythons and --python-version"),
    (("extpkg==", "otherpkg", "--pythons", "3.11"), "invalid requirement 'extpkg=='"),
    (("extpkg", "otherpkgg", "--pythons", "3.11,3.12"), "no project 'otherpkgg'"),
], ids=["python-not-x.y", "pythons-empty", "pythons-only-commas", "pythons-and-python-version",
        "requirement-typo", "no-such-project"])
def test_bad_grid_input_is_one_error_line(
        args: tuple[str, ...], needle: str, loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A Python that is not X.Y, an empty list, --pythons beside --python-version, a
    requirement that does not parse, a project no index has: one `error:` line, nothing on
    stdout, exit 2, before any cell is checked."""
    code, out, err = run_grid(capsys, monkeypatch, loopback_index, tmp_path, "matrix", *args,
                              "--against", "hostpkg>=1,<3", "--platform", "linux_x86_64")
    assert (code, out) == (2, "")
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and needle in errors[0], err
    assert "Traceback" not in err


def test_the_library_gives_the_grid_the_command_line_prints(
        loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`abifit.matrix` with a list of extensions and `pythons` returns a `GridReport` whose
    document is the command line's; one extension and no `pythons` still return a
    `MatrixReport`; `pythons=[]` is an error."""
    import abifit
    from abifit.engines.matrix import GridReport, MatrixReport
    from abifit.report.matrix import grid_json

    code, out, _err = run_grid(capsys, monkeypatch, loopback_index, tmp_path / "cli",
                               *MATRIX_PYTHONS_GRID, "--json")
    assert code == 0
    index = {"platforms": ["linux_x86_64"], "index_url": loopback_index.url}
    report = abifit.matrix(["extpkg", "otherpkg"], "hostpkg>=1,<3", versions=">=1.0",
                           pythons=["3.11", "3.12"], cache_dir=tmp_path / "api", **index)
    assert isinstance(report, GridReport)
    assert [(m.package, m.python, len(m.fits)) for m in report.matrices] == [
        ("extpkg", "3.11", 3), ("extpkg", "3.12", 3), ("otherpkg", "3.11", 1),
        ("otherpkg", "3.12", 2)]
    volatile = ("checked_at", "transfer")
    assert {k: v for k, v in json.loads(json.dumps(grid_json(report, None))).items()
            if k not in volatile} == {k: v for k, v in json.loads(out).items()
                                      if k not in volatile}
    one = abifit.matrix("otherpkg", "hostpkg>=1,<3", python_version="3.12",
                        cache_dir=tmp_path / "api", **index)
    assert isinstance(one, MatrixReport) and [c.label for c in one.fits] == ["2.0+cu130", "2.0"]
    with pytest.raises(abifit.UsageError, match="names no Python"):
        abifit.matrix(["extpkg", "otherpkg"], "hostpkg", pythons=[], **index)


def test_a_grid_gives_all_its_cells_elsewhere_at_once(
        loopback_index: LoopbackIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a cluster is given (`elsewhere`, as `--ray` makes it): every cell of every matrix
    in one call, each pair with its own target (for which its task reads, as
    `commands.cluster` does), and the cells it returns placed back in their matrices."""
    from dataclasses import replace

    from abifit.commands.contexts import IndexOptions, Session
    from abifit.engines.matrix import Pair, grid
    from abifit.engines.pairs import check_pair
    from abifit.host.profile import host_profile
    from abifit.remote.packageindex import Target

    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    session = Session({"PIP_CONFIG_FILE": "/dev/null"})
    ctx = session.index(IndexOptions(python_version="3.11", platforms=("linux_x86_64",),
                                     index_url=loopback_index.url, cache_dir=str(tmp_path)))()
    targets = [Target.for_python(p, ["linux_x86_64"]) for p in ("3.11", "3.12")]
    host = host_profile(None, "assumed", {})
    calls: list[list[Pair]] = []

    def elsewhere(pairs: object, _progress: object) -> list[object]:
        assert isinstance(pairs, list)
        calls.append(pairs)
        return [check_pair(p.extension, p.host, replace(ctx, target=p.target), p.target, host,
                           None, None, p.release) for p in pairs]

    try:
        report = grid(["extpkg==2.0", "otherpkg"], "hostpkg>=1,<3", ctx, targets, host,
                      lambda _m: None, elsewhere=elsewhere)  # type: ignore[arg-type]
    finally:
        session.close()
    [pairs] = calls
    assert len(pairs) == 12
    assert [p.target.interpreter for p in pairs] == ["cp311"] * 3 + ["cp312"] * 3 + \
        ["cp311"] * 3 + ["cp312"] * 3
    assert [(m.package, m.python, [c.label for c in m.fits]) for m in report.matrices] == [
        ("extpkg", "3.11", ["2.0+cu130", "2.0"]), ("extpkg", "3.12", ["2.0+cu130", "2.0"]),
        ("otherpkg", "3.11", ["1.0"]), ("otherpkg", "3.12", ["2.0+cu130", "2.0"])]
