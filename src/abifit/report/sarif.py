"""`--sarif FILE`: a SARIF 2.1.0 log of a `Gate` (one run; a rule per kind of problem used;
a result per problem, with its level, message, location and a fingerprint that stays the
same from run to run), as code-scanning services read it. A run without problems is a log
with no results."""

from __future__ import annotations

import hashlib
from pathlib import PurePosixPath
from urllib.parse import quote

from abifit.report.gate import Gate, Level, Problem
from abifit.report.json import JsonObject, dumps
from abifit.report.rules import Rule
from abifit.version import __version__

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://github.com/abifit/abifit"
FINGERPRINT = "abifit/v1"  # the name of the partial fingerprint: what a problem is about

_LEVELS = {Level.ERROR: "error", Level.WARNING: "warning", Level.NOTICE: "note"}


def sarif_log(gate: Gate) -> JsonObject:
    """The SARIF log of a gate."""
    rules = list(dict.fromkeys(p.rule for p in gate.problems))
    index = {rule.id: n for n, rule in enumerate(rules)}
    driver = {"name": "abifit", "version": __version__, "informationUri": INFORMATION_URI,
              "rules": [_rule(r) for r in rules]}
    run = {"tool": {"driver": driver},
           "results": [_result(p, index[p.rule.id]) for p in gate.problems],
           "properties": {"command": gate.command, "verdict": gate.verdict,
                          "failOn": gate.fail_on}}
    return {"$schema": SCHEMA, "version": "2.1.0", "runs": [run]}


def sarif_text(gate: Gate) -> str:
    """The SARIF log as the file holds it."""
    return dumps(sarif_log(gate)) + "\n"


def _rule(rule: Rule) -> JsonObject:
    return {"id": rule.id, "shortDescription": {"text": rule.short},
            "fullDescription": {"text": rule.help}, "help": {"text": rule.help}}


def fingerprint(problem: Problem) -> str:
    """What a problem is about (its kind, package, module and symbol or library), hashed:
    the same problem gets the same fingerprint in every run."""
    return hashlib.sha256("\0".join(problem.identity).encode()).hexdigest()


def _result(problem: Problem, rule_index: int) -> JsonObject:
    result: JsonObject = {"ruleId": problem.rule.id, "ruleIndex": rule_index,
                          "level": _LEVELS[problem.level], "message": {"text": problem.text}}
    location = _location(problem)
    if location:
        result["locations"] = [location]
    result["partialFingerprints"] = {FINGERPRINT: fingerprint(problem)}
    properties = {key: value for key, value in (("package", problem.package),
                                                ("module", problem.module),
                                                ("effect", problem.effect)) if value}
    if properties:
        result["properties"] = properties
    return result


def _location(problem: Problem) -> JsonObject:
    """The file and line a problem points at (a URI relative to the repository's root, or a
    file URI outside it), and the module it is about."""
    location: JsonObject = {}
    place = problem.place
    if place is not None:
        uri = quote(place.path) if place.inside else PurePosixPath(place.path).as_uri()
        physical: JsonObject = {"artifactLocation": {"uri": uri}}
        if place.line is not None:
            physical["region"] = {"startLine": place.line}
        location["physicalLocation"] = physical
    if problem.module or problem.package:
        location["logicalLocations"] = [{"fullyQualifiedName": problem.module or problem.package,
                                         "kind": "module"}]
    return location
