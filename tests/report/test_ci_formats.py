"""The reports CI systems read, rendered from hand-built reports (no file system, network or
host probe): the levels `--fail-on` gives, GitHub's workflow commands and their escaping,
SARIF logs held to the published SARIF 2.1.0 schema, JUnit XML read back by a JUnit parser,
and the Markdown summary, compared whole."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from junitparser import Failure, JUnitXml, Skipped

from abifit.engines.doctor import DoctorReport
from abifit.report.annotations import annotation, escape_data, escape_property, workflow_commands
from abifit.report.gate import (
    Gate,
    Level,
    Place,
    Problem,
    doctor_gate,
    level_of,
    place_of,
)
from abifit.report.junit import junit_xml
from abifit.report.markdown import ROWS, cell, gate_markdown
from abifit.report.rules import FINDING_RULES
from abifit.report.sarif import fingerprint, sarif_log
from abifit.sim.derivation import NeedsSymbol, NothingProvides, OtherRelease, Outcome
from abifit.sim.findings import Effect, Finding, FindingKind, Severity
from abifit.sim.process import ModuleStatus
from helpers import validate_sarif

ROOT = "/work/repo"
SITE = f"{ROOT}/.venv/lib/python3.11/site-packages"
OPS = f"{SITE}/extpkg/_ops.abi3.so"
SYMBOL = "_ZN7hostlib10check_implEiPKcS1_ib"
DEMANGLED = "hostlib::check_impl(int, char const*, char const*, int, bool)"


def _report() -> DoctorReport:
    """An environment with one module of each effect: extpkg._ops fails (an undefined symbol),
    xformers._C is degraded (a library of another CUDA major), torchcodec's core needs FFmpeg,
    and bitsandbytes' CUDA 11.8 library is an unused variant."""
    fails = Finding(
        FindingKind.UNDEFINED_SYMBOL, OPS, f"{OPS}: undefined symbol: {SYMBOL}",
        (NeedsSymbol(OPS, "extpkg 1.0", SYMBOL, DEMANGLED, None, 9, Outcome.IMPORT_FAILS),),
        module="extpkg._ops", symbol=SYMBOL,
        demangled=DEMANGLED, hint="install the hostpkg release extpkg 1.0 was built for",
        effect=Effect.FAILS)
    xformers = f"{SITE}/xformers/_C.so"
    degrades = Finding(
        FindingKind.MISSING_LIBRARY, xformers,
        "libcudart.so.12: cannot open shared object file: No such file or directory",
        (OtherRelease("libcudart.so.12", ("libcudart.so.13",)),), module="xformers._C",
        library="libcudart.so.12",
        severity=Severity.WARNING, effect=Effect.DEGRADES)
    core = "/opt/other/torchcodec/libtorchcodec_core6.so"
    ffmpeg = Finding(
        FindingKind.MISSING_LIBRARY, core,
        "libavutil.so.58: cannot open shared object file: No such file or directory",
        (NothingProvides("libavutil.so.58"),),
        module="torchcodec/libtorchcodec_core6.so", library="libavutil.so.58",
        severity=Severity.INFO, effect=Effect.PREREQUISITE, prerequisite="FFmpeg")
    bnb = f"{SITE}/bitsandbytes/libbitsandbytes_cuda118.so"
    unused = Finding(
        FindingKind.MISSING_LIBRARY, bnb,
        "libcudart.so.11.0: cannot open shared object file: No such file or directory",
        (NothingProvides("libcudart.so.11.0"),),
        module="bitsandbytes/libbitsandbytes_cuda118.so", library="libcudart.so.11.0",
        severity=Severity.INFO, effect=Effect.UNUSED)
    modules = (
        ModuleStatus("extpkg._ops", "extension", OPS, "extpkg", False, fails.message, (), 1,
                     effect=Effect.FAILS),
        ModuleStatus("hostpkg._C", "extension", f"{SITE}/hostpkg/_C.abi3.so", "hostpkg", True,
                     None, (), 0),
        ModuleStatus("xformers._C", "extension", xformers, "xformers", False,
                     degrades.message, (), 1, effect=Effect.DEGRADES),
        ModuleStatus("torchcodec/libtorchcodec_core6.so", "plugin", core, "torchcodec", False,
                     ffmpeg.message, (), 1, effect=Effect.PREREQUISITE),
        ModuleStatus("bitsandbytes/libbitsandbytes_cuda118.so", "plugin", bnb, "bitsandbytes",
                     False, unused.message, (), 1, effect=Effect.UNUSED),
    )
    return DoctorReport(f"{ROOT}/.venv/bin/python", "3.11.7", modules,
                        (fails, degrades, ffmpeg, unused), None, 9)


