"""`abifit matrix EXT --versions SPEC --against HOST_SPEC`: the grid of extension releases by host
releases and their variants, against a real loopback index serving wheels built here.

hostpkg 1.0 defines `hostlib::check_impl(int, ..., int, bool)` and `hostlib::pick<char>(char
const&, int)`; 2.0 (with a `+cu130` variant of the same bytes) changes their line parameter to
`unsigned int`; 3.0 renames the library's soname to libhost.so.3. extpkg 1.0 is built against
1.0, extpkg 2.0 against 2.0 (tests/fixtures/matrix/).
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
    matrix_binaries,
    matrix_projects,
    run_matrix,
    schema,
    validate,
)
from httpserver import LoopbackIndex, Projects

SCHEMA = schema("matrix")
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
