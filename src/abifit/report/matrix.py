"""`abifit matrix` rendered: text (a row per host wheel for one extension as given; a grid of
extension releases by host wheels with --versions), one versioned JSON document, or one
self-contained HTML page made of the parts in `report.page`; and a grid of matrices (several
extensions or Pythons, `GridReport`) the same three ways: each matrix's text under a heading
and a summary line, the `matrix.grid` document, one page with filters."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from packaging.version import Version

from abifit.engines.matrix import Cell, GridReport, MatrixReport, extension_release
from abifit.engines.pairs import MissingSymbol, Setting, labels
from abifit.report import page
from abifit.report.json import JsonObject, schema_version

_MARK = {"fits": "✓ fits", "degraded": "◐", "fails": "✗", "error": "! error"}


def _label(cell: Cell) -> str:
    return cell.label


def _outcome(cell: Cell) -> str:
    return cell.outcome


def _row_name(report: MatrixReport, row: str) -> str:
    return f"{report.extension} {row}" if report.rows else row


# --- text ------------------------------------------------------------------------------------


def matrix_text(report: MatrixReport) -> str:
    """The text rendering of `abifit matrix`: for one extension as given, one aligned row per
    host wheel, then the fits; for several releases, the grid, why the failing cells fail,
    then the fitting pairs."""
    if report.rows:
        return _grid_text(report)
    rows = [(f"{report.host} {_label(c)}", _outcome(c), str(len(c.symbols)), str(len(c.sonames)),
             c.error or c.first or (c.problems[0] if c.problems else "")) for c in report.cells]
    head = (report.host, "verdict", "symbols", "sonames", "first problem")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]
    lines = [f"{report.extension} against {report.host} ({report.target})", ""]
    for row in [head, *rows]:
        lines.append("  ".join(v.ljust(w) for v, w in zip(row[:4], widths, strict=True))
                     + "  " + row[4])
    fits = [_label(c) for c in report.fits]
    lines += ["", f"fits: {', '.join(fits)}" if fits else "fits: none"]
    return "\n".join(lines) + "\n"


def _short(cell: Cell | None) -> str:
    if cell is None:
        return "—"
    if cell.outcome not in ("fails", "degraded"):
        return _MARK[cell.outcome]
    return f"{_MARK[cell.outcome]} {page.reason(cell)}"


def _grid_text(report: MatrixReport) -> str:
    columns = labels(report.cells)
    table = [[f"{report.extension} \\ {report.host}", *columns]]
    for row, cells in report.grid:
        by_label = {c.label: c for c in cells}
        table.append([row, *(_short(by_label.get(label)) for label in columns)])
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    lines = [f"{report.extension} {_span(report.rows)} against {report.host} "
             f"{_span(tuple(columns))} ({report.target})", ""]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip()
              for r in table]
    why = _why(report)
    if why:
        lines += ["", "why:", *why]
    fitting = _fitting_rows(report)
    lines += ["", "fits: " + ("; ".join(f"{row} with {report.host} {', '.join(hosts)}"
                                        for row, hosts in fitting) if fitting else "none")]
    return "\n".join(lines) + "\n"


def _span(labels_: Sequence[str]) -> str:
    if not labels_:
        return ""
    return labels_[0] if len(labels_) == 1 else f"{labels_[-1]}..{labels_[0]}"


def _first_reason(cell: Cell) -> str:
    """The first problem of a failing cell in one line, with the parameter that changed."""
    if cell.missing:
        first = cell.missing[0]
        text = _symbol_line(first)
        more = len(cell.missing) - 1
        return text + (f" (+{more} more symbol{'s' if more > 1 else ''})" if more else "")
    if cell.sonames:
        return f"missing {', '.join(cell.sonames)}"
    return cell.problems[0] if cell.problems else cell.first or "fails"


def _symbol_line(missing: MissingSymbol) -> str:
    text = missing.demangled + (f" at version {missing.version}" if missing.version else "")
    if missing.instead:
        text += f": defined as {missing.instead[0].demangled} ({missing.instead[0].change})"
    return text


def _why(report: MatrixReport) -> list[str]:
    """One line per distinct first problem, with the pairs that have it: per host wheel, its
    rows (a run of neighbouring rows as `oldest..newest`)."""
    groups: dict[str, dict[str, list[str]]] = {}
    for row, cells in report.grid:
        for cell in cells:
            if cell.outcome in ("fails", "degraded"):
                reason = _first_reason(cell) + (" (degraded: the imports work)"
                                                if cell.outcome == "degraded" else "")
            elif cell.outcome == "error":
                reason = f"error: {cell.error}"
            else:
                continue
            groups.setdefault(reason, {}).setdefault(cell.label, []).append(row)
    order = [row for row, _cells in report.grid]
    return [f"  {'; '.join(f'{_runs(rows, order)} with {host}' for host, rows in hosts.items())}"
            f": {reason}" for reason, hosts in groups.items()]


def _runs(rows: list[str], order: list[str]) -> str:
    """`rows` (in `order`) with each run of neighbours in `order` written `last..first`."""
    runs: list[list[str]] = []
    for row in rows:
        if runs and order.index(row) == order.index(runs[-1][-1]) + 1:
            runs[-1].append(row)
        else:
            runs.append([row])
    return ", ".join(r[0] if len(r) == 1 else f"{r[-1]}..{r[0]}" for r in runs)


def _fitting_rows(report: MatrixReport) -> list[tuple[str, list[str]]]:
    out = []
    for row, cells in report.grid:
        hosts = [c.label for c in cells if c.fits]
        if hosts:
            out.append((row, hosts))
    return out


# --- JSON ------------------------------------------------------------------------------------


def matrix_json(report: MatrixReport, transfer: dict[str, int] | None) -> JsonObject:
    """The `--json` document of `abifit matrix`."""
    return {
        "schema_version": schema_version("matrix"),
        "command": "matrix",
        "extension": report.extension,
        "host": report.host,
        "target": report.target,
        "versions": report.versions,
        "against": report.against,
        "checked_at": report.checked_at,
        "abifit_version": report.abifit_version,
        **_cells_json(report),
        "transfer": transfer,
    }


def _cells_json(report: MatrixReport) -> JsonObject:
    """What a matrix document and each matrix of a grid's document hold alike: the setting,
    the releases, a row per cell and what fits."""
    return {
        "setting": _setting_json(report.setting),
        "extension_releases": list(report.rows),
        "host_releases": labels(report.cells),
        "rows": [_row_json(c) for c in report.cells],
        "fits": list(dict.fromkeys(_label(c) for c in report.fits)),
        "fitting_pairs": [{"release": c.release, "host": c.label} for c in report.fits],
    }


def _setting_json(setting: Setting | None) -> JsonObject | None:
    return None if setting is None else {
        "python": setting.python, "platforms": list(setting.platforms),
        "accepted_platforms": setting.accepted, "host": setting.host,
        "driver": setting.driver, "gpu": setting.gpu}


def _row_json(cell: Cell) -> JsonObject:
    return {"version": cell.version, "variant": cell.variant, "filename": cell.filename,
            "release": cell.release, "extension_filename": cell.extension_filename,
            "verdict": _outcome(cell), "failing_modules": cell.failing_modules,
            "failing_symbols": len(cell.symbols), "failing_sonames": len(cell.sonames),
            "first": cell.first, "symbols": list(cell.symbols), "sonames": list(cell.sonames),
            "modules": list(cell.modules), "missing": [_missing_json(m) for m in cell.missing],
            "problems": list(cell.problems), "notes": list(cell.notes), "error": cell.error}


def _missing_json(missing: MissingSymbol) -> JsonObject:
    return {"symbol": missing.symbol, "demangled": missing.demangled,
            "version": missing.version, "modules": list(missing.modules),
            "instead": [{"symbol": o.symbol, "demangled": o.demangled, "change": o.change,
                         "where": o.where, "owner": o.owner} for o in missing.instead]}


# --- HTML ------------------------------------------------------------------------------------


def matrix_html(report: MatrixReport, command: str = "") -> str:
    """One self-contained page: heading, target and versions checked, legend, what fits, and
    the grid (a row per extension release, a column per host release, a sub-column per
    variant), each failing cell opening to why."""
    title = f"{report.extension} against {report.host}"
    fits = len(report.fits)
    lead = (f"{fits} of {len(report.cells)} pairs fit." if report.rows
            else f"{fits} of {len(report.cells)} {report.host} wheels fit.")
    return page.document(title, [
        page.heading(title, report.checked_at, report.abifit_version, lead, command),
        page.target_box(report.setting, _checked(report),
                        "" if report.setting else report.target),
        page.legend(),
        _fitting_html(report),
        _grid_html(report),
    ])


def _checked(report: MatrixReport) -> list[tuple[str, str]]:
    hosts = labels(report.cells)
    host_line = ", ".join(hosts) + (f"  ({report.against})" if report.against else "")
    if report.rows:
        spec = f"  ({report.versions})" if report.versions else ""
        ext = (f"{report.extension} releases", ", ".join(report.rows) + spec)
    else:
        ext = ("Extension", report.extension)
    return [ext, (f"{report.host} releases", host_line)]


def _fitting_html(report: MatrixReport) -> str:
    fitting = _fitting_rows(report)
    if not fitting:
        return ("<section class=\"summary\"><h2>What fits</h2><p><strong>No pair fits.</strong>"
                " Open a failing cell to see why.</p></section>")
    items = "".join(f"<li><strong>{page.escape(_row_name(report, row))}</strong> with "
                    f"{page.escape(report.host)} <span class=\"fits-list\">"
                    f"{page.escape(', '.join(hosts))}</span></li>" for row, hosts in fitting)
    return f"<section class=\"summary\"><h2>What fits</h2><ul>{items}</ul></section>"


def _variant_header(label: str, attributes: str = "") -> str:
    """A sub-column's header: the local label (`+cu130`), or "plain" for the release without
    one (its title says so)."""
    if label:
        return f"<th scope=\"col\"{attributes}>{page.escape('+' + label)}</th>"
    return (f"<th scope=\"col\" title=\"the release without a local version label\""
            f"{attributes}>plain</th>")


def _grid_html(report: MatrixReport) -> str:
    return (f"<section><h2>The grid</h2>{page.tools()}<div class=\"scroll\">"
            f"{_table_html(report)}</div></section>")


def _table_html(report: MatrixReport, data: bool = False) -> str:
    """The table of a matrix; with `data`, each host release's cells and headers carry its
    release and variant (`data-release`, `data-variant`) for a grid page's filters."""
    columns = report.columns
    split = any(len(vs) > 1 or vs != ("",) for _v, vs in columns)
    corner = f"{report.extension} ↓ · {report.host} →" if report.rows else report.host
    rowspan = " rowspan=\"2\"" if split else ""

    def attributes(version: str, variant: str | None = None) -> str:
        if not data:
            return ""
        shown = {"release": version} if variant is None else {"release": version,
                                                               "variant": variant}
        return page.data_attributes(shown)

    head = f"<tr><th scope=\"col\"{rowspan}>{page.escape(corner)}</th>"
    head += "".join(f"<th scope=\"{'colgroup' if split else 'col'}\" colspan=\"{len(vs)}\""
                    f"{attributes(v, None if split else vs[0])}>"
                    f"{page.escape(report.host)} {page.escape(v)}</th>" for v, vs in columns)
    head += "</tr>"
    if split:
        head += "<tr>" + "".join(_variant_header(s, attributes(v, s)) for v, vs in columns
                                 for s in vs) + "</tr>"
    body = "".join(_row_html(report, row, cells, data) for row, cells in report.grid)
    caption = (f"{report.extension} releases (rows) against {report.host} releases (columns)"
               if report.rows else f"{report.extension} against {report.host} releases")
    return (f"<table class=\"grid\"><caption>{page.escape(caption)}</caption><thead>{head}"
            f"</thead><tbody>{body}</tbody></table>")