def test_workflow_command_values_are_escaped_as_github_reads_them() -> None:
    """In a message `%`, CR and LF; in a property also `:` and `,`."""
    assert escape_data("100% of a:b,c\r\nnext") == "100%25 of a:b,c%0D%0Anext"
    assert escape_property("100% of a:b,c\r\nnext") == "100%25 of a%3Ab%2Cc%0D%0Anext"


@pytest.mark.parametrize(("place", "properties"), [
    (Place("uv.lock", 12), "file=uv.lock,line=12,title=t%3A a%2Cb"),
    (Place("venv/lib/x,y.so"), "file=venv/lib/x%2Cy.so,title=t%3A a%2Cb"),
    (Place("/elsewhere/requirements.txt", 3, inside=False), "title=t%3A a%2Cb"),
    (None, "title=t%3A a%2Cb"),
], ids=["a line of a file", "a file", "outside the repository", "nowhere"])
def test_an_annotation_names_a_file_of_the_repository_only(place: Place | None,
                                                            properties: str) -> None:
    """A file (and line) inside the repository's root; else the title alone."""
    problem = Problem(FINDING_RULES["missing-library"], Level.WARNING, "t: a,b", "50% gone",
                      "second\nline", place=place)
    assert annotation(problem) == f"::warning {properties}::50%25 gone%0Asecond%0Aline"


@pytest.mark.parametrize(("fail_on", "levels"), [
    ("fails", ["error", "warning", "notice", None]),
    ("degraded", ["error", "error", "notice", None]),
    ("prerequisite", ["error", "error", "error", None]),
])
def test_the_level_is_error_for_what_fails_the_gate(fail_on: str,
                                                    levels: list[str | None]) -> None:
    """What fails under --fail-on is an error; below it degrades is a warning and a
    prerequisite a notice; an unused variant is nothing."""
    effects = (Effect.FAILS, Effect.DEGRADES, Effect.PREREQUISITE, Effect.UNUSED)
    found = [level_of(e, Severity.INFO, fail_on) for e in effects]
    assert [str(level) if level else None for level in found] == levels


def test_a_problem_without_an_effect_has_its_severity() -> None:
    """GPU and CUDA findings carry no effect: an error breaks, a warning warns."""
    assert level_of(None, Severity.ERROR, "fails") is Level.ERROR
    assert level_of(None, Severity.WARNING, "prerequisite") is Level.WARNING
    assert level_of(None, Severity.INFO, "degraded") is Level.NOTICE


def test_a_place_is_relative_to_the_root_inside_it() -> None:
    """A path under the root is relative to it; one outside stays absolute, marked so."""
    assert place_of("uv.lock", ROOT, 3) == Place("uv.lock", 3)
    assert place_of(OPS, ROOT) == Place(".venv/lib/python3.11/site-packages/extpkg/_ops.abi3.so")
    assert place_of("../other/uv.lock", ROOT, 3) == Place("/work/other/uv.lock", 3, inside=False)


