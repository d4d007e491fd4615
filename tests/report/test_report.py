"""The report layer: every command's `--json` has a schema and a schema_version; the matrix and
variants documents validate against theirs, and their text and HTML say what the report holds."""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
from dataclasses import replace
from importlib.resources import files
from pathlib import Path

import jsonschema
import pytest

import abifit.report
from abifit.engines.matrix import Cell, GridReport, MatrixReport
from abifit.engines.variants import Group, MemberDiff, VariantsReport
from abifit.remote.diskcache import BucketInfo, CacheInfo, RootState
from abifit.report.cache import cache_json, cache_text
from abifit.report.findings import problem_blocks
from abifit.report.json import SCHEMA_SUFFIX, dumps, schema_version, schema_versions
from abifit.report.matrix import grid_json, grid_text, matrix_html, matrix_json, matrix_text
from abifit.report.variants import variants_json, variants_text
from abifit.sim.derivation import (
    NearestDefinition,
    NearestLine,
    NeedsLibrary,
    NeedsSymbol,
    Outcome,
)
from abifit.sim.diagnose import Context, diagnose
from abifit.sim.findings import Finding, FindingKind, Severity
from abifit.sim.loader import LoadProblem, ProblemKind
from helpers import validate

SCHEMAS = files("abifit").joinpath("report/schemas")
# the documents of the commands: every schema that pins a version, but the error's; a
# command's second document is `<command>.<document>` (`matrix.grid`)
DOCUMENTS = sorted(set(schema_versions()) - {"error"})
COMMANDS = sorted({document.split(".")[0] for document in DOCUMENTS})
TRANSFER = {"bytes_fetched": 4096, "requests": 3, "wheel_bytes": 1_000_000}


def schema(command: str) -> dict[str, object]:
    doc = json.loads(SCHEMAS.joinpath(f"{command}.schema.json").read_text("utf-8"))
    assert isinstance(doc, dict)
    return doc


def _cell(version: str, variant: str, **changes: object) -> Cell:
    """A fitting cell of host `version`+`variant`, with `changes` applied."""
    filename = f"host-{version}+{variant}-py3-none-any.whl"
    return replace(Cell(version, variant, filename, True, 0, (), (), ()), **changes)


MATRIX = MatrixReport("ext==1.0", "host", "cp311 on manylinux_2_28_x86_64", (
    _cell("2.0", "cu128", fits=False, failing_modules=2,
          symbols=("host::f(int)", "host::g<char>()"), sonames=("libhost.so.2",)),
    _cell("2.0", "cu130"),
    _cell("1.0", "cu128", notes=("built against 0.9",)),
    _cell("0.9", "cu128", fits=False, error="host-0.9: not a valid zip file"),
))

VARIANTS = VariantsReport("host", "2.0", (
    Group(("host-2.0-1-py3-none-linux_x86_64.whl", "host-2.0-py3-none-linux_x86_64.whl"),
          "x86_64", 2),
    Group(("host-2.0-2-py3-none-linux_x86_64.whl",), "x86_64", 3),
    Group(("host-2.0-py3-none-linux_aarch64.whl",), "aarch64", 2),
), (
    MemberDiff("host/lib/libhost.so", "host-2.0-1-py3-none-linux_x86_64.whl",
               "host-2.0-2-py3-none-linux_x86_64.whl", False,
               needed_added=("libm.so.6",),
               undefined_added=tuple(f"sym{n}" for n in range(7)),
               versions_removed=("libc.so.6:GLIBC_2.34",)),
    MemberDiff("host/_core.so", "host-2.0-1-py3-none-linux_x86_64.whl",
               "host-2.0-2-py3-none-linux_x86_64.whl", True),
    MemberDiff("host/lib/libextra.so", "host-2.0-1-py3-none-linux_x86_64.whl",
               "host-2.0-2-py3-none-linux_x86_64.whl", False, only_in="other"),
    MemberDiff("host/lib/libodd.so", "host-2.0-1-py3-none-linux_x86_64.whl",
               "host-2.0-2-py3-none-linux_x86_64.whl", False, error="not an ELF file"),
), "cp311 on linux_x86_64, linux_aarch64", ("host-2.0-py3-none-macosx_11_0_arm64.whl",
                                        "host-2.0-py3-none-win_amd64.whl"))


