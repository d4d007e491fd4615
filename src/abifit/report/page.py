"""The parts of abifit's HTML pages, for `matrix --html` and any other report of pairwise
verdicts (`resolve --html`): one self-contained document (no network resource, no external CSS
or JavaScript), a heading with the date and abifit's version, the target box, a legend, and the
table cell of a verdict that opens to its details.

Every part is a function of values that returns HTML text, every text in it escaped; a page is
`document(title, [parts...])`. The page reads without JavaScript (a failing cell is a
`<details>`); the script only adds buttons that open or close every failing cell. Colour is
never the only signal: each verdict has a mark and a word (`OUTCOMES`).

    document("ext against host", [
        heading("ext against host", report.checked_at, report.abifit_version),
        target_box(setting, [("ext releases", "1.0, 0.9")]),
        legend(),
        "<table>...", verdict_cell(cell, "ext 1.0", "host"), "...</table>",
    ])
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from packaging.utils import canonicalize_name

from abifit.engines.pairs import Cell, MissingSymbol, OtherForm, Setting


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a verdict looks: its CSS class, its mark, its word and what it means."""

    css: str
    mark: str
    word: str
    meaning: str


FITS = Outcome("fits", "✓", "fits", "the release's native parts load next to this host "
               "release (the NVIDIA driver assumed present); variants it does not pick and parts "
               "that need a prerequisite are noted in the cell")
FAILS = Outcome("fails", "✗", "fails", "an import of the release would fail: open the cell for "
                "the modules, the symbols (with the parameter that changed) and the missing "
                "libraries")
DEGRADED = Outcome("degraded", "◐", "degraded", "every import works, but an extension module "
                   "or library the extension ships would not load next to this host release "
                   "(a part of it is lost): open the cell for what and why")
ERROR = Outcome("error", "!", "error", "the pair could not be checked (a wheel that could not "
                "be read, an index that did not answer)")
NONE = Outcome("none", "—", "not checked", "no wheel of this release and variant for the target")
OUTCOMES = (FITS, DEGRADED, FAILS, ERROR, NONE)
_BY_NAME = {o.css: o for o in OUTCOMES}

STYLE = """
:root{--fits:#dafbe1;--fits-ink:#116329;--fails:#ffebe9;--fails-ink:#a40e26;--error:#fff8c5;
--error-ink:#7d4e00;--none:#f6f8fa;--line:#d0d7de;--muted:#57606a;--degraded:#fff1e5;
--degraded-ink:#953800}
*{box-sizing:border-box}
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem;color:#1f2328;
max-width:100rem}
@media (max-width:40rem){body{margin:.75rem}}
.scroll{overflow-x:auto;max-width:100%}
.command code{background:#f6f8fa;border-radius:3px;padding:0 .2rem}
h1{font-size:1.5rem;margin:0 0 .25rem}h2{font-size:1.1rem;margin:1.5rem 0 .5rem}
h3{font-size:.95rem;margin:.75rem 0 .25rem}
.meta{color:var(--muted);margin:0 0 1rem}
code{font:13px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace;overflow-wrap:anywhere}
.boxes{display:flex;flex-wrap:wrap;gap:1rem 2rem}
.box{border:1px solid var(--line);border-radius:6px;padding:.5rem 1rem;min-width:min(20rem,100%);
max-width:100%}
.box dl{display:grid;grid-template-columns:max-content auto;gap:.15rem 1rem;margin:.25rem 0}
.box dt{font-weight:600}.box dd{margin:0;min-width:0;overflow-wrap:anywhere}
.legend{list-style:none;padding:0;margin:.25rem 0}.legend li{margin:.2rem 0}
.swatch{display:inline-block;min-width:6.5rem;padding:0 .4rem;border:1px solid var(--line);
border-radius:4px;font-weight:600;margin-right:.5rem}
table.grid{border-collapse:collapse;margin:.5rem 0}
.grid th,.grid td{border:1px solid var(--line);padding:.35rem .6rem;vertical-align:top;
text-align:left}
.grid thead th{background:#f6f8fa;white-space:nowrap}
.grid tbody th{white-space:nowrap;background:#f6f8fa}
.grid tbody th.has-fit{background:var(--fits);color:var(--fits-ink)}
.fits{background:var(--fits);color:var(--fits-ink);font-weight:700;
box-shadow:inset 0 0 0 2px var(--fits-ink)}
.fails{background:var(--fails);color:var(--fails-ink)}
.degraded{background:var(--degraded);color:var(--degraded-ink)}
.error{background:var(--error);color:var(--error-ink)}
.none{background:var(--none);color:var(--muted)}
.grid td{min-width:7rem;max-width:44rem}
.mark{display:inline-block;width:1.1em;font-weight:700}
.why{font-weight:400;color:var(--muted)}
details>summary{cursor:pointer;white-space:nowrap}
details[open]>summary{margin-bottom:.4rem}
.detail{color:#1f2328;background:#fff;border:1px solid var(--line);border-radius:4px;
padding:.4rem .7rem;font-weight:400;min-width:min(28rem,75vw)}
.detail ul{margin:.2rem 0 .4rem;padding-left:1.2rem}
.detail li{margin:.2rem 0}
.mangled{color:var(--muted);font-size:12px}
.change{margin:.15rem 0}
.change code{background:#f6f8fa;border-radius:3px;padding:0 .2rem}
.files{color:var(--muted);font-size:12px;margin:0 0 .3rem}
.summary ul{margin:.25rem 0;padding-left:1.2rem}
.tools button{font:inherit;margin-right:.5rem}
"""