def test_doctor_annotations_point_at_modules_under_the_root() -> None:
    """One command per problem, the unused variant left out; a module outside the root (the
    FFmpeg one) has no file."""
    lines = workflow_commands(doctor_gate(_report(), "degraded", ROOT)).splitlines()
    heads = [line.split("::")[1] for line in lines]
    assert heads == [
        "error file=.venv/lib/python3.11/site-packages/extpkg/_ops.abi3.so,"
        "title=undefined-symbol%3A extpkg._ops",
        "error file=.venv/lib/python3.11/site-packages/xformers/_C.so,"
        "title=missing-library%3A xformers._C",
        "notice title=missing-library%3A torchcodec/libtorchcodec_core6.so",
    ]
    assert lines[0].endswith("the import fails.%0Ahint: install the hostpkg release extpkg "
                             "1.0 was built for")


def test_the_sarif_log_holds_to_the_published_schema() -> None:
    """A rule per kind used, a result per problem with its level, location, module and a
    fingerprint; an empty run is a valid log with no results."""
    gate = doctor_gate(_report(), "fails", ROOT)
    log = json.loads(json.dumps(sarif_log(gate)))
    validate_sarif(log)
    [run] = log["runs"]
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == ["undefined-symbol",
                                                                  "missing-library"]
    results = run["results"]
    assert [(r["ruleId"], r["ruleIndex"], r["level"]) for r in results] == [
        ("undefined-symbol", 0, "error"), ("missing-library", 1, "warning"),
        ("missing-library", 1, "note")]
    first = results[0]
    assert first["message"]["text"].startswith(f"{OPS}: undefined symbol: {SYMBOL}\nBecause ")
    assert first["locations"] == [{
        "physicalLocation": {"artifactLocation": {
            "uri": ".venv/lib/python3.11/site-packages/extpkg/_ops.abi3.so"}},
        "logicalLocations": [{"fullyQualifiedName": "extpkg._ops", "kind": "module"}]}]
    assert results[2]["locations"] == [{"logicalLocations": [{
        "fullyQualifiedName": "torchcodec/libtorchcodec_core6.so", "kind": "module"}]}]
    empty = sarif_log(Gate("check", "fits", "fits: 1 extension module(s) checked, all load",
                            "degraded", (), ()))
    validate_sarif(empty)
    assert empty["runs"][0]["results"] == []  # type: ignore[index]


def test_a_file_outside_the_root_is_a_file_uri() -> None:
    """A lock outside the repository is located by its absolute file URI."""
    problem = Problem(FINDING_RULES["undefined-symbol"], Level.ERROR, "t", "m",
                      place=Place("/elsewhere/uv.lock", 7, inside=False))
    log = sarif_log(Gate("check", "fails", "fails", "degraded", (problem,), ()))
    validate_sarif(log)
    location = log["runs"][0]["results"][0]["locations"][0]  # type: ignore[index]
    assert location["physicalLocation"] == {"artifactLocation": {
        "uri": "file:///elsewhere/uv.lock"}, "region": {"startLine": 7}}


def test_fingerprints_stay_from_run_to_run_and_tell_problems_apart() -> None:
    """The same report elsewhere (another root, another place) gives the same fingerprints;
    two problems give two."""
    here = doctor_gate(_report(), "degraded", ROOT).problems
    there = doctor_gate(_report(), "degraded", "/elsewhere").problems
    assert [fingerprint(p) for p in here] == [fingerprint(p) for p in there]
    assert len({fingerprint(p) for p in here}) == len(here) == 3