def _report_modules_with_json() -> list[str]:
    """The commands whose report module in abifit.report has a `<command>_json` renderer."""
    found = []
    for info in pkgutil.iter_modules(abifit.report.__path__):
        module = importlib.import_module(f"abifit.report.{info.name}")
        if callable(getattr(module, f"{info.name}_json", None)):
            found.append(info.name)
    return sorted(found)


def test_every_json_renderer_has_a_schema() -> None:
    """Each report module with a `<command>_json` has `schemas/<command>.schema.json`, and
    each command's schema a report module that renders its document."""
    assert _report_modules_with_json() == COMMANDS
    assert all(SCHEMAS.joinpath(f"{c}.schema.json").is_file() for c in COMMANDS)
    assert "matrix.grid" in DOCUMENTS


def test_every_document_has_a_version_of_its_own() -> None:
    """Every schema but the common one pins a version (`schema_versions`: the commands'
    documents and the error's), and each schema's title says the version it pins."""
    schemas = {p.name.removesuffix(SCHEMA_SUFFIX) for p in SCHEMAS.iterdir()}
    assert sorted(schema_versions()) == sorted(schemas - {"common"})
    assert "error" in schema_versions() and "check" in schema_versions()
    for command, version in schema_versions().items():
        title = schema(command)["title"]
        assert isinstance(title, str) and title.endswith(f"schema_version {version}"), command


def _definitions(node: object) -> list[str]:
    """The JSON text of every definition (`$defs` entry) under `node`."""
    if isinstance(node, dict):
        own = [json.dumps(v, sort_keys=True) for v in node.get("$defs", {}).values()]
        return own + [d for k, v in node.items() if k != "$defs" for d in _definitions(v)]
    return [d for v in node for d in _definitions(v)] if isinstance(node, list) else []


def test_shared_definitions_are_written_once() -> None:
    """What several documents hold alike is defined in common.schema.json and referred to
    there: no two schemas hold the same definition, and every reference to the common schema
    names a definition it has."""
    common = schema("common")
    names = set(common["$defs"])  # type: ignore[call-overload]
    seen: dict[str, str] = {}
    for path in sorted(SCHEMAS.iterdir()):
        doc = json.loads(path.read_text("utf-8"))
        for definition in _definitions(doc):
            if len(definition) > 200:  # a small enum or a string list may repeat
                assert definition not in seen, f"{path.name} repeats {seen.get(definition)}'s"
                seen[definition] = path.name
        refs = re.findall(r'"common\.schema\.json#/\$defs/([a-z_]+)"', path.read_text("utf-8"))
        assert set(refs) <= names, path.name
    assert "finding" in names and "module" in names


@pytest.mark.parametrize("document", DOCUMENTS)
def test_schema_pins_the_version_and_the_command(document: str) -> None:
    """Every schema is a valid draft 2020-12 schema that pins schema_version to the one the
    renderers write, names its command (and a command's second document its own name, in
    `document`), and allows no undeclared field."""
    doc = schema(document)
    jsonschema.Draft202012Validator.check_schema(doc)
    properties = doc["properties"]
    assert isinstance(properties, dict)
    assert properties["schema_version"] == {"const": schema_version(document)}
    command, dot, _name = document.partition(".")
    assert properties["command"] == {"const": command}
    if dot:
        assert properties["document"]["const"] == document
    assert doc["additionalProperties"] is False
    required = doc["required"]
    assert isinstance(required, list) and set(required) == set(properties)


@pytest.mark.parametrize("transfer", [None, TRANSFER], ids=["no-transfer", "transfer"])
def test_matrix_json_validates_and_holds_every_cell(transfer: dict[str, int] | None) -> None:
    """The matrix document validates against matrix.schema.json; one row per cell, with its
    verdict, counts and first problem; `fits` lists the labels that fit."""
    doc = json.loads(dumps(matrix_json(MATRIX, transfer)))
    validate(doc, schema("matrix"))
    assert list(doc)[:2] == ["schema_version", "command"]
    assert (doc["schema_version"], doc["command"], doc["transfer"]) == (
        schema_version("matrix"), "matrix", transfer)
    assert [(r["version"], r["variant"], r["verdict"]) for r in doc["rows"]] == [
        ("2.0", "cu128", "fails"), ("2.0", "cu130", "fits"), ("1.0", "cu128", "fits"),
        ("0.9", "cu128", "error")]
    failing = doc["rows"][0]
    assert (failing["failing_modules"], failing["failing_symbols"],
            failing["failing_sonames"], failing["first"]) == (2, 2, 1, "host::f(int)")
    assert doc["rows"][3]["error"] == "host-0.9: not a valid zip file"
    assert doc["rows"][3]["first"] is None
    assert doc["fits"] == ["2.0+cu130", "1.0+cu128"]