SCRIPT = """
(function () {
  var tools = document.querySelector(".tools");
  if (!tools) { return; }
  tools.hidden = false;
  tools.addEventListener("click", function (event) {
    var button = event.target.closest("button[data-open]");
    if (!button) { return; }
    var open = button.getAttribute("data-open") === "1";
    document.querySelectorAll("td.fails details, td.degraded details")
      .forEach(function (d) { d.open = open; });
  });
})();
"""

_CODE = re.compile(r"`([^`]*)`")


def escape(text: str) -> str:
    """Text as HTML, quotes included (symbols hold `<`, `>` and `&`)."""
    return html.escape(text, quote=True)


def rich(text: str) -> str:
    """Escaped text whose `backquoted` spans become <code>: a change as `describe()` says it."""
    return _CODE.sub(lambda m: f"<code>{m.group(1)}</code>", escape(text))


def document(title: str, parts: Iterable[str], style: str = "", script: str = "") -> str:
    """One self-contained page: the shell, its style and script (with a page's own `style`
    and `script` after them), `parts` in order."""
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{escape(title)}</title><style>{STYLE}{style}</style></head>\n<body>\n"
            + "\n".join(parts)
            + f"\n<script>{SCRIPT}{script}</script>\n</body></html>\n")


def heading(title: str, checked_at: str, version: str, lead: str = "",
            command: str = "") -> str:
    """The page's title, when it was checked and by which abifit, the command that made it
    (its flags included; a password in a URL hidden), and a lead sentence."""
    from abifit.remote.network import redact

    when = f"Checked {escape(checked_at)}" if checked_at else "Checked"
    by = f" by abifit {escape(version)}" if version else " by abifit"
    out = f"<header><h1>{escape(title)}</h1><p class=\"meta\">{when}{by}.</p>"
    if command:
        out += (f"<p class=\"meta command\">Made by <code>{escape(redact(command))}</code>"
                "</p>")
    if lead:
        out += f"<p>{escape(lead)}</p>"
    return out + "</header>"


def _dl(rows: Sequence[tuple[str, str]]) -> str:
    return "<dl>" + "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in rows) \
        + "</dl>"


def target_box(setting: Setting | None, checked: Sequence[tuple[str, str]],
               target_text: str = "") -> str:
    """The target (Python, platform, host, driver, GPU) and the versions checked, side by
    side; `checked` is (what, which) per line: ("torch releases", "2.10.0, 2.9.1");
    `target_text` stands for the target when no `setting` is known."""
    target: list[tuple[str, str]] = [("Target", target_text)] if target_text else []
    if setting is not None:
        more = setting.accepted - len(setting.platforms)
        platforms = ", ".join(setting.platforms) + (f" (and {more} older tags it accepts)"
                                                    if more > 0 else "")
        target = [("Python", setting.python), ("Platform", platforms), ("Host", setting.host),
                  ("NVIDIA driver", setting.driver),
                  ("GPU", setting.gpu or "not checked (give --gpu to check kernel images)")]
    return ("<section class=\"boxes\" aria-label=\"what was checked\">"
            f"<div class=\"box target\"><h2>Target</h2>{_dl(target)}</div>"
            f"<div class=\"box versions\"><h2>Versions checked</h2>{_dl(checked)}</div>"
            "</section>")


def legend(outcomes: Sequence[Outcome] = OUTCOMES) -> str:
    """What each verdict's mark, word and colour mean (a matrix's `OUTCOMES` by default)."""
    items = "".join(f"<li><span class=\"swatch {o.css}\"><span class=\"mark\" "
                    f"aria-hidden=\"true\">{o.mark}</span>{escape(o.word)}</span>"
                    f"{escape(o.meaning)}</li>" for o in outcomes)
    return f"<section class=\"legend-box\"><h2>Legend</h2><ul class=\"legend\">{items}</ul>" \
        "</section>"


def tools() -> str:
    """Buttons that open or close every failing cell (shown by the script only)."""
    return ("<p class=\"tools\" hidden><button type=\"button\" data-open=\"1\">Open every "
            "failing cell</button><button type=\"button\" data-open=\"0\">Close them</button>"
            "</p>")


def _mark(outcome: Outcome) -> str:
    return f"<span class=\"mark\" aria-hidden=\"true\">{outcome.mark}</span>"


