"""`abifit matrix` rendered: a text table with a row per host wheel, one versioned JSON
document, or one self-contained HTML page with a row per host release and a column per
variant."""

from __future__ import annotations

import html

from abifit.commands.matrix import Cell, MatrixReport
from abifit.report.json import SCHEMA_VERSION, JsonObject

_STYLE = """body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse}
td,th{border:1px solid #999;padding:.4em .7em;vertical-align:top;text-align:left}
.fits{background:#c8f0c8}.fails{background:#f6c6c6}.error{background:#eee}.none{background:#fff}
details{max-width:60em}summary{cursor:pointer}li{font-family:monospace;font-size:90%}"""


def _label(cell: Cell) -> str:
    return cell.version + (f"+{cell.variant}" if cell.variant else "")


def _outcome(cell: Cell) -> str:
    if cell.error:
        return "error"
    return "fits" if cell.fits else "fails"


def matrix_text(report: MatrixReport) -> str:
    """The text rendering of `abifit matrix`: one aligned row per host wheel, then the fits."""
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


def matrix_json(report: MatrixReport, transfer: dict[str, int] | None) -> JsonObject:
    """The `--json` document of `abifit matrix`."""
    return {
        "schema_version": SCHEMA_VERSION,
        "command": "matrix",
        "extension": report.extension,
        "host": report.host,
        "target": report.target,
        "rows": [_row_json(c) for c in report.cells],
        "fits": [_label(c) for c in report.fits],
        "transfer": transfer,
    }


def _row_json(cell: Cell) -> JsonObject:
    return {"version": cell.version, "variant": cell.variant, "filename": cell.filename,
            "verdict": _outcome(cell), "failing_modules": cell.failing_modules,
            "failing_symbols": len(cell.symbols), "failing_sonames": len(cell.sonames),
            "first": cell.first, "symbols": list(cell.symbols), "sonames": list(cell.sonames),
            "notes": list(cell.notes), "error": cell.error}


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
