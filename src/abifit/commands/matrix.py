"""`abifit matrix EXT --against HOST_SPEC`: which host versions does an extension fit?

One `check` per host release (and per wheel variant of a release, such as `+cu128`/`+cu130` on an
extra index), run in parallel within a limit over one shared cache. A cell fits when the
extension's modules would load; the NVIDIA driver is assumed present (the question is the ABI
between the wheels, not this machine). Rendered as a text table, JSON, or one self-contained
HTML page.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from abifit.commands.check import check
from abifit.errors import AbifitError, UsageError
from abifit.formats.demangle import demangle
from abifit.host.profile import HostProfile
from abifit.sim.findings import FindingKind

if TYPE_CHECKING:
    from packaging.version import Version

    from abifit.commands.check import CheckReport
    from abifit.remote.index import IndexFile, Target
    from abifit.remote.wheels import RemoteContext

Progress = Callable[[str], None]

SYMBOL_KINDS = ("undefined-symbol", "missing-version")


@dataclass(frozen=True, slots=True)
class Cell:
    """The answer for one host wheel."""

    version: str
    variant: str  # the local label ("cu128"), or "" for none
    filename: str
    fits: bool
    failing_modules: int
    symbols: tuple[str, ...]  # failing symbols, demangled, in order found
    sonames: tuple[str, ...]  # missing libraries
    notes: tuple[str, ...]
    error: str | None = None

    @property
    def first(self) -> str | None:
        return (self.symbols or self.sonames or (None,))[0]


@dataclass(frozen=True, slots=True)
class MatrixReport:
    extension: str
    host: str
    target: str
    cells: tuple[Cell, ...]

    @property
    def fits(self) -> tuple[Cell, ...]:
        return tuple(c for c in self.cells if c.fits)


def host_wheels(against: str, ctx: RemoteContext) -> tuple[str, list[IndexFile]]:
    """The host project's name and one wheel per release and variant that fits the target,
    newest first."""
    from packaging.requirements import InvalidRequirement, Requirement

    from abifit.remote.index import no_matching_wheel, select

    try:
        requirement = Requirement(against)
    except InvalidRequirement as e:
        raise UsageError(f"invalid requirement {against!r}: {str(e).splitlines()[0]}") from e
    files = ctx.index.project_files(requirement.name)
    seen: dict[Version, IndexFile] = {}
    for candidate in select(files, requirement, ctx.target, prereleases=ctx.prereleases):
        seen.setdefault(candidate.version, candidate.file)
    if not seen:
        raise no_matching_wheel(files, requirement, ctx.target, prereleases=ctx.prereleases)
    return requirement.name, list(seen.values())


def cell_of(file: IndexFile, report: CheckReport | None, error: str | None) -> Cell:
    wheel = file.wheel()
    assert wheel is not None
    version = wheel[1]
    base = Cell(version.public, version.local or "", file.filename, False, 0, (), (), ())
    if report is None:
        return replace(base, error=error)
    symbols = tuple(dict.fromkeys(demangle(f.symbol) for f in report.findings
                                  if f.kind in SYMBOL_KINDS and f.symbol))
    sonames = tuple(dict.fromkeys(f.library for f in report.findings
                                  if f.kind == FindingKind.MISSING_LIBRARY and f.library))
    return replace(base, fits=report.verdict != "fails", failing_modules=report.failing,
                   symbols=symbols, sonames=sonames, notes=report.notes)


def matrix(extension: str, against: str, ctx: RemoteContext, target: Target,
           host: HostProfile, progress: Progress, jobs: int = 4,
           executable: str | None = None) -> MatrixReport:
    """Check `extension` against every host wheel `against` selects, `jobs` at a time."""
    name, files = host_wheels(against, ctx)
    profile = replace(host, assume_driver=host.assume_driver or "assumed")
    _prefetch(extension, ctx, progress)

    def one(file: IndexFile) -> Cell:
        progress(f"checking with {file.filename}")
        try:
            report = check([extension], [file], ctx, target, profile, lambda _m: None,
                           executable)
        except AbifitError as e:
            return cell_of(file, None, str(e).splitlines()[0])
        return cell_of(file, report, None)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        cells = list(pool.map(one, files))
    return MatrixReport(extension, name, str(target), tuple(cells))


def _prefetch(extension: str, ctx: RemoteContext, progress: Progress) -> None:
    """Read the extension's views once, before the parallel checks share them via the cache."""
    from abifit.commands.check import Gatherer, Role

    wheel = Gatherer(ctx, progress).open(extension, Role.TARGET)
    source = wheel.source if wheel is not None else None
    if wheel is not None and source is not None:
        for member in source.members():
            progress(f"{wheel.filename}: {member.path}")
            source.view(member)


