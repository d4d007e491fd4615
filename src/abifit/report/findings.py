"""Findings and warnings, as JSON and as text blocks; shared by doctor, check and cuda."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict
from typing import TYPE_CHECKING

from abifit.report.derivation import derivation_text, explanation, sentence
from abifit.report.gpu import gpu_check_line
from abifit.report.json import JsonObject
from abifit.sim.derivation import NearestLine, NewestVersion
from abifit.sim.findings import Effect, Finding, FindingKind, SearchStep
from abifit.sim.verdict import prerequisite_of

if TYPE_CHECKING:
    from abifit.sim.gpu import GpuCheck


def finding_json(finding: Finding) -> JsonObject:
    """A finding's JSON: its fields, the derivation in words (`explanation`, where the field
    stands), `trace` and `nearest` as the lines the text shows, and the same as records
    (`searched`, `definitions`)."""
    doc = {("explanation" if key == "derivation" else key): value
           for key, value in asdict(finding).items()}
    doc["explanation"] = explanation(finding)  # in the place of the records, in words
    doc["trace"] = [trace_line(step) for step in finding.trace]
    doc["nearest"] = [f"{near.mangled}  {near.description}" for near in finding.nearest]
    for key in ("candidates", "behind"):
        doc[key] = list(doc[key])
    doc["import"] = doc.pop("import_name")
    doc["searched"] = [asdict(step) for step in finding.trace]
    doc["definitions"] = [{**asdict(near), "differences": list(near.differences)}
                          for near in finding.nearest]
    return doc


def trace_line(step: SearchStep) -> str:
    """A path the search tried, as the text shows it: `PATH  [VIA of OWNER: OUTCOME]`."""
    owner = f" of {step.owner}" if step.owner else ""
    return f"{step.path}  [{step.via}{owner}: {step.outcome}]"


_OPTIONAL = {"guarded": "package code catches its failure and goes on without it",
             "on-use": "package code loads it only when a function that needs it is called",
             "unreached": "no import loads it; what it offers is lost"}
_HEADS = {Effect.DEGRADES: "degraded", Effect.PREREQUISITE: "needs a prerequisite",
          Effect.UNUSED: "unused variant"}


def _head(finding: Finding, head: str) -> str:
    """A block's first line: what the failure costs, then its kind and object."""
    if finding.breaks:
        return head
    word = _HEADS.get(finding.effect, "optional") if finding.effect else "optional"
    return f"{word}, {head}"


def _works_without(finding: Finding) -> str | None:
    """The line that says the import works without the object, and why."""
    why = _OPTIONAL.get(finding.reachability or "") if not finding.breaks else None
    if not (finding.import_name and why):
        return None
    if finding.reachability == "unreached":
        return f"  no import loads {finding.module or finding.object}: what it offers is lost."
    return f"  `import {finding.import_name}` works without it: {why}."


def finding_text(finding: Finding) -> list[str]:
    where = finding.module or finding.object
    head = f"{finding.kind}: {where}"
    if finding.behind:
        names = ", ".join(finding.behind)
        head += f", once {names} {'is' if len(finding.behind) == 1 else 'are'} found"
    lines = [_head(finding, head), f"  {finding.message}"]
    works = _works_without(finding)
    if works:
        lines.append(works)
    lines += [f"  {line}" for line in dict.fromkeys(explanation(finding).splitlines())]
    if finding.trace:
        lines.append("  paths considered, in order:")
        lines += [f"    {trace_line(t)}" for t in finding.trace]
    if finding.hint:
        lines.append(f"  hint: {finding.hint}")
    return lines


# Findings of these kinds about one object are shown as one block (missing versions: one block
# per library); the rest each on its own.
_GROUPED = frozenset({FindingKind.UNDEFINED_SYMBOL})
SHOWN = 5  # symbols or versions spelled out in a block; the others are counted (all in JSON)