def test_matrix_schema_rejects_an_unknown_verdict_or_field() -> None:
    """The schema is strict: a verdict outside fits/fails/error, or an extra field, fails."""
    doc = matrix_json(MATRIX, None)
    rows = doc["rows"]
    assert isinstance(rows, list)
    bad_verdict = {**doc, "rows": [{**rows[0], "verdict": "maybe"}]}
    extra = {**doc, "cells": []}
    for bad in (bad_verdict, extra):
        with pytest.raises(jsonschema.ValidationError):
            validate(bad, schema("matrix"))


GRID = GridReport((
    replace(MATRIX, package="ext", python="3.11", cells=tuple(
        replace(c, extension_filename="ext-1.0-cp311-cp311-linux_x86_64.whl")
        for c in MATRIX.cells)),
    replace(MATRIX, package="ext", python="3.12", cells=(),
            error="no wheel of ext==1.0 fits cp312 on manylinux_2_28_x86_64"),
), ("ext==1.0",), ("3.11", "3.12"), "host", "host>=0.9")


def test_grid_json_holds_each_matrix_and_a_flat_list_of_cells() -> None:
    """A grid's document validates against matrix.grid.schema.json: a matrix per Python (one
    not checked, with its error and no rows), and every cell once in the flat list, naming
    the extension release its wheel holds; the schema refuses a verdict of its own."""
    doc = json.loads(dumps(grid_json(GRID, TRANSFER)))
    validate(doc, schema("matrix.grid"))
    assert (doc["schema_version"], doc["command"], doc["document"]) == (
        schema_version("matrix.grid"), "matrix", "matrix.grid")
    assert [(m["python"], len(m["rows"]), m["error"]) for m in doc["matrices"]] == [
        ("3.11", 4, None),
        ("3.12", 0, "no wheel of ext==1.0 fits cp312 on manylinux_2_28_x86_64")]
    assert [(c["matrix"], c["package"], c["release"], c["host_release"], c["variant"],
             c["python"], c["verdict"]) for c in doc["cells"]] == [
        (0, "ext", "1.0", "2.0", "cu128", "3.11", "fails"),
        (0, "ext", "1.0", "2.0", "cu130", "3.11", "fits"),
        (0, "ext", "1.0", "1.0", "cu128", "3.11", "fits"),
        (0, "ext", "1.0", "0.9", "cu128", "3.11", "error")]
    cells = doc["cells"]
    assert isinstance(cells, list)
    with pytest.raises(jsonschema.ValidationError):
        validate({**doc, "cells": [{**cells[0], "verdict": "maybe"}]}, schema("matrix.grid"))


def test_grid_text_says_which_matrix_was_not_checked() -> None:
    """The matrix not checked is its heading and its error; the summary line names it."""
    text = grid_text(GRID)
    assert "=== ext==1.0 on Python 3.12 ===\next==1.0 against host (cp311 on " \
        "manylinux_2_28_x86_64)\n\nnot checked: no wheel of ext==1.0 fits cp312" in text
    assert text.splitlines()[-1] == (
        "grid: 2 of 4 cells fit in 2 matrices (ext==1.0 on Python 3.11, 3.12 against host); "
        "not checked: ext==1.0 on Python 3.12")


def test_matrix_text_is_an_aligned_table_then_the_fits() -> None:
    """A header line, one aligned row per cell with its first problem, then the fitting
    labels; no fitting cell says `fits: none`."""
    assert matrix_text(MATRIX).splitlines() == [
        "ext==1.0 against host (cp311 on manylinux_2_28_x86_64)",
        "",
        "host            verdict  symbols  sonames  first problem",
        "host 2.0+cu128  fails    2        1        host::f(int)",
        "host 2.0+cu130  fits     0        0        ",
        "host 1.0+cu128  fits     0        0        ",
        "host 0.9+cu128  error    0        0        host-0.9: not a valid zip file",
        "",
        "fits: 2.0+cu130, 1.0+cu128",
    ]
    none_fit = MatrixReport("ext==1.0", "host", "t", (MATRIX.cells[0],))
    assert matrix_text(none_fit).splitlines()[-1] == "fits: none"


