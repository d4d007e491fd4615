"""`abifit explain` rendered: one block per message recognised (what it means, the object in the
environment and what doctor's simulation says of it, who provides what is missing, the fix),
then one summary line; `--json` prints the same report as one versioned document."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

from abifit.report.doctor import module_json
from abifit.report.findings import finding_json, finding_text
from abifit.report.json import SCHEMA_VERSIONS, JsonObject

if TYPE_CHECKING:
    from abifit.engines.explain import ExplainReport, Explanation

_VERDICTS = {
    "confirmed": "confirmed: abifit's simulation of this environment fails the same way",
    "fails-otherwise": "fails here, but not as the message says: see the simulated error",
    "loads-here": "not reproduced: here it loads, so the error came from another environment "
    "or process (LD_LIBRARY_PATH, LD_PRELOAD, what was imported first)",
    "not-in-environment": "not checked: the object the message names is not in this "
    "environment (give its interpreter with --python)",
    "not-needed": "not reproduced: no object of this environment needs that library",
    "explained": "not checked here: nothing in this environment shows it; the message alone "
    "explains it",
}


def explain_json(report: ExplainReport) -> JsonObject:
    """The `--json` document of `abifit explain`."""
    return {
        "schema_version": SCHEMA_VERSIONS["explain"],
        "command": "explain",
        "verdict": "problems" if report.problems else "ok",
        "python": {"executable": report.python, "version": report.python_version},
        "explanations": [explanation_json(e) for e in report.explanations],
    }


def explanation_json(e: Explanation) -> JsonObject:
    clue = {key: list(value) if isinstance(value, tuple) else value
            for key, value in asdict(e.clue).items()}
    return {
        "kind": e.kind,
        "clue": clue,
        "verdict": str(e.verdict),
        "summary": e.summary,
        "demangled": e.demangled,
        "signature": e.signature,
        "object": e.object,
        "located_by": e.located_by,
        "distribution": e.distribution,
        "module": module_json(e.status) if e.status else None,
        "findings": [finding_json(f) for f in e.findings],
        "provider": e.provider,
        "fix": e.fix,
        "notes": list(e.notes),
    }


def explanation_text(e: Explanation) -> list[str]:
    lines = [f"{e.kind}: {e.summary}"]
    if e.demangled:
        lines.append(f"  demangled: {e.demangled}")
    if e.signature and e.signature != e.demangled:
        lines.append(f"  signature: {e.signature}")
    if e.object:
        owner = f", of {e.distribution}" if e.distribution else ""
        lines.append(f"  object: {e.object} (found by {e.located_by}{owner})")
    elif e.distribution:
        lines.append(f"  installed: {e.distribution}")
    lines.append(f"  {_VERDICTS[str(e.verdict)]}")
    if e.status is not None and not e.findings:
        said = "loads" if e.status.loads else f"does not load: {e.status.error}"
        lines.append(f"  simulated: {e.status.module} {said}")
    for finding in e.findings:
        lines += [f"  {line}" for line in finding_text(finding) if "hint: " not in line]
    if e.provider:
        lines.append(f"  provided by: {e.provider}")
    lines += [f"  note: {note}" for note in e.notes]
    if e.fix:
        lines.append(f"  fix: {e.fix}")
    return lines


def explain_text(report: ExplainReport) -> str:
    """The text rendering of `abifit explain`: a block per message, then one summary line."""
    blocks = ["\n".join(explanation_text(e)) for e in report.explanations]
    confirmed = sum(1 for e in report.explanations if str(e.verdict) == "confirmed")
    blocks.append(f"{report.python} ({report.python_version}): {len(report.explanations)} "
                  f"message(s) recognised, {confirmed} confirmed in this environment")
    return "\n\n".join(blocks) + "\n"