def _group_key(finding: Finding) -> tuple[object, ...] | None:
    if finding.kind is FindingKind.MISSING_VERSION:  # one block per library, for every module
        return (finding.kind, finding.library, finding.severity)
    if finding.kind is FindingKind.MISSING_LIBRARY:  # ... when the fix is the same
        return (finding.kind, finding.library, finding.severity, finding.hint)
    if finding.kind is FindingKind.NUMPY_C_API:  # one block per error and fix
        return (finding.kind, finding.message, finding.severity, finding.hint)
    if finding.kind not in _GROUPED:
        return None
    return (finding.kind, finding.object, finding.module, finding.severity, finding.library,
            finding.behind)


def grouped(findings: Iterable[Finding]) -> list[list[Finding]]:
    """Findings in order, those of one kind about one object (and one library, for missing
    versions) gathered into one group where the first of them stands."""
    groups: list[list[Finding]] = []
    at: dict[tuple[object, ...], list[Finding]] = {}
    for finding in findings:
        key = _group_key(finding)
        if key is not None and key in at:
            at[key].append(finding)
            continue
        group = [finding]
        groups.append(group)
        if key is not None:
            at[key] = group
    return groups


def _what(finding: Finding) -> str:
    """The symbol a grouped finding is about, demangled."""
    return finding.demangled or finding.symbol or finding.message


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:SHOWN])
    return shown + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")


def _versions_text(group: list[Finding]) -> list[str]:
    """One block for the versions a library lacks: which, the newest it has of each family,
    which modules need them, then the first finding's explanation and hint."""
    first = group[0]
    versions = sorted({f.version or "" for f in group}, key=_version_key)
    modules = list(dict.fromkeys(f.module or f.object for f in group))
    newest = dict.fromkeys(f.newest for f in group if f.newest)
    head = f"missing-version: {first.library}"
    lines = [_head(first, head),
             f"  lacks {_listed(versions)}"
             + (f"; the newest it defines: {', '.join(newest)}" if newest else ""),
             f"  needed by {len(modules)} module(s): {_listed(modules)}",
             f"  {first.message}"]
    works = _works_without(first)
    if works:
        lines.append(works)
    told = [s for s in first.derivation  # the newest version is shown in the head
            if not (isinstance(s, NewestVersion) and s.newest == first.newest)]
    lines += [f"  {line}" for line in dict.fromkeys(derivation_text(told).splitlines())]
    if first.hint:
        lines.append(f"  hint: {first.hint}")
    return lines


def _version_key(name: str) -> tuple[str, tuple[int, ...]]:
    family, _, number = name.rpartition("_")
    parts = tuple(int(p) for p in number.split(".") if p.isdigit())
    return (family, parts) if family else (name, ())


def group_text(group: list[Finding]) -> list[str]:
    """One block for a group: the first finding whole, then the others by what they miss, with
    their nearest definitions (identical lines once), the rest counted; the versions a library
    lacks in one block for all the modules that need them."""
    first = group[0]
    if first.kind is FindingKind.MISSING_VERSION:
        return _versions_text(group)
    lines = finding_text(first)
    if len(group) == 1:
        return lines
    if first.kind is FindingKind.MISSING_LIBRARY:
        modules = list(dict.fromkeys(f.module or f.object for f in group))
        lines.insert(1, f"  also needed by {len(modules) - 1} more module(s), whose searches "
                        f"fail alike: {_listed(modules[1:])}")
        return lines
    if first.kind is FindingKind.NUMPY_C_API:
        modules = list(dict.fromkeys(f.module or f.object for f in group))
        lines.insert(1, f"  also {len(modules) - 1} more module(s), alike: "
                        f"{_listed(modules[1:])}")
        return lines
    lines[0] += f" ({len(group)} symbols)"
    hint = lines.pop() if first.hint else None
    seen = {line.strip() for line in lines}
    lines.append(f"  also missing ({len(group) - 1} more):")
    for finding in group[1:SHOWN]:
        lines.append(f"    {_what(finding)}")
        for near in finding.derivation:
            line = sentence(near) if isinstance(near, NearestLine) else None
            if line is not None and line not in seen:
                seen.add(line)
                lines.append(f"      {line}")
    if len(group) > SHOWN:
        lines.append(f"    and {len(group) - SHOWN} more (every one in --json)")
    if hint is not None:
        lines.append(hint)
    return lines