def _row_html(report: MatrixReport, row: str, cells: tuple[Cell, ...],
              data: bool = False) -> str:
    by_column = {(c.version, c.variant): c for c in cells}
    css = " class=\"has-fit\"" if any(c.fits for c in cells) else ""
    mark = " <span aria-label=\"fits some\">✓</span>" if css else ""
    out = f"<tr><th scope=\"row\"{css}>{page.escape(row)}{mark}</th>"
    for version, variants in report.columns:
        for variant in variants:
            cell = by_column.get((version, variant))
            label = version + (f"+{variant}" if variant else "")
            pair = f"{_row_name(report, row)} with {report.host} {label}"
            out += page.verdict_cell(cell, pair, report.host,
                                     {"release": version, "variant": variant} if data else None)
    return out + "</tr>"


# --- a grid of matrices ----------------------------------------------------------------------


def _where(report: MatrixReport) -> str:
    return f"{report.extension} on Python {report.python}"


def grid_summary(report: GridReport) -> str:
    """One sentence: how many cells fit in how many matrices, and the matrices in which no
    host wheel fits or none could be checked."""
    cells = report.cells
    counted = len(report.matrices)
    out = (f"{len(report.fits)} of {len(cells)} cells fit in {counted} "
           f"matri{'x' if counted == 1 else 'ces'} ({', '.join(report.extensions)} on Python "
           f"{', '.join(report.pythons)} against {report.host})")
    if not report.without_fit and not report.unchecked:
        return out + f"; each matrix has a {report.host} wheel that fits"
    if report.without_fit:
        out += (f"; no {report.host} wheel fits "
                + ", ".join(_where(m) for m in report.without_fit))
    if report.unchecked:
        out += "; not checked: " + ", ".join(_where(m) for m in report.unchecked)
    return out


