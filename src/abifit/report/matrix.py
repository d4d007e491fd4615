"""`abifit matrix` rendered: text (a row per host wheel for one extension as given; a grid of
extension releases by host wheels with --versions), one versioned JSON document, or one
self-contained HTML page made of the parts in `report.page`."""

from __future__ import annotations

from collections.abc import Sequence

from abifit.engines.matrix import Cell, MatrixReport
from abifit.engines.pairs import MissingSymbol, labels
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
    setting = report.setting
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
        "setting": None if setting is None else {
            "python": setting.python, "platforms": list(setting.platforms),
            "accepted_platforms": setting.accepted, "host": setting.host,
            "driver": setting.driver, "gpu": setting.gpu},
        "extension_releases": list(report.rows),
        "host_releases": labels(report.cells),
        "rows": [_row_json(c) for c in report.cells],
        "fits": list(dict.fromkeys(_label(c) for c in report.fits)),
        "fitting_pairs": [{"release": c.release, "host": c.label} for c in report.fits],
        "transfer": transfer,
    }


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


def _variant_header(label: str) -> str:
    """A sub-column's header: the local label (`+cu130`), or "plain" for the release without
    one (its title says so)."""
    if label:
        return f"<th scope=\"col\">{page.escape('+' + label)}</th>"
    return "<th scope=\"col\" title=\"the release without a local version label\">plain</th>"


def _grid_html(report: MatrixReport) -> str:
    columns = report.columns
    split = any(len(vs) > 1 or vs != ("",) for _v, vs in columns)
    corner = f"{report.extension} ↓ · {report.host} →" if report.rows else report.host
    rowspan = " rowspan=\"2\"" if split else ""
    head = f"<tr><th scope=\"col\"{rowspan}>{page.escape(corner)}</th>"
    head += "".join(f"<th scope=\"{'colgroup' if split else 'col'}\" colspan=\"{len(vs)}\">"
                    f"{page.escape(report.host)} {page.escape(v)}</th>" for v, vs in columns)
    head += "</tr>"
    if split:
        head += "<tr>" + "".join(_variant_header(s) for _v, vs in columns for s in vs) + "</tr>"
    body = "".join(_row_html(report, row, cells) for row, cells in report.grid)
    caption = (f"{report.extension} releases (rows) against {report.host} releases (columns)"
               if report.rows else f"{report.extension} against {report.host} releases")
    return (f"<section><h2>The grid</h2>{page.tools()}<div class=\"scroll\"><table "
            f"class=\"grid\"><caption>{page.escape(caption)}</caption><thead>{head}</thead>"
            f"<tbody>{body}</tbody></table></div></section>")


def _row_html(report: MatrixReport, row: str, cells: tuple[Cell, ...]) -> str:
    by_column = {(c.version, c.variant): c for c in cells}
    css = " class=\"has-fit\"" if any(c.fits for c in cells) else ""
    mark = " <span aria-label=\"fits some\">✓</span>" if css else ""
    out = f"<tr><th scope=\"row\"{css}>{page.escape(row)}{mark}</th>"
    for version, variants in report.columns:
        for variant in variants:
            cell = by_column.get((version, variant))
            label = version + (f"+{variant}" if variant else "")
            pair = f"{_row_name(report, row)} with {report.host} {label}"
            out += page.verdict_cell(cell, pair, report.host)
    return out + "</tr>"
