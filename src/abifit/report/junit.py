"""`--junit FILE`: a `Gate` as JUnit XML, which CI systems show as test results: a test suite
per package, a test case per module checked (class name the distribution, name the module),
a failure for a module whose failure fails the gate (the loader's message, the kind of its
problem, the explanation), skipped for an unused variant; each suite's properties carry the
verdict."""

from __future__ import annotations

import re
from xml.etree import ElementTree

from abifit.report.gate import Case, Gate, Outcome, Suite
from abifit.version import __version__

# characters XML 1.0 cannot hold, even escaped
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def _clean(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def _counts(cases: tuple[Case, ...]) -> dict[str, str]:
    return {"tests": str(len(cases)),
            "failures": str(sum(c.outcome is Outcome.FAILED for c in cases)),
            "errors": "0",
            "skipped": str(sum(c.outcome is Outcome.SKIPPED for c in cases))}


def _case(case: Case) -> ElementTree.Element:
    element = ElementTree.Element("testcase", classname=_clean(case.package),
                                  name=_clean(case.name))
    if case.outcome is Outcome.FAILED:
        failure = ElementTree.SubElement(element, "failure", message=_clean(case.message),
                                         type=case.kind)
        failure.text = _clean(case.text)
    elif case.outcome is Outcome.SKIPPED:
        ElementTree.SubElement(element, "skipped", message=_clean(case.message))
    elif case.text:
        ElementTree.SubElement(element, "system-out").text = _clean(case.text)
    return element


def _suite(suite: Suite, gate: Gate) -> ElementTree.Element:
    element = ElementTree.Element("testsuite", {"name": _clean(suite.name),
                                                      **_counts(suite.cases)})
    properties = ElementTree.SubElement(element, "properties")
    facts = [("verdict", gate.verdict), ("fail-on", gate.fail_on),
             ("command", f"abifit {gate.command}"), ("abifit", __version__)]
    if suite.version:
        facts.append(("version", suite.version))
    for name, value in facts:
        ElementTree.SubElement(properties, "property", name=name, value=_clean(value))
    element.extend(_case(case) for case in suite.cases)
    return element


def junit_xml(gate: Gate) -> str:
    """The JUnit XML document of a gate."""
    cases = tuple(case for suite in gate.suites for case in suite.cases)
    root = ElementTree.Element("testsuites", {"name": f"abifit {gate.command}", **_counts(cases)})
    root.extend(_suite(suite, gate) for suite in gate.suites)
    ElementTree.indent(root)
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            + ElementTree.tostring(root, encoding="unicode") + "\n")