def grid_text(report: GridReport) -> str:
    """The text of a grid: each matrix's text (`matrix_text`) under a heading naming its
    extension and Python, one after another, then the summary line."""
    parts = []
    for m in report.matrices:
        body = matrix_text(m) if m.error is None else (
            f"{m.extension} against {m.host} ({m.target})\n\nnot checked: {m.error}\n")
        parts.append(f"=== {_where(m)} ===\n{body}")
    return "\n".join(parts) + f"\ngrid: {grid_summary(report)}\n"


def grid_json(report: GridReport, transfer: dict[str, int] | None) -> JsonObject:
    """The `--json` document of a grid (`schemas/matrix.grid.schema.json`): each matrix as a
    matrix document holds it, then every cell in one flat list."""
    return {
        "schema_version": schema_version("matrix.grid"),
        "command": "matrix",
        "document": "matrix.grid",
        "extensions": list(report.extensions),
        "pythons": list(report.pythons),
        "host": report.host,
        "against": report.against,
        "versions": report.versions,
        "checked_at": report.checked_at,
        "abifit_version": report.abifit_version,
        "matrices": [_part_json(m) for m in report.matrices],
        "cells": [{"matrix": n, "package": m.package, "release": extension_release(c),
                   "host_release": c.version, "variant": c.variant, "python": m.python,
                   "verdict": _outcome(c)}
                  for n, m in enumerate(report.matrices) for c in m.cells],
        "transfer": transfer,
    }


