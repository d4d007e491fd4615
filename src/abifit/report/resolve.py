"""`abifit resolve` rendered: text (the pins, the newer releases not chosen and why, the
verdict), one versioned JSON document, an HTML page, and the pinned set as a requirements or
constraints file or a PEP 751 lock."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from datetime import datetime, timezone

from abifit.engines.resolve import Conflict, Pin, Rejection, ResolveReport, SetCheck, Why
from abifit.errors import UsageError
from abifit.formats.pylock import LockedPackage, Snapshot, WheelFile, dumps, target_of
from abifit.report import page
from abifit.report.json import JsonObject, schema_version

DEFAULT_INDEX = "https://pypi.org/simple"


def _pin_line(pin: Pin, width: int) -> str:
    spec = f"{pin.name}=={pin.version}"
    details = [pin.role, "native" if pin.native else "pure"]
    if pin.cuda:
        details.append(f"CUDA {pin.cuda}")
    return f"  {spec.ljust(width)}  ({', '.join(details)})"


def derivation(conflict: Conflict) -> list[str]:
    """The conflict as uv writes one: "Because A, and B, no set of ... loads together."."""
    facts = list(conflict.facts) or ["the requirements conflict"]
    lines = [f"  Because {facts[0]},"]
    lines += [f"  and {fact}," for fact in facts[1:]]
    names = list(conflict.packages)
    which = (names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]) \
        if names else "these requirements"
    lines.append(f"  no set of {which} loads together.")
    return lines


def _set_check_line(check: SetCheck | None) -> str:
    if check is None:
        return "whole-set check: nothing native to load"
    head = f"whole-set check: {check.verdict} ({check.modules} module(s)"
    if check.failing:
        head += f", {check.failing} failing"
    return head + ")"


def _stats_line(report: ResolveReport) -> str:
    s = report.stats
    return (f"pairs: {s.pairs_checked} checked, {s.pairs_cached} from the cache (a product of "
            f"the releases would check {s.naive_pairs}); {s.candidates_tried} release(s) tried "
            f"in {s.resolutions} resolution(s)")


def _rejection_lines(pin: Pin) -> list[str]:
    """The newer releases grouped by reason (the release a reason names, replaced by the
    group's): `2.15.0, 2.14.1 and 2.14.0: ... torch 2.15.0, 2.14.1 and 2.14.0 ...`."""
    groups: dict[tuple[str, str], list[Rejection]] = {}
    for r in pin.newer:
        key = (r.why.value, r.reason.replace(f"{pin.name} {r.version}", "\0"))
        groups.setdefault(key, []).append(r)
    lines = []
    for (why, reason), listed in groups.items():
        versions = [r.version for r in listed]
        single = len(versions) == 1
        text = reason.replace("\0", f"{pin.name} {versions[0]}" if single else pin.name)
        lines.append(f"    {_versions(versions)}: {text} [{why}]")
    return lines


def _versions(versions: list[str]) -> str:
    if len(versions) > 8:
        return f"{', '.join(versions[:7])} and {len(versions) - 7} more"
    return versions[0] if len(versions) == 1 else ", ".join(versions[:-1]) + " and " + \
        versions[-1]


def resolve_text(report: ResolveReport) -> str:
    """The text rendering; the last line is the verdict."""
    lines: list[str] = []
    host = []
    if report.cuda is not None:
        host.append(f"CUDA {report.cuda}")
    if report.driver:
        host.append(f"driver {report.driver} (CUDA up to {report.driver_cuda or '?'})")
    if report.gpu:
        host.append(report.gpu)
    where = report.target + (f"; {', '.join(host)}" if host else "")
    if report.conflict is not None:
        lines.append(f"no set fits ({where}):")
        lines += derivation(report.conflict)
        lines += ["", _stats_line(report), "no set fits"]
        return "\n".join(lines) + "\n"
    lines.append(f"resolved for {where}:")
    width = max((len(f"{p.name}=={p.version}") for p in report.pins), default=0)
    lines += [_pin_line(p, width) for p in report.pins]
    rejected = [p for p in report.pins if p.newer]
    # dependencies held back only by what their dependents require: one line (JSON has each)
    held = [p for p in rejected if p.role == "dependency"
            and all(r.why is Why.METADATA for r in p.newer)]
    if rejected:
        lines += ["", "newer releases not chosen:"]
        for pin in (p for p in rejected if p not in held):
            lines.append(f"  {pin.name} (chosen {pin.version}):")
            lines += _rejection_lines(pin)
            if pin.newer_unlisted:
                lines.append(f"    ... and {pin.newer_unlisted} more")
        if held:
            lines.append(f"  held back by what the packages that require them require "
                         f"(--json lists each release): {', '.join(p.name for p in held)}")
    if report.set_check and report.set_check.problems:
        lines += ["", "whole-set check problems:"]
        lines += [f"  {p}" for p in report.set_check.problems]
    chosen = ", ".join(f"{p.name}=={p.version}" for p in report.pins if p.role != "dependency")
    lines += ["", _set_check_line(report.set_check), _stats_line(report),
              f"resolved: {chosen or 'nothing'}"]
    return "\n".join(lines) + "\n"


def resolve_json(report: ResolveReport, transfer: dict[str, int] | None) -> JsonObject:
    """The `--json` document of `abifit resolve`."""
    s = report.stats
    return {
        "schema_version": schema_version("resolve"),
        "command": "resolve",
        "target": report.target,
        "requirements": list(report.requirements),
        "withs": list(report.withs),
        "found": report.found,
        "pins": [_pin_json(p) for p in report.pins],
        "conflict": None if report.conflict is None else {
            "facts": list(report.conflict.facts), "packages": list(report.conflict.packages),
            "derivation": "\n".join(line.strip() for line in derivation(report.conflict))},
        "set_check": None if report.set_check is None else {
            "verdict": report.set_check.verdict, "modules": report.set_check.modules,
            "failing": report.set_check.failing, "problems": list(report.set_check.problems)},
        "stats": {"pairs_checked": s.pairs_checked, "pairs_cached": s.pairs_cached,
                  "pairs_unchecked": s.pairs_unchecked, "naive_pairs": s.naive_pairs,
                  "candidates_tried": s.candidates_tried, "resolutions": s.resolutions},
        "cuda": report.cuda,
        "driver": report.driver,
        "driver_cuda": report.driver_cuda,
        "gpu": report.gpu,
        "notes": list(report.notes),
        "transfer": transfer,
    }


def _pin_json(pin: Pin) -> JsonObject:
    return {"name": pin.name, "version": pin.version, "filename": pin.filename, "url": pin.url,
            "sha256": pin.sha256, "role": pin.role, "native": pin.native, "cuda": pin.cuda,
            "newer": [{"version": r.version, "why": r.why.value, "reason": r.reason,
                       "against": r.against} for r in pin.newer],
            "newer_unlisted": pin.newer_unlisted}


def _index_lines(report: ResolveReport) -> list[str]:
    urls = list(report.index_urls)
    if not urls or urls == [DEFAULT_INDEX]:
        return []
    return [f"--index-url {urls[0]}", *(f"--extra-index-url {u}" for u in urls[1:])]


def _made_by(report: ResolveReport) -> list[str]:
    """The head of a lock file: the command that resolved it, quoted for a shell (a
    requirement such as `numpy<2.3` holds characters a shell reads), and its target."""
    words = [*report.requirements, *(w for with_ in report.withs for w in ("--with", with_))]
    return [f"# abifit resolve {shlex.join(words)}", f"# for {report.target}"]


def requirements_txt(report: ResolveReport) -> str:
    """The pinned set as a requirements file pip installs as is (`--hash` where the index gave
    one: pip then checks every wheel)."""
    head = _made_by(report)
    hashed = all(p.sha256 for p in report.pins)
    lines = [f"{p.name}=={p.version}" + (f" --hash=sha256:{p.sha256}" if hashed else "")
             for p in report.pins]
    return "\n".join([*head, *_index_lines(report), *lines]) + "\n"


def constraints_txt(report: ResolveReport) -> str:
    """The pinned set as constraints (`pip install -c`, `uv pip install -c`)."""
    head = _made_by(report)
    return "\n".join([*head, *(f"{p.name}=={p.version}" for p in report.pins)]) + "\n"


def pylock_text(report: ResolveReport, markers: Mapping[str, str]) -> str:
    """The pinned set as a PEP 751 lock (`formats.pylock`, without abifit's machine facts):
    each release's wheel by URL and sha256, for the target `markers` describe. UsageError when
    the index gave a wheel no sha256 (PEP 751 requires one)."""
    unhashed = [p.filename for p in report.pins if not p.sha256]
    if unhashed:
        raise UsageError(f"cannot write a PEP 751 lock: the index gave no sha256 for "
                         f"{', '.join(unhashed)}; write requirements instead")
    packages = tuple(LockedPackage(p.name, p.version, WheelFile(p.filename, p.sha256 or "",
                                                                url=p.url))
                     for p in report.pins)
    requires_python, environments = target_of(markers)
    return dumps(Snapshot(f"abifit {report.abifit_version}", packages,
                          requires_python=requires_python, environments=environments))


# The page (`resolve --html`): the chosen set, each package's newer releases not chosen (a
# `<details>` per package), or the conflict's derivation; from `report.page`'s parts.

_CHOSEN = page.Outcome("fits", "✓", "chosen", "the release chosen: every extension module of "
                       "the set loads next to the others")
_REJECTED = page.Outcome("fails", "✗", "not chosen", "a newer release, and why it was not "
                         "chosen (open the row)")


def resolve_html(report: ResolveReport, checked_at: str | None = None,
                 command: str = "") -> str:
    """The resolution as one self-contained page a person reads without help."""
    when = checked_at or datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    title = "abifit resolve " + " ".join(report.requirements)
    lead = ("The newest releases whose metadata agrees and whose binaries load together."
            if report.found else "No set of releases fits: the derivation below says why.")
    checked = [("Requirements", " ".join(report.requirements) or "none"),
               ("With", " ".join(report.withs) or "none"), ("Searched", _stats_line(report))]
    host = [("CUDA", f"{report.cuda}" if report.cuda is not None else "any"),
            ("NVIDIA driver", f"{report.driver} (CUDA up to {report.driver_cuda or '?'})"
             if report.driver else "assumed present"), ("GPU", report.gpu or "not checked")]
    parts = [page.heading(title, when, report.abifit_version, lead, command),
             page.target_box(None, [*checked, *host], target_text=report.target),
             page.legend((_CHOSEN, _REJECTED))]
    if report.conflict is not None:
        parts.append("<section><h2>Why no set fits</h2><ol class=\"derivation\">"
                     + "".join(f"<li>{page.rich(line.strip())}</li>"
                               for line in derivation(report.conflict)) + "</ol></section>")
    else:
        parts[1:1] = [_summary_html(report)]
        parts.append(_pins_html(report))
    return page.document(title, parts)


def _pins_html(report: ResolveReport) -> str:
    ordered = sorted(report.pins, key=lambda p: p.role == "dependency")  # requested first
    rows = "".join(_pin_row(p) for p in ordered)
    check = page.escape(_set_check_line(report.set_check))
    return ("<section><h2>The chosen set</h2>" + page.tools()
            + "<div class=\"scroll\"><table class=\"grid\"><caption>each package with the "
            "release chosen and the newer releases not chosen, the requested ones first"
            "</caption><thead><tr><th scope=\"col\">package</th>"
            "<th scope=\"col\">chosen</th><th scope=\"col\">newer releases</th></tr></thead>"
            f"<tbody>{rows}</tbody></table></div><p>{check}</p></section>")


def _summary_html(report: ResolveReport) -> str:
    """What was asked and what was chosen for it, first: the requested packages' pins."""
    asked = [p for p in report.pins if p.role != "dependency"]
    items = "".join(f"<li><strong>{page.escape(p.name)}</strong> {page.escape(p.version)}"
                    + (f" ({len(p.newer) + p.newer_unlisted} newer not chosen)"
                       if p.newer else " (the newest)") + "</li>" for p in asked)
    others = len(report.pins) - len(asked)
    return ("<section class=\"summary\"><h2>Chosen</h2><ul>" + items + "</ul>"
            + (f"<p>and {others} dependenc{'y' if others == 1 else 'ies'}, below.</p>"
               if others else "") + "</section>")


def _pin_row(pin: Pin) -> str:
    chosen = (f"<td class=\"fits\"><span class=\"mark\" aria-hidden=\"true\">✓</span>"
              f"{page.escape(pin.version)}<div class=\"files\">{page.escape(pin.filename)}"
              "</div></td>")
    if not pin.newer:
        newer = "<td>none newer</td>"
    else:
        more = f"<li>… and {pin.newer_unlisted} more</li>" if pin.newer_unlisted else ""
        items = "".join(f"<li><strong>{page.escape(r.version)}</strong>: {page.rich(r.reason)}"
                        "</li>" for r in pin.newer)
        newer = (f"<td class=\"fails\"><details><summary><span class=\"mark\" "
                 f"aria-hidden=\"true\">✗</span>{len(pin.newer) + pin.newer_unlisted} not "
                 f"chosen</summary><div class=\"detail\"><ul>{items}{more}</ul></div>"
                 "</details></td>")
    return (f"<tr><th scope=\"row\">{page.escape(pin.name)} <span class=\"role\">"
            f"({page.escape(pin.role)})</span></th>{chosen}{newer}</tr>")
