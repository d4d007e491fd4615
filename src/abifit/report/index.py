"""`abifit index add|export|import|info` rendered as text, or as one versioned JSON document
(`schemas/index.schema.json`: one document shape per action, told apart by `action`)."""

from __future__ import annotations

from abifit.engines.index import IndexAddReport, IndexTransferReport
from abifit.remote.store import StoreInfo
from abifit.report.json import JsonObject, schema_version

IndexReport = IndexAddReport | IndexTransferReport | StoreInfo


def index_text(report: IndexReport) -> str:
    """The text of any `abifit index` action's report."""
    if isinstance(report, IndexAddReport):
        return index_add_text(report)
    if isinstance(report, IndexTransferReport):
        return index_transfer_text(report)
    return index_info_text(report)


def index_json(report: IndexReport) -> JsonObject:
    """The `--json` document of any `abifit index` action: the action, the store, and what
    the action did under `result`."""
    if isinstance(report, IndexAddReport):
        action, store, result = "add", report.store, _add_result(report)
    elif isinstance(report, IndexTransferReport):
        action, store, result = report.action, report.store, _transfer_result(report)
    else:
        action, store, result = "info", report.path, _info_result(report)
    return {"schema_version": schema_version("index"), "command": "index", "action": action,
            "store": str(store), "result": result}


def index_add_text(report: IndexAddReport) -> str:
    """One line per wheel (recorded, present, failed), then the totals and the store."""
    lines = []
    for w in report.wheels:
        head = f"{w.package} {w.version} ({w.wheel}): "
        if w.status == "recorded":
            lines.append(f"{head}{w.members} member(s), {w.symbols:,} symbols recorded, "
                         f"{w.bytes_fetched:,} bytes fetched")
            lines += [f"  unreadable: {u}" for u in w.unreadable]
        elif w.status == "present":
            lines.append(f"{head}in the store already")
        else:
            lines.append(f"{head}failed: {w.error}")
    counts = {s: sum(1 for w in report.wheels if w.status == s)
              for s in ("recorded", "present", "failed")}
    lines.append(f"{counts['recorded']} wheel(s) recorded, {counts['present']} in the store "
                 f"already, {counts['failed']} failed; {report.bytes_fetched:,} bytes fetched; "
                 f"store {report.store}")
    return "\n".join(lines) + "\n"


def _add_result(report: IndexAddReport) -> JsonObject:
    return {
        "bytes_fetched": report.bytes_fetched,
        "wheels": [{"package": w.package, "version": w.version, "wheel": w.wheel,
                    "status": w.status, "members": w.members, "symbols": w.symbols,
                    "bytes_fetched": w.bytes_fetched, "error": w.error,
                    "unreadable": list(w.unreadable)} for w in report.wheels],
    }


def index_transfer_text(report: IndexTransferReport) -> str:
    if report.action == "export":
        return (f"wrote {report.wheels} wheel(s) to {report.file} ({report.bytes:,} bytes) "
                f"from {report.store}\n")
    return (f"recorded {report.wheels} wheel(s) from {report.file} in {report.store}; "
            f"{report.skipped} there already\n")


def _transfer_result(report: IndexTransferReport) -> JsonObject:
    return {
        "file": str(report.file),
        "wheels": report.wheels,
        "skipped": report.skipped,
        "bytes": report.bytes,
    }


def index_info_text(info: StoreInfo) -> str:
    """One line per package, the counts, then the store's path and size."""
    lines = [f"{p.package:<30} {p.releases:>5} release(s) {p.wheels:>5} wheel(s)"
             + (f" ({p.partial} partly: the members commands read)" if p.partial else "")
             for p in info.packages]
    lines.append(f"{len(info.packages)} package(s), {info.names:,} distinct names, "
                 f"{info.symbols:,} symbols; {info.bytes:,} bytes")
    return "\n".join([*lines, str(info.path)]) + "\n"


def _info_result(info: StoreInfo) -> JsonObject:
    return {
        "bytes": info.bytes,
        "names": info.names,
        "symbols": info.symbols,
        "packages": [{"package": p.package, "releases": p.releases, "wheels": p.wheels,
                      "partial": p.partial} for p in info.packages],
    }