def test_junit_has_a_suite_per_package_and_a_case_per_module() -> None:
    """Read back by junitparser: the counts, the failure of the module that fails the gate
    with its message and kind, the unused variant skipped; under --fail-on fails the
    degraded module passes."""
    xml = JUnitXml.fromstring(junit_xml(doctor_gate(_report(), "degraded", ROOT)))
    assert (xml.tests, xml.failures, xml.errors, xml.skipped) == (5, 2, 0, 1)
    suites = {suite.name: suite for suite in xml}
    assert sorted(suites) == ["bitsandbytes", "extpkg", "hostpkg", "torchcodec", "xformers"]
    [case] = list(suites["extpkg"])
    assert (case.classname, case.name) == ("extpkg", "extpkg._ops")
    [failure] = case.result
    assert isinstance(failure, Failure)
    assert failure.message == f"{OPS}: undefined symbol: {SYMBOL}"
    assert failure.type == "undefined-symbol"
    assert failure.text is not None and failure.text.startswith(f"Because {OPS} (extpkg 1.0)")
    [skipped] = next(iter(suites["bitsandbytes"])).result
    assert isinstance(skipped, Skipped)
    properties = {p.name: p.value for p in suites["extpkg"].properties()}
    assert properties["verdict"] == "fails" and properties["fail-on"] == "degraded"
    lenient = JUnitXml.fromstring(junit_xml(doctor_gate(_report(), "fails", ROOT)))
    assert (lenient.tests, lenient.failures, lenient.skipped) == (5, 1, 1)


def test_junit_holds_text_xml_cannot() -> None:
    """A control character in a message is replaced, and the document still parses."""
    report = _report()
    odd = replace(report.modules[0], error="bad\x00byte \x1b[31m")
    xml = JUnitXml.fromstring(junit_xml(doctor_gate(replace(report, modules=(
        odd, *report.modules[1:])), "degraded", ROOT)))
    case = next(iter(next(s for s in xml if s.name == "extpkg")))
    assert case.result[0].message == "bad\ufffdbyte \ufffd[31m"


def test_the_markdown_summary() -> None:
    """The verdict, its line and a row per problem, the gate's errors first."""
    expected = """\
### abifit doctor: fails

fails: /work/repo/.venv/bin/python (3.11.7): 5 native modules checked, 1 load, 1 fail, 1 degraded, 1 needs a prerequisite, 1 unused variant; 1 problem(s) (xformers loses xformers._C)

| package | module | effect | what fails |
| --- | --- | --- | --- |
| extpkg | `extpkg._ops` | fails | needs `hostlib::check_impl(int, char const*, char const*, int, bool)` |
| xformers | `xformers._C` | degrades | needs libcudart.so.12 |
| torchcodec | `torchcodec/libtorchcodec_core6.so` | prerequisite | needs FFmpeg (libavutil.so.58) |
"""  # noqa: E501
    assert gate_markdown(doctor_gate(_report(), "degraded", ROOT)) == expected


def test_the_markdown_table_is_capped() -> None:
    """Past `ROWS` rows, one line counts the others."""
    rule = FINDING_RULES["undefined-symbol"]
    problems = tuple(Problem(rule, Level.ERROR, f"p{n}", "m", package="pkg", module=f"m{n}",
                             effect="fails", what=f"needs `s{n}`") for n in range(ROWS + 7))
    text = gate_markdown(Gate("check", "fails", "fails: ...", "degraded", problems, ()))
    rows = [line for line in text.splitlines() if line.startswith("| pkg |")]
    last = ROWS - 1
    assert len(rows) == ROWS and rows[-1] == f"| pkg | `m{last}` | fails | needs `s{last}` |"
    assert text.endswith("\n\n… and 7 more\n")


@pytest.mark.parametrize(("text", "expected"), [
    ("needs `operator|(Flags, Flags)`", "needs `operator\\|(Flags, Flags)`"),
    ("std::vector<int> & more", "std::vector&lt;int&gt; &amp; more"),
    ("two\nlines", "two lines"),
    ("an ` alone", "an ' alone"),
], ids=["pipe in code", "html outside code", "newline", "unclosed code"])
def test_a_table_cell_is_one_line_of_plain_markdown(text: str, expected: str) -> None:
    """A cell is one line; `|` never ends it; HTML outside code spans is text."""
    assert cell(text) == expected