def test_matrix_html_is_a_grid_of_releases_by_variant() -> None:
    """A column group per host release with a sub-column per variant; a failing cell is a
    <details> listing its missing libraries and symbols, escaped; an error cell says why."""
    page = matrix_html(MATRIX)
    assert page.startswith("<!doctype html>") and page.endswith("</body></html>\n")
    assert ('<th scope="colgroup" colspan="2">host 2.0</th>'
            '<th scope="colgroup" colspan="1">host 1.0</th>') in page
    assert '<th scope="col">+cu128</th><th scope="col">+cu130</th>' in page
    assert page.count('<th scope="row"') == 1
    assert '<td class="fits" title="ext==1.0 with host 1.0+cu128">' in page
    assert ('<span class="why">2 symbols, libhost.so.2</span></summary>' in page)
    assert "<li><code>host::g&lt;char&gt;()</code></li>" in page
    assert "<h3>Missing libraries</h3><ul><li><code>libhost.so.2</code></li></ul>" in page
    assert '<td class="error" title="ext==1.0 with host 0.9+cu128">' in page
    assert "<p>host-0.9: not a valid zip file</p>" in page


@pytest.mark.parametrize("transfer", [None, TRANSFER], ids=["no-transfer", "transfer"])
def test_variants_json_validates_and_holds_groups_and_differences(
        transfer: dict[str, int] | None) -> None:
    """The variants document validates against variants.schema.json and carries the target,
    every group, every difference field by field, and the wheels the target left out."""
    doc = json.loads(dumps(variants_json(VARIANTS, transfer)))
    validate(doc, schema("variants"))
    assert list(doc)[:2] == ["schema_version", "command"]
    assert (doc["schema_version"], doc["command"], doc["transfer"]) == (
        schema_version("variants"), "variants", transfer)
    assert doc["target"] == "cp311 on linux_x86_64, linux_aarch64"
    assert doc["left_out"] == ["host-2.0-py3-none-macosx_11_0_arm64.whl",
                               "host-2.0-py3-none-win_amd64.whl"]
    assert [(g["architecture"], len(g["filenames"]), g["members"]) for g in doc["groups"]] == [
        ("x86_64", 2, 2), ("x86_64", 1, 3), ("aarch64", 1, 2)]
    first = doc["differences"][0]
    assert first["needed_added"] == ["libm.so.6"] and len(first["undefined_added"]) == 7
    assert [(d["same_needs"], d["only_in"], d["error"]) for d in doc["differences"]] == [
        (False, None, None), (True, None, None), (False, "other", None),
        (False, None, "not an ELF file")]


def test_variants_schema_rejects_an_unknown_only_in() -> None:
    """`only_in` is `reference`, `other` or null; anything else fails validation."""
    doc = variants_json(VARIANTS, None)
    differences = doc["differences"]
    assert isinstance(differences, list)
    bad = {**doc, "differences": [{**differences[0], "only_in": "both"}]}
    with pytest.raises(jsonschema.ValidationError):
        validate(bad, schema("variants"))


def test_variants_text_lists_groups_then_each_difference() -> None:
    """The groups with their wheels, then one block per differing member: what it needs,
    leaves undefined or requires in addition or no longer, at most five names shown."""
    reference, other = ("host-2.0-1-py3-none-linux_x86_64.whl",
                        "host-2.0-2-py3-none-linux_x86_64.whl")
    assert variants_text(VARIANTS).splitlines() == [
        "target: cp311 on linux_x86_64, linux_aarch64",
        "",
        "group 1 (x86_64, 2 binary member(s)):",
        f"  {reference}",
        "  host-2.0-py3-none-linux_x86_64.whl",
        "group 2 (x86_64, 3 binary member(s)):",
        f"  {other}",
        "group 3 (aarch64, 2 binary member(s)):",
        "  host-2.0-py3-none-linux_aarch64.whl",
        "",
        f"host/lib/libhost.so: {other} against {reference}",
        "  needs also: libm.so.6",
        "  leaves undefined also: sym0, sym1, sym2, sym3, sym4 (+2 more)",
        "  no longer requires versions: libc.so.6:GLIBC_2.34",
        "",
        f"host/_core.so: {other} against {reference}",
        "  bytes differ, needs are the same",
        "",
        f"host/lib/libextra.so: {other} against {reference}",
        f"  only in {other}",
        "",
        f"host/lib/libodd.so: {other} against {reference}",
        "  not compared: not an ELF file",
        "",
        "host 2.0: 4 wheel(s) compared in 3 group(s) of identical binaries; 2 left out by the "
        "target (--all compares every wheel)",
    ]