def problem_blocks(findings: tuple[Finding, ...], warnings: tuple[Finding, ...],
                   checks: tuple[GpuCheck, ...], gpu_reason: str | None,
                   verbose: bool = False) -> list[str]:
    """Findings (those that break an import first), then warnings, then one line per GPU
    checked (or why none was). Libraries that carry kernels for other GPUs only in some of
    their fat binaries (`partial-kernel-image`: cuBLAS, cuDNN and NCCL build some kernels for
    one architecture and launch them only there) are one summary line, unless `verbose`."""
    shown = [f for f in findings if f.effect not in _SUMMED]
    ordered = sorted(shown, key=lambda f: not f.breaks)
    blocks = ["\n".join(group_text(g)) for g in grouped(ordered)]
    blocks += [b for b in (prerequisites_text(findings), unused_text(findings)) if b]
    partial = [f for f in warnings if f.kind is FindingKind.PARTIAL_KERNEL_IMAGE]
    told = warnings if verbose else tuple(f for f in warnings if f not in partial)
    blocks += ["\n".join(["warning: " + line if i == 0 else line
                          for i, line in enumerate(finding_text(f))]) for f in told]
    if partial and not verbose:
        names = _listed(list(dict.fromkeys(f.module or f.object for f in partial)))
        carry = "library carries" if len(partial) == 1 else "libraries carry"
        blocks.append(f"note: {len(partial)} {carry} some kernels for other GPUs only "
                      f"({names}); nothing fails unless they are launched here (-v shows each)")
    gpu_lines = [gpu_check_line(c) for c in checks]
    if gpu_reason:
        gpu_lines.append(f"GPU code not checked: {gpu_reason} (give --gpu ARCH to check "
                         "for a GPU)")
    return [*blocks, "\n".join(gpu_lines)] if gpu_lines else blocks


_SUMMED = frozenset({Effect.PREREQUISITE, Effect.UNUSED})  # a line each, not a block a finding


def prerequisites_text(findings: Iterable[Finding]) -> str | None:
    """One block per prerequisite: the libraries missing, the files that need it, and how to
    get it (for one abifit does not know by name, the first finding's own hint); the imports
    work without it."""
    by_name: dict[str, list[Finding]] = {}
    for f in findings:
        if f.effect is Effect.PREREQUISITE and f.prerequisite:
            by_name.setdefault(f.prerequisite, []).append(f)
    lines = []
    for name, found in by_name.items():
        libraries = list(dict.fromkeys(f.library for f in found if f.library
                                       and f.kind is not FindingKind.BLOCKED_BY))
        files = list(dict.fromkeys(f.module or f.object for f in found))
        known = prerequisite_of(libraries[0]) if libraries else None
        get = (known.get if known is not None and known.name != libraries[0]
               else next((f.hint for f in found if f.hint), None))
        named = "" if libraries in ([name], []) else f" ({_listed(libraries)})"
        lines.append(f"needs a prerequisite: {name}{named}")
        lines.append(f"  without it {len(files)} file(s) do not load, and the imports work: "
                     f"{_listed(files)}")
        if get:
            lines.append(f"  hint: {get}")
    return "\n".join(lines) or None


def unused_text(findings: Iterable[Finding]) -> str | None:
    """One line for the variants a package does not pick that do not load."""
    files = list(dict.fromkeys(f.module or f.object for f in findings
                               if f.effect is Effect.UNUSED))
    if not files:
        return None
    return (f"unused variants: {len(files)} file(s) that the packages do not pick here do not "
            f"load, which costs nothing: {_listed(files)} (their findings in --json)")