def _part_json(report: MatrixReport) -> JsonObject:
    return {
        "extension": report.extension,
        "package": report.package,
        "python": report.python,
        "target": report.target,
        **_cells_json(report),
        "error": report.error,
    }


GRID_STYLE = """
.filters fieldset{display:inline-block;vertical-align:top;border:1px solid var(--line);
border-radius:6px;margin:0 1rem .5rem 0;padding:.25rem .75rem}
.filters legend{font-weight:600}
.filters label{margin-right:.75rem;white-space:nowrap}
section.matrix{margin-top:1.5rem}
.not-checked{color:var(--error-ink)}
"""

# the filters: each matrix shown when its package and Python are chosen, each host release's
# cells and headers when its release and variant are; a release's heading spans the sub-columns
# left; a matrix with no cell left is hidden too. Without the script, the form stays hidden and
# everything is shown.
GRID_SCRIPT = """
(function () {
  var form = document.querySelector("form.filters");
  if (!form) { return; }
  form.hidden = false;
  function chosen(name) {
    var out = {};
    form.querySelectorAll("input[name='" + name + "']").forEach(function (input) {
      if (input.checked) { out[input.value] = true; }
    });
    return out;
  }
  function apply() {
    var packages = chosen("package"), pythons = chosen("python"),
      releases = chosen("release"), variants = chosen("variant");
    var matrices = document.querySelectorAll("section.matrix"), shown = 0;
    matrices.forEach(function (section) {
      section.querySelectorAll("[data-release]").forEach(function (c) {
        var variant = c.getAttribute("data-variant");
        c.hidden = !(releases[c.getAttribute("data-release")] &&
                     (variant === null || variants[variant]));
      });
      var spans = {};
      section.querySelectorAll("thead th[data-variant]").forEach(function (th) {
        var release = th.getAttribute("data-release");
        spans[release] = (spans[release] || 0) + (th.hidden ? 0 : 1);
      });
      section.querySelectorAll("thead th[data-release]:not([data-variant])")
        .forEach(function (th) {
          var span = spans[th.getAttribute("data-release")] || 0;
          th.hidden = span === 0;
          if (span) { th.colSpan = span; }
        });
      var table = section.querySelector("table");
      var left = section.querySelectorAll("td[data-release]:not([hidden])").length;
      section.hidden = !(packages[section.getAttribute("data-package")] &&
                         pythons[section.getAttribute("data-python")]) ||
                       (table !== null && left === 0);
      shown += section.hidden ? 0 : 1;
    });
    form.querySelector("output").textContent =
      shown + " of " + matrices.length + " matrices shown";
  }
  form.addEventListener("change", apply);
  apply();
})();
"""