def test_variants_with_all_has_no_target_and_leaves_none_out() -> None:
    """With --all the text says every wheel was compared and none left out; the document's
    target is null and its left_out empty."""
    every = replace(VARIANTS, target=None, left_out=())
    lines = variants_text(every).splitlines()
    assert lines[0] == "target: every wheel (--all)"
    assert lines[-1] == ("host 2.0: 4 wheel(s) compared in 3 group(s) of identical binaries; "
                         "none left out (--all)")
    doc = json.loads(dumps(variants_json(every, None)))
    validate(doc, schema("variants"))
    assert (doc["target"], doc["left_out"]) == (None, [])


def test_variants_target_that_leaves_nothing_out_says_so() -> None:
    """A target that accepts every wheel of the release: the summary says it left none out."""
    assert variants_text(replace(VARIANTS, left_out=())).splitlines()[-1] == (
        "host 2.0: 4 wheel(s) compared in 3 group(s) of identical binaries; the target left "
        "none out")


CACHE_INFO = CacheInfo(Path("/home/u/.cache/abifit"), RootState.DIRECTORY, (
    BucketInfo("elf-v2", 12, 345_678), BucketInfo("views-v2", 3, 4_096),
    BucketInfo("index-v2", 0, 0)))


def test_cache_json_validates_and_totals_the_buckets() -> None:
    """The cache info document validates against cache.schema.json: the directory, what is
    there, the totals and each bucket."""
    doc = json.loads(dumps(cache_json(CACHE_INFO)))
    validate(doc, schema("cache"))
    assert list(doc)[:2] == ["schema_version", "command"]
    assert doc == {"schema_version": schema_version("cache"), "command": "cache",
                   "path": "/home/u/.cache/abifit", "state": "directory",
                   "entries": 15, "bytes": 349_774,
                   "buckets": [{"name": "elf-v2", "entries": 12, "bytes": 345_678},
                               {"name": "views-v2", "entries": 3, "bytes": 4_096},
                               {"name": "index-v2", "entries": 0, "bytes": 0}]}


def test_cache_text_lists_buckets_the_total_and_the_directory() -> None:
    """One aligned line per bucket, the total, then the directory."""
    assert cache_text(CACHE_INFO).splitlines() == [
        "elf-v2          12 entries        345,678 bytes",
        "views-v2         3 entries          4,096 bytes",
        "index-v2         0 entries              0 bytes",
        "total           15 entries        349,774 bytes",
        "/home/u/.cache/abifit",
    ]


def test_dumps_keeps_the_order_built_and_indents_by_two() -> None:
    """`dumps` prints keys in the order the renderer built them, indented by two spaces."""
    assert dumps({"schema_version": 1, "command": "x", "rows": [1]}) == (
        '{\n  "schema_version": 1,\n  "command": "x",\n  "rows": [\n    1\n  ]\n}')


def _undefined(module: str, demangled: str, nearest: NearestDefinition, n: int) -> Finding:
    return Finding(
        kind=FindingKind.UNDEFINED_SYMBOL, object=f"/site/{module}.so", module=module,
        message=f"/site/{module}.so: undefined symbol: _Z{n}", symbol=f"_Z{n}",
        demangled=demangled,
        derivation=(NeedsSymbol(f"/site/{module}.so", None, f"_Z{n}", demangled, None, 3,
                                Outcome.IMPORT_FAILS),
                    NearestLine(nearest), NearestLine(nearest)),
        hint="rebuild it")


def test_one_block_per_object_and_kind() -> None:
    """Undefined symbols of one module make one block: the first explained whole, the others
    by name with their nearest definitions (identical lines once), past five counted; another
    module's findings keep their own block."""
    definitions = [NearestDefinition("_Z1fj", "f(unsigned int)", "/site/libc10.so", None, False,
                                     (), "parameter 1"),
                   NearestDefinition("_Z1gb", "g(bool)", "/site/libc10.so", None, False, (),
                                     "parameter 2 added")]
    nearest = ["Nearest definition, in /site/libc10.so: `f(unsigned int)` — parameter 1.",
               "Nearest definition, in /site/libc10.so: `g(bool)` — parameter 2 added."]
    findings = tuple(_undefined("ext", f"f{i}(int)", definitions[i % 2], i) for i in range(8))
    findings += (_undefined("other", "h()", definitions[0], 9),)
    blocks = problem_blocks(findings, (), (), None)
    assert len(blocks) == 2
    lines = blocks[0].splitlines()
    assert lines[0] == "undefined-symbol: ext (8 symbols)"
    assert lines.count(f"  {nearest[0]}") == 1  # the first's two identical lines merged
    assert "  also missing (7 more):" in lines
    assert [line.strip() for line in lines if line.startswith("    f")] == [
        "f1(int)", "f2(int)", "f3(int)", "f4(int)"]
    assert f"      {nearest[1]}" in lines and lines.count(f"      {nearest[1]}") == 1
    assert "    and 3 more (every one in --json)" in lines
    assert lines[-1] == "  hint: rebuild it"
    assert blocks[1].splitlines()[0] == "undefined-symbol: other"