def reason(cell: Cell) -> str:
    """A failing cell's reason in a few words: "2 symbols", "libcudart.so.13"."""
    parts = []
    if cell.missing or cell.symbols:
        n = len(cell.missing) or len(cell.symbols)
        parts.append(f"{n} symbol" + ("s" if n != 1 else ""))
    if len(cell.sonames) == 1:
        parts.append(cell.sonames[0])
    elif cell.sonames:
        parts.append(f"{len(cell.sonames)} libraries")
    if cell.problems:
        parts.append(cell.problems[0].split(":", 1)[0])
    return ", ".join(parts) or f"{cell.failing_modules} module(s)"


def data_attributes(data: Mapping[str, str]) -> str:
    """` data-NAME="value"` for each item, escaped: what a page's script filters on."""
    return "".join(f" data-{name}=\"{escape(value)}\"" for name, value in data.items())


def verdict_cell(cell: Cell | None, pair: str, host: str,
                 data: Mapping[str, str] | None = None) -> str:
    """The `<td>` of one verdict: fits, fails (a `<details>` that opens to why), error or not
    checked; `pair` names it in words ("sgl-kernel 0.3.21 with torch 2.10.0+cu128"); `data`,
    its `data-` attributes."""
    more = data_attributes(data or {})
    if cell is None:
        return f"<td class=\"none\"{more}>{_mark(NONE)}{NONE.word}</td>"
    outcome = _BY_NAME[cell.outcome]
    title = escape(pair)
    head = f"{_mark(outcome)}{outcome.word}"
    if outcome is FITS:
        return f"<td class=\"fits\" title=\"{title}\"{more}>{head}</td>"
    if outcome is ERROR:
        return (f"<td class=\"error\" title=\"{title}\"{more}><details><summary>{head}"
                f"</summary><div class=\"detail\"><p>{escape(cell.error or '')}</p></div>"
                "</details></td>")
    return (f"<td class=\"{outcome.css}\" title=\"{title}\"{more}><details><summary>{head} "
            f"<span class=\"why\">{escape(reason(cell))}</span></summary>"
            f"{cell_details(cell, pair, host)}</details></td>")


def cell_details(cell: Cell, pair: str, host: str) -> str:
    """What a failing cell opens to: the pair and its wheels, the modules that fail, each
    missing symbol demangled with the other form of its function and the parameter that
    changed, the missing libraries, other problems."""
    files = " + ".join(escape(f) for f in (cell.extension_filename, cell.filename) if f)
    out = [f"<div class=\"detail\"><p><strong>{escape(pair)}</strong></p>",
           f"<p class=\"files\">{files}</p>"]
    if cell.modules:
        out.append(_list("Modules that fail", (f"<code>{escape(m)}</code>"
                                               for m in cell.modules)))
    if cell.missing:
        out.append(_list("Undefined symbols", (_symbol(m, host, cell.label)
                                               for m in cell.missing), "symbols"))
    elif cell.symbols:
        out.append(_list("Undefined symbols", (f"<code>{escape(s)}</code>"
                                               for s in cell.symbols), "symbols"))
    if cell.sonames:
        out.append(_list("Missing libraries", (f"<code>{escape(s)}</code>"
                                               for s in cell.sonames)))
    if cell.problems:
        out.append(_list("Other problems", (escape(p) for p in cell.problems)))
    return "".join(out) + "</div>"


def _list(title: str, items: Iterable[str], css: str = "") -> str:
    klass = f" class=\"{css}\"" if css else ""
    return f"<h3>{escape(title)}</h3><ul{klass}>" + "".join(f"<li>{i}</li>" for i in items) \
        + "</ul>"


def _definer(other: OtherForm, host: str, label: str) -> str:
    """Who defines the other form: the host release (and its file), or the file that does."""
    where = f" (<code>{escape(other.where)}</code>)" if other.where else ""
    if other.owner and canonicalize_name(other.owner) == canonicalize_name(host):
        return f"{escape(host)} {escape(label)}{where}"
    if other.owner:
        return f"{escape(other.owner)}{where}"
    return f"<code>{escape(other.where)}</code>" if other.where else "the process"


def _symbol(missing: MissingSymbol, host: str, label: str) -> str:
    version = f" at version <code>{escape(missing.version)}</code>" if missing.version else ""
    out = f"<code class=\"symbol\">{escape(missing.demangled)}</code>{version}"
    if missing.demangled != missing.symbol:
        out += f"<div class=\"mangled\">{escape(missing.symbol)}</div>"
    for other in missing.instead:
        out += f"<p class=\"change\">{_definer(other, host, label)} defines " \
            f"<code>{escape(other.demangled)}</code> instead: {rich(other.change)}</p>"
    if missing.version is None and not missing.instead:
        out += "<p class=\"change\">no other form of it in the process</p>"
    needed = ", ".join(missing.modules)
    return out + f"<div class=\"files\">needed by {escape(needed)}</div>"
