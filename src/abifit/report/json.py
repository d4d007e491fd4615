"""The versioned JSON documents `--json` prints: their schema versions and their serialisation.

Each command's document has a schema beside this module, in `schemas/<command>.schema.json`,
and a version of its own, which that schema pins (`schema_version`): a document of schema
version N validates against the schema whose `schema_version` is N. A command's second kind
of document names itself in a `document` field, `<command>.<name>`, and its schema is
`schemas/<command>.<name>.schema.json` (`matrix.grid`: a grid of matrices). What changes a
version, and what may change without one, is the stability policy of docs/json.md.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Mapping
from json.encoder import encode_basestring_ascii
from types import MappingProxyType

JsonObject = dict[str, object]

SCHEMA_SUFFIX = ".schema.json"


@functools.cache
def schema_versions() -> Mapping[str, int]:
    """The schema version of each document, by its `command` ("error": the document of a
    command that could not do its work; `<command>.<name>`: a command's second document): the
    `schema_version` its schema pins (`properties.schema_version.const` of
    `schemas/<command>.schema.json`; common.schema.json, which documents only refer to, pins
    none), read from the package once. Each began at 3 (`matrix.grid` at 1), and each changes
    on its own (4: a finding's symbol demangled, the newest version of a family, the paths
    searched and the nearest definitions as records)."""
    from importlib.resources import files

    found: dict[str, int] = {}
    for path in files("abifit.report").joinpath("schemas").iterdir():
        if path.name.endswith(SCHEMA_SUFFIX):
            name = path.name.removesuffix(SCHEMA_SUFFIX)
            with contextlib.suppress(KeyError):  # a schema that pins none
                found[name] = schema_version(name)
    return MappingProxyType(dict(sorted(found.items())))


@functools.cache
def schema_version(command: str) -> int:
    """The schema version of `command`'s document, as `schema_versions` gives it, reading
    only that document's schema (a command prints one document: reading all sixteen took
    tens of milliseconds of a run)."""
    from importlib.resources import files

    path = files("abifit.report").joinpath("schemas").joinpath(command + SCHEMA_SUFFIX)
    try:
        schema = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise KeyError(command) from None
    pinned = schema.get("properties", {}).get("schema_version", {}).get("const")
    if not isinstance(pinned, int):
        raise KeyError(command)
    return pinned


def error_json(command: str | None, message: str, kind: str) -> JsonObject:
    """The document `--json` prints when a command cannot do its work (exit 2, or 3 for a bug):
    `schemas/error.schema.json`."""
    return {"schema_version": schema_version("error"), "command": command, "error": {
        "kind": kind, "message": message}}


def dumps(doc: JsonObject) -> str:
    """The document as printed: indented by two, keys in the order they were built; the text
    `json.dumps(doc, indent=2)` gives, written faster (`_encode`): with an indent, the standard
    library encodes every value in Python, and a symbol listing has a million of them."""
    out: list[str] = []
    if not _encode(doc, "\n", out):
        return json.dumps(doc, indent=2)
    return "".join(out)


def _scalar_text(value: object) -> str | None:
    """A str, int, bool or None as JSON; None for any other value (a float, a container)."""
    if type(value) is str:
        return encode_basestring_ascii(value)
    if type(value) is int:
        return int.__repr__(value)
    if value is None:
        return "null"
    if type(value) is bool:
        return "true" if value else "false"
    return None


_SCALARS = (str, int, bool, type(None))


def _encode(value: object, newline: str, out: list[str]) -> bool:
    """Append `value` as `json.dumps(indent=2)` writes it at the depth `newline` (a newline and
    that depth's indent) shows; False where it meets what it leaves to the standard library
    (a float, a key that is not a str)."""
    if type(value) is dict:
        if not value:
            out.append("{}")
            return True
        inner = newline + "  "
        if not all(type(k) is str for k in value):
            return False
        if all(type(v) in _SCALARS for v in value.values()):  # one join for a flat object
            out.append("{" + inner + ("," + inner).join(
                f"{encode_basestring_ascii(k)}: {_scalar_text(v)}" for k, v in value.items())
                + newline + "}")
            return True
        out.append("{")
        for n, (key, item) in enumerate(value.items()):
            out.append(("," if n else "") + inner + encode_basestring_ascii(key) + ": ")
            if not _encode(item, inner, out):
                return False
        out.append(newline + "}")
        return True
    if type(value) in (list, tuple):
        items: list[object] | tuple[object, ...] = value  # type: ignore[assignment]
        if not items:
            out.append("[]")
            return True
        inner = newline + "  "
        if all(type(v) in _SCALARS for v in items):
            out.append("[" + inner + ("," + inner).join(map(str, map(_scalar_text, items)))
                       + newline + "]")
            return True
        out.append("[")
        for n, item in enumerate(items):
            out.append(("," if n else "") + inner)
            if not _encode(item, inner, out):
                return False
        out.append(newline + "]")
        return True
    text = _scalar_text(value)
    if text is None:
        return False
    out.append(text)
    return True