def grid_html(report: GridReport, command: str = "") -> str:
    """One self-contained page of the whole grid: heading, target and versions checked,
    legend, the filters (by package, host release, variant and Python; shown by the script),
    then each matrix under its heading with what fits in it, each failing cell opening to
    why."""
    title = f"{', '.join(report.extensions)} against {report.host}"
    settings = [m.setting for m in report.matrices if m.setting is not None]
    setting = None if not settings else replace(settings[0], python=", ".join(
        dict.fromkeys(s.python for s in settings)))
    targets = ", ".join(dict.fromkeys(m.target for m in report.matrices))
    summary = grid_summary(report)
    return page.document(title, [
        page.heading(title, report.checked_at, report.abifit_version,
                     summary[0].upper() + summary[1:] + ".", command),
        page.target_box(setting, _grid_checked(report), "" if setting else targets),
        page.legend(),
        _filters_html(report),
        page.tools(),
        *(_part_html(m) for m in report.matrices),
    ], GRID_STYLE, GRID_SCRIPT)


def _newest_first(versions: Sequence[str]) -> list[str]:
    return sorted(dict.fromkeys(versions), key=Version, reverse=True)


def _grid_checked(report: GridReport) -> list[tuple[str, str]]:
    spec = f"  (releases {report.versions})" if report.versions else ""
    hosts = ", ".join(_newest_first([c.label for c in report.cells]))
    read: dict[str, list[str]] = {e: [] for e in report.extensions}
    for m in report.matrices:  # the releases whose wheels were read, for each extension
        read.setdefault(m.extension, []).extend(
            r for r in map(extension_release, m.cells) if r)
    named = (f"{e} ({', '.join(_newest_first(r))})"
             if r and not e.endswith(f"=={r[0]}") else e for e, r in read.items())
    return [("Extensions", ", ".join(named) + spec),
            (f"{report.host} releases", hosts + f"  ({report.against})"),
            ("Pythons", ", ".join(report.pythons))]


def _choices(name: str, title: str, values: Sequence[tuple[str, str]]) -> str:
    """A fieldset of checkboxes, each (value, its label), all checked."""
    boxes = "".join(f"<label><input type=\"checkbox\" name=\"{name}\" value=\""
                    f"{page.escape(value)}\" checked> {page.escape(label)}</label>"
                    for value, label in values)
    return f"<fieldset><legend>{page.escape(title)}</legend>{boxes}</fieldset>"


def _filters_html(report: GridReport) -> str:
    cells = report.cells
    variants = sorted(dict.fromkeys(c.variant for c in cells))
    return ("<form class=\"filters\" hidden aria-label=\"filters\"><h2>Show</h2>"
            + _choices("package", "Package", [(p, p) for p in dict.fromkeys(
                m.package for m in report.matrices)])
            + _choices("release", f"{report.host} release",
                       [(v, v) for v in _newest_first([c.version for c in cells])])
            + _choices("variant", "Variant", [(v, f"+{v}" if v else "plain")
                                              for v in variants])
            + _choices("python", "Python", [(p, p) for p in report.pythons])
            + "<p><output></output></p></form>")


def _part_html(report: MatrixReport) -> str:
    """One matrix of the grid: its heading, what fits in it, and its table."""
    data = page.data_attributes({"package": report.package, "python": report.python})
    head = (f"<section class=\"matrix\"{data}><h2>{page.escape(_where(report))}</h2>"
            f"<p class=\"meta\">{page.escape(report.target)}</p>")
    if report.error is not None:
        return (head + f"<p class=\"not-checked\"><strong>Not checked:</strong> "
                f"{page.escape(report.error)}</p></section>")
    fitting = _fitting_rows(report)
    fits = "; ".join(f"{_row_name(report, row)} with {report.host} {', '.join(hosts)}"
                     for row, hosts in fitting)
    lead = (f"<p>{len(report.fits)} of {len(report.cells)} pairs fit"
            + (f": <strong>{page.escape(fits)}</strong>.</p>" if fits else ".</p>"))
    return (head + lead + f"<div class=\"scroll\">{_table_html(report, data=True)}</div>"
            "</section>")