def _lacking(module: str, library: str, version: str) -> Finding:
    """A missing-version finding as diagnosis makes it (its wording is what the block reads)."""
    defined = {"/lib/libstdc++.so.6": ("GLIBCXX_3.4.19", "CXXABI_1.3.7", "GLIBCXX_3.4"),
               "/lib/libm.so.6": ("GLIBC_2.2.5", "GLIBC_2.15")}
    ctx = Context(owner=lambda _p: None, exports=lambda _p: (),
                  versions_defined=lambda path: defined.get(path, ()), locate=lambda _n: (),
                  pip_package=lambda _n: None)
    problem = LoadProblem(ProblemKind.MISSING_VERSION, f"/site/{module}.so",
                          f"{library}: version `{version}' not found (required by "
                          f"/site/{module}.so)", version=version, library=library)
    return diagnose(problem, module, ctx)


def test_one_block_per_library_for_missing_versions() -> None:
    """The versions a library lacks make one block for every module that needs them: which
    versions (sorted by family and number), the newest of each family it defines, the
    modules; each library its own block."""
    findings = (_lacking("a", "/lib/libstdc++.so.6", "GLIBCXX_3.4.21"),
                _lacking("a", "/lib/libstdc++.so.6", "CXXABI_1.3.9"),
                _lacking("b", "/lib/libstdc++.so.6", "GLIBCXX_3.4.20"),
                _lacking("a", "/lib/libm.so.6", "GLIBC_2.27"),
                _lacking("b", "/lib/libm.so.6", "GLIBC_2.27"))
    blocks = problem_blocks(findings, (), (), None)
    assert len(blocks) == 2
    first = blocks[0].splitlines()
    assert first[0] == "missing-version: /lib/libstdc++.so.6"
    assert first[1] == ("  lacks CXXABI_1.3.9, GLIBCXX_3.4.20, GLIBCXX_3.4.21; the newest it "
                        "defines: GLIBCXX_3.4.19, CXXABI_1.3.7")
    assert first[2] == "  needed by 2 module(s): a, b"
    assert sum(line.startswith("  hint: ") for line in first) == 1
    second = blocks[1].splitlines()
    assert second[:3] == ["missing-version: /lib/libm.so.6",
                          "  lacks GLIBC_2.27; the newest it defines: GLIBC_2.15",
                          "  needed by 2 module(s): a, b"]


def test_one_block_for_modules_that_miss_a_library_alike() -> None:
    """Modules that miss one library with one fix make one block (the first whole, the others
    named); another fix, or another severity, keeps its own block."""
    def missing(module: str, hint: str, severity: Severity = Severity.ERROR) -> Finding:
        return Finding(kind=FindingKind.MISSING_LIBRARY, object=f"/site/{module}.so",
                       module=module, library="libcudart.so.12",
                       message="libcudart.so.12: cannot open shared object file: No such file "
                               "or directory",
                       derivation=(NeedsLibrary(f"/site/{module}.so", None, "libcudart.so.12",
                                                3, Outcome.IMPORT_FAILS),),
                       hint=hint, severity=severity)

    fix = "`pip install nvidia-cuda-runtime-cu12` provides libcudart.so.12"
    findings = tuple(missing(m, fix) for m in ("a", "b", "c", "d", "e", "f", "g", "h"))
    findings += (missing("x", "another fix"), missing("y", fix, Severity.INFO))
    blocks = problem_blocks(findings, (), (), None)
    assert len(blocks) == 3
    lines = blocks[0].splitlines()
    assert lines[0] == "missing-library: a"
    assert lines[1] == ("  also needed by 7 more module(s), whose searches fail alike: "
                        "b, c, d, e, f and 2 more")
    assert blocks[1].splitlines()[0] == "missing-library: x"
    assert blocks[2].splitlines()[0] == "optional, missing-library: y"