# --- rendering -------------------------------------------------------------------------------


def _label(cell: Cell) -> str:
    return cell.version + (f"+{cell.variant}" if cell.variant else "")


def _outcome(cell: Cell) -> str:
    if cell.error:
        return "error"
    return "fits" if cell.fits else "fails"


def matrix_text(report: MatrixReport) -> str:
    rows = [(f"{report.host} {_label(c)}", _outcome(c), str(len(c.symbols)), str(len(c.sonames)),
             c.error or c.first or "") for c in report.cells]
    head = (report.host, "verdict", "symbols", "sonames", "first problem")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]
    lines = [f"{report.extension} against {report.host} ({report.target})", ""]
    for row in [head, *rows]:
        lines.append("  ".join(v.ljust(w) for v, w in zip(row[:4], widths, strict=True))
                     + "  " + row[4])
    fits = [_label(c) for c in report.fits]
    lines += ["", f"fits: {', '.join(fits)}" if fits else "fits: none"]
    return "\n".join(lines) + "\n"


def matrix_json(report: MatrixReport, transfer: dict[str, int] | None) -> dict[str, object]:
    return {
        "schema_version": 1,
        "command": "matrix",
        "extension": report.extension,
        "host": report.host,
        "target": report.target,
        "rows": [{"version": c.version, "variant": c.variant, "filename": c.filename,
                  "verdict": _outcome(c), "failing_modules": c.failing_modules,
                  "failing_symbols": len(c.symbols), "failing_sonames": len(c.sonames),
                  "first": c.first, "symbols": list(c.symbols), "sonames": list(c.sonames),
                  "notes": list(c.notes), "error": c.error} for c in report.cells],
        "fits": [_label(c) for c in report.fits],
        "transfer": transfer,
    }


_STYLE = """body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse}
td,th{border:1px solid #999;padding:.4em .7em;vertical-align:top;text-align:left}
.fits{background:#c8f0c8}.fails{background:#f6c6c6}.error{background:#eee}.none{background:#fff}
details{max-width:60em}summary{cursor:pointer}li{font-family:monospace;font-size:90%}"""


def _cell_html(cell: Cell | None) -> str:
    if cell is None:
        return '<td class="none">—</td>'
    outcome = _outcome(cell)
    title = html.escape(cell.filename)
    if outcome == "fits":
        return f'<td class="fits" title="{title}">fits</td>'
    if outcome == "error":
        return f'<td class="error" title="{title}">{html.escape(cell.error or "")}</td>'
    items = "".join(f"<li>{html.escape(s)}</li>" for s in (*cell.sonames, *cell.symbols))
    summary = f"fails: {len(cell.symbols)} symbol(s), {len(cell.sonames)} soname(s)"
    return (f'<td class="fails" title="{title}"><details><summary>{summary}</summary>'
            f"<ul>{items}</ul></details></td>")


def matrix_html(report: MatrixReport) -> str:
    """One self-contained page: a row per host release, a column per variant."""
    variants = list(dict.fromkeys(c.variant for c in report.cells))
    versions = list(dict.fromkeys(c.version for c in report.cells))
    grid = {(c.version, c.variant): c for c in report.cells}
    head = "".join(f"<th>{html.escape(v or '(no label)')}</th>" for v in variants)
    rows = "".join(
        f"<tr><th>{html.escape(report.host)} {html.escape(v)}</th>"
        + "".join(_cell_html(grid.get((v, variant))) for variant in variants) + "</tr>"
        for v in versions)
    title = html.escape(f"{report.extension} against {report.host}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title>"
            f"<style>{_STYLE}</style></head><body><h1>{title}</h1>"
            f"<p>{html.escape(report.target)}</p><table><tr><th></th>{head}</tr>{rows}</table>"
            "</body></html>\n")
