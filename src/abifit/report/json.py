"""The versioned JSON document every `--json` prints: its schema version and its serialisation.

Each command's document has a schema beside this module, in `schemas/<command>.schema.json`;
a document of schema version N validates against the schema whose `schema_version` is N.
"""

from __future__ import annotations

import json

SCHEMA_VERSION = 3

JsonObject = dict[str, object]


def dumps(doc: JsonObject) -> str:
    """The document as printed: indented by two, keys in the order they were built."""
    return json.dumps(doc, indent=2)
