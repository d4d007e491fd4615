"""`abifit cache info` rendered: each bucket's entries and bytes, the total, and the directory;
`--json` prints the same information as one versioned document."""

from __future__ import annotations

from abifit.remote.diskcache import CacheInfo
from abifit.report.json import JsonObject, schema_version


def cache_text(info: CacheInfo) -> str:
    """One aligned line per bucket, the total, then the cache directory."""
    lines = [f"{b.name:<10} {b.entries:>7} entries {b.bytes:>14,} bytes" for b in info.buckets]
    lines.append(f"{'total':<10} {info.entries:>7} entries {info.bytes:>14,} bytes")
    return "\n".join([*lines, str(info.root)]) + "\n"


def cache_json(info: CacheInfo) -> JsonObject:
    """The `--json` document of `abifit cache info`."""
    return {
        "schema_version": schema_version("cache"),
        "command": "cache",
        "path": str(info.root),
        "state": info.state.value,
        "entries": info.entries,
        "bytes": info.bytes,
        "buckets": [{"name": b.name, "entries": b.entries, "bytes": b.bytes}
                    for b in info.buckets],
    }
