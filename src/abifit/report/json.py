"""The versioned JSON document every `--json` prints: its schema version and its serialisation.

Each command's document has a schema beside this module, in `schemas/<command>.schema.json`;
a document of schema version N validates against the schema whose `schema_version` is N.
"""

from __future__ import annotations

import json

SCHEMA_VERSION = 3

JsonObject = dict[str, object]


def error_json(command: str | None, message: str, kind: str) -> JsonObject:
    """The document `--json` prints when a command cannot do its work (exit 2, or 3 for a bug):
    `schemas/error.schema.json`."""
    return {"schema_version": SCHEMA_VERSION, "command": command, "error": {
        "kind": kind, "message": message}}


def dumps(doc: JsonObject) -> str:
    """The document as printed: indented by two, keys in the order they were built."""
    return json.dumps(doc, indent=2)
