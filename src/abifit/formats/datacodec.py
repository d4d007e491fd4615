"""A data-only codec for the values abifit writes to disk and reads back: cache entries and host
profiles.

A later run reads what an earlier one wrote, possibly from a directory or a file someone else
wrote, so reading must not be able to run code (as unpickling can: a pickle names any callable).
Values are written as MessagePack, with abifit's own types spelled as tagged arrays:

    None, bool, int, float, str, bytes    themselves (an int past 64 bits: [BIGINT tag]; a str
                                          with lone surrogates, as file names have, is kept)
    tuple                                 an array
    dict with str/int/bytes/... keys      a map
    dict with other keys                  [DICT tag, key, value, key, value, ...]
    list, frozenset                       [LIST tag, *items], [FROZENSET tag, *items]
    array.array                           [ARRAY tag (its typecode), its bytes (little-endian)]
    an Enum member                        [ENUM tag (its class), its value]
    a dataclass                           [DATACLASS tag (its class), {field: value, ...}]
    an AbifitError                        [ERROR tag (its class), *the arguments of its __reduce__]

A tag is a MessagePack extension value whose data names the class as `module:qualname`. Decoding
constructs builtin containers and scalars, `array.array`, and nothing else but classes that are
(a) defined in a module of the `abifit` package (`abifit.x.y`, no part starting with `_`, imported
from the package), under the name given (not a dotted name, not an attribute of another module)
and (b) dataclasses, Enum subclasses or AbifitError subclasses, as the tag says. A dataclass is
built from its declared (`init`) fields only: an unknown or a missing required field is an
error, and each value must fit the field's type hint (`conforms`: unions, tuples, lists, dicts,
mappings, frozensets, arrays, enums, dataclasses, scalars; a hint it cannot interpret admits
anything). An error is built from its constructor's arguments, checked against its signature.
Bytes that do not decode raise `FormatError`. What decoding builds is bounded, not only what it
reads: a one-byte empty map becomes a 64-byte dict, so a small payload of many tiny values could
take a hundred times its size. Every array and map built is counted with its items as it is
built (`Budget`), no array or map may claim more items than the budget pays for (the unpacker
allocates room for them from the header), and decoding stops with a FormatError once the
budget is spent (by default `default_budget(len(data))`; readers of compressed data set it
from the compressed size).

`frame` and `read_frame` put a header before a payload: an 8-byte magic naming what the bytes
are, a format version, and the first 16 bytes of the payload's sha256, so that a damaged entry
is seen as damaged rather than decoded into another value.

Not covered, on purpose: `abifit.workers` passes pickles between abifit's own processes over
pipes; nothing else writes those and nothing reads them back from disk.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import importlib
import inspect
import re
import struct
import sys
import types
import typing
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from typing import Union

import msgpack

from abifit.errors import AbifitError, FormatError

_BIGINT, _DICT, _LIST, _FROZENSET, _ARRAY, _ENUM, _DATACLASS, _ERROR = range(1, 9)

_SCALARS = frozenset({type(None), bool, int, float, str, bytes})
_KEYS = _SCALARS  # map keys written as themselves
_PLAIN = frozenset({type(None), bool, float, str, bytes})  # written as is, whatever their value
_INT64_MIN, _UINT64_END = -(1 << 63), 1 << 64
_NAME = re.compile(r"(abifit(?:\.[A-Za-z][A-Za-z0-9_]*)+):([A-Za-z_][A-Za-z0-9_]*)")
_TYPECODES = frozenset("bBhHiIlLqQfd")
_LITTLE = sys.byteorder == "little"

HEADER = struct.Struct(">8sH16s")  # magic, format version, sha256(payload)[:16]

def default_budget(size: int) -> int:
    """The bytes that decoding `size` bytes of data abifit wrote may build: such data decodes
    to about 3 times its size, counted as `Budget` counts."""
    return (16 << 20) + 8 * size


class Budget:
    """The memory that unpacking may still build, counted per array and map as it is built
    (MessagePack's hooks): the container, its items' pointers and each item's own size (a
    nested container's again, once; a shared small value as if it were not shared). Spending
    past it raises FormatError."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.left = limit

    def array(self, built: tuple[object, ...] | list[object]) -> object:
        self._spend(sys.getsizeof(built) + sum(map(sys.getsizeof, built)))
        return built

    def map(self, built: dict[object, object]) -> object:
        self._spend(sys.getsizeof(built) + sum(map(sys.getsizeof, built))
                    + sum(map(sys.getsizeof, built.values())))
        return built

    def _spend(self, size: int) -> None:
        self.left -= size
        if self.left < 0:
            raise _refused(f"it would take more than {_mib(self.limit)} of memory to decode "
                           "(far more than data of its size that abifit writes)")

    def options(self) -> dict[str, object]:
        """The unpacker's options that count, and bound each array's and map's item count (an
        array's header alone makes the unpacker allocate room for its items)."""
        return {"list_hook": self.array, "object_hook": self.map,
                "max_array_len": max(self.limit // 16, 1),
                "max_map_len": max(self.limit // 32, 1)}


def _mib(size: int) -> str:
    return f"{size / (1 << 20):,.0f} MiB"


# ---------------------------------------------------------------------------------------------
# encoding


def encode(value: object) -> bytes:
    """The bytes of `value`; TypeError (a bug where it is stored) for a value that is not data
    of the kinds above."""
    packed: bytes = msgpack.packb(_wire(value), use_bin_type=True, strict_types=True,
                                  unicode_errors="surrogatepass")
    return packed


def _tag(code: int, data: bytes = b"") -> msgpack.ExtType:
    return msgpack.ExtType(code, data)


def _wire(value: object) -> object:
    """`value` as plain MessagePack values: lists for arrays, dicts for maps, tags."""
    if type(value) in _PLAIN:
        return value
    if type(value) is int:
        if _INT64_MIN <= value < _UINT64_END:
            return value
        size = (value.bit_length() + 8) // 8
        return [_tag(_BIGINT, value.to_bytes(size, "little", signed=True))]
    if type(value) is tuple:
        if _PLAIN.issuperset(map(type, value)):
            return list(value)
        return [_wire(item) for item in value]
    if type(value) is dict:
        if _KEYS.issuperset(map(type, value)):
            return {key: _wire(item) for key, item in value.items()}
        flat: list[object] = [_tag(_DICT)]
        for key, item in value.items():
            flat += (_wire(key), _wire(item))
        return flat
    if type(value) is list:
        return [_tag(_LIST), *map(_wire, value)]
    if type(value) is frozenset:
        return [_tag(_FROZENSET), *map(_wire, value)]
    if type(value) is array:
        return _array_wire(value)
    if isinstance(value, enum.Enum):
        return [_tag(_ENUM, _class_name(type(value), _ENUM)), _wire(value.value)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        cls = type(value)
        return [_tag(_DATACLASS, _class_name(cls, _DATACLASS)),
                {name: _wire(getattr(value, name)) for name in _init_fields(cls)}]
    if isinstance(value, AbifitError):
        return [_tag(_ERROR, _class_name(type(value), _ERROR)), *map(_wire, _error_args(value))]
    kind = type(value)
    raise TypeError(f"cannot encode a {kind.__module__}.{kind.__qualname__}")


@functools.cache
def _init_fields(cls: type) -> tuple[str, ...]:
    """The fields a dataclass's constructor takes: what is written and read of it."""
    return tuple(f.name for f in dataclasses.fields(cls) if f.init)


def _array_wire(value: array[int] | array[float]) -> list[object]:
    if value.typecode not in _TYPECODES:
        raise TypeError(f"cannot encode an array of typecode {value.typecode!r}")
    if not _LITTLE:
        value = array(value.typecode, value)
        value.byteswap()
    return [_tag(_ARRAY, value.typecode.encode()), value.tobytes()]


def _error_args(error: AbifitError) -> tuple[object, ...]:
    """The arguments that rebuild `error`: its `__reduce__`, when that is `(type, args)`."""
    reduced = error.__reduce__()
    if (not isinstance(reduced, tuple) or reduced[0] is not type(error)
            or not isinstance(reduced[1], tuple) or any(reduced[2:])):
        raise TypeError(f"cannot encode a {type(error).__qualname__}: its __reduce__ is not "
                          "(its type, its arguments)")
    return reduced[1]


def _class_name(cls: type, code: int) -> bytes:
    """`module:qualname` of a class that decoding will resolve back to it."""
    name = f"{cls.__module__}:{cls.__qualname__}".encode()
    try:
        found = _resolve(name, code)
    except FormatError as e:
        raise TypeError(f"cannot encode a {name.decode()}: {e.problem}") from e
    if found is not cls:
        raise TypeError(f"cannot encode a {name!r}: the name is another class's")
    return name


# ---------------------------------------------------------------------------------------------
# decoding


def decode(data: bytes | bytearray | memoryview, where: str, budget: int | None = None) -> object:
    """The value `data` encodes; FormatError naming `where` for anything else, and for data that
    would build more than `budget` bytes (`Budget`; `default_budget` of its size when None)."""
    limit = default_budget(len(data)) if budget is None else budget
    try:
        try:
            wire = _unpack(data, "strict", Budget(limit))
        except UnicodeDecodeError:  # a str with lone surrogates (slower to read: only then)
            wire = _unpack(data, "surrogatepass", Budget(limit))
    except FormatError as e:
        raise FormatError(where, e.problem) from e
    except (ValueError, TypeError, OverflowError, msgpack.UnpackException) as e:
        raise FormatError(where, f"undecodable data ({type(e).__name__}: {e})") from e
    try:
        return _value(wire)
    except FormatError as e:  # raised below without a `where`
        raise FormatError(where, e.problem) from e
    except RecursionError as e:
        raise FormatError(where, "values nested too deeply") from e
    except Exception as e:  # what building a value of abifit's raised on data of the right types
        raise FormatError(where, f"{type(e).__name__}: {e}") from e


def _unpack(data: bytes | bytearray | memoryview, unicode_errors: str, budget: Budget) -> object:
    wire: object = msgpack.unpackb(data, use_list=False, raw=False, strict_map_key=False,
                                   unicode_errors=unicode_errors, **budget.options())
    return wire


def _refused(problem: str) -> FormatError:
    """Data that decodes to no value, or to a value the codec does not build (`decode` names
    where)."""
    return FormatError("", problem)


def _value(wire: object) -> object:
    if type(wire) in _SCALARS:
        return wire
    if type(wire) is tuple:
        if wire and type(wire[0]) is msgpack.ExtType:
            return _tagged(wire[0], wire[1:])
        if _SCALARS.issuperset(map(type, wire)):
            return wire
        return tuple(map(_value, wire))
    if type(wire) is dict:
        if not _KEYS.issuperset(map(type, wire)):
            raise _refused("a map key that is not a scalar")
        return {key: _value(item) for key, item in wire.items()}
    raise _refused(f"a value of type {type(wire).__name__} where data is expected")


def _tagged(tag: msgpack.ExtType, rest: tuple[object, ...]) -> object:
    code, data = tag.code, tag.data
    if code == _LIST:
        return list(map(_value, rest))
    if code == _FROZENSET:
        return frozenset(map(_value, rest))
    if code == _DICT and len(rest) % 2 == 0:
        items = list(map(_value, rest))
        return dict(zip(items[::2], items[1::2], strict=True))
    if code == _BIGINT and not rest:
        return int.from_bytes(data, "little", signed=True)
    if code == _ARRAY and len(rest) == 1:
        return _array(data, rest[0])
    cls = _resolve(data, code) if code in _KINDS else None  # the name first, whatever follows
    if code == _ENUM and cls and len(rest) == 1:
        return cls(_value(rest[0]))
    if code == _DATACLASS and cls and len(rest) == 1 and type(rest[0]) is dict:
        return _dataclass(cls, rest[0])
    if code == _ERROR and cls:
        return _error(cls, tuple(map(_value, rest)))
    raise _refused(f"a malformed value of tag {code}")


def _array(data: bytes, raw: object) -> array[int] | array[float]:
    typecode = data.decode("ascii", "replace")
    if typecode not in _TYPECODES or type(raw) is not bytes:
        raise _refused(f"a malformed array (typecode {typecode!r})")
    out = array(typecode)
    if len(raw) % out.itemsize:
        raise _refused(f"an array of typecode {typecode!r} of {len(raw)} bytes")
    out.frombytes(raw)
    if not _LITTLE:
        out.byteswap()
    return out


def _dataclass(cls: type, wire: Mapping[object, object]) -> object:
    checks, required = _fields_of(cls)
    values: dict[str, object] = {}
    for key, item in wire.items():
        if not isinstance(key, str) or (check := checks.get(key)) is None:
            raise _refused(f"{cls.__qualname__} has no field {key!r}")
        value = item if type(item) in _SCALARS else _value(item)
        if not check(value):
            raise _refused(f"{cls.__qualname__}.{key}: {type(value).__qualname__}, where "
                           f"{_hint_name(type_hints(cls).get(key, object))} is expected")
        values[key] = value
    if len(values) < len(checks):
        missing = [name for name in required if name not in values]
        if missing:
            raise _refused(f"{cls.__qualname__} lacks its field {missing[0]!r}")
    return cls(**values)


@functools.cache
def _fields_of(cls: type) -> tuple[Mapping[str, Check], tuple[str, ...]]:
    """A dataclass's constructor fields with the check of each, and those without a default."""
    hints = type_hints(cls)
    fields = [f for f in dataclasses.fields(cls) if f.init]
    checks = {f.name: _check_for(hints.get(f.name, object)) for f in fields}
    required = tuple(f.name for f in fields if f.default is dataclasses.MISSING
                     and f.default_factory is dataclasses.MISSING)
    return checks, required


def _error(cls: type, args: tuple[object, ...]) -> object:
    """`cls(*args)`, the arguments checked against its constructor (any data for an error that
    keeps BaseException's, which takes any arguments)."""
    try:
        signature = inspect.signature(cls)
    except ValueError:  # BaseException.__init__
        return cls(*args)
    try:
        bound = signature.bind(*args)
    except TypeError as e:
        raise _refused(f"{cls.__qualname__}: {e}") from e
    hints = type_hints(cls.__init__)  # type: ignore[misc]
    for name, value in bound.arguments.items():
        hint = hints.get(name, object)
        if not conforms(value, hint):
            raise _refused(f"{cls.__qualname__}({name}=...): {type(value).__qualname__}, where "
                           f"{_hint_name(hint)} is expected")
    return cls(*args)


_KINDS: dict[int, tuple[str, Callable[[type], bool]]] = {
    _ENUM: ("an Enum", lambda cls: issubclass(cls, enum.Enum)),
    _DATACLASS: ("a dataclass", dataclasses.is_dataclass),
    _ERROR: ("an AbifitError", lambda cls: issubclass(cls, AbifitError)),
}


@functools.lru_cache(maxsize=1024)
def _resolve(name: bytes, code: int) -> type:
    """The class a tag names, when it is one that decoding may build (see the docstring)."""
    text = name.decode("utf-8", "replace")
    what, allowed = _KINDS[code]
    matched = _NAME.fullmatch(text)
    if matched is None:
        raise _refused(f"{text!r} does not name a class of abifit")
    module_name, qualname = matched.groups()
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise _refused(f"{text!r}: abifit has no module {module_name}") from e
    found = vars(module).get(qualname)
    if (not isinstance(found, type) or found.__module__ != module_name
            or found.__qualname__ != qualname):
        raise _refused(f"{text!r} is not a class defined in {module_name}")
    if not allowed(found):
        raise _refused(f"{text!r} is not {what}")
    return found


# ---------------------------------------------------------------------------------------------
# the type check


class _ArrayHint:
    """`array` while reading annotations, subscriptable before Python 3.12 (`array[int]`)."""

    def __class_getitem__(cls, item: object) -> object:
        return types.GenericAlias(cls, item)


@functools.cache
def type_hints(owner: object) -> Mapping[str, object]:
    """The evaluated annotations of a class or function of abifit; empty when they cannot be
    evaluated (every field then admits any value)."""
    try:
        return typing.get_type_hints(owner, localns={"array": _ArrayHint})
    except Exception:  # a name only imported for type checking, a syntax too new
        return {}


Check = Callable[[object], bool]


def conforms(value: object, hint: object) -> bool:
    """Whether `value` fits the type hint `hint`, as far as this check can tell."""
    return _check_for(hint)(value)


def _check_for(hint: object) -> Check:
    try:
        return _checker(hint)
    except TypeError:  # an unhashable hint (a Literal of a list): built each time
        return _checker.__wrapped__(hint)


def _anything(_value: object) -> bool:
    return True


@functools.cache
def _checker(hint: object) -> Check:
    """The check of `hint`, built once per hint: unions, tuples, mappings, sequences, sets,
    arrays, literals, classes; anything else admits every value."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is object or hint is typing.Any:
        return _anything
    if hint is None or hint is type(None):
        return lambda value: value is None
    if hint is _ArrayHint or origin is _ArrayHint:
        return lambda value: isinstance(value, array)
    if hint is float:
        return lambda value: isinstance(value, (int, float))
    if origin is None:
        return _instance_of(hint) if isinstance(hint, type) else _anything
    if origin is Union or origin is types.UnionType:
        alternatives = tuple(map(_check_for, args))
        return lambda value: any(check(value) for check in alternatives)
    if origin is typing.Literal:
        return lambda value: value in args
    if origin is typing.Annotated:
        return _check_for(args[0])
    if origin is tuple:
        return _tuple_checker(args)
    if not isinstance(origin, type):
        return _anything
    outer = _instance_of(origin)
    if issubclass(origin, Mapping) and len(args) == 2:
        keys, values = _each(args[0]), _each(args[1])

        def mapping(value: object) -> bool:
            return (outer(value) and isinstance(value, Mapping) and keys(value.keys())
                    and values(value.values()))

        return mapping
    if issubclass(origin, (Sequence, Set)) and len(args) == 1:
        items = _each(args[0])

        def collection(value: object) -> bool:
            return outer(value) and isinstance(value, (Sequence, Set)) and items(value)

        return collection
    return outer


def _instance_of(cls: type) -> Check:
    return lambda value: isinstance(value, cls)


def _tuple_checker(args: tuple[object, ...]) -> Check:
    if len(args) == 2 and args[1] is Ellipsis:
        items = _each(args[0])
        return lambda value: isinstance(value, tuple) and items(value)
    if args == ((),):
        return lambda value: value == ()
    checks = tuple(map(_check_for, args))
    return lambda value: (isinstance(value, tuple) and len(value) == len(checks)
                          and all(check(item) for check, item in zip(checks, value, strict=True)))


def _each(hint: object) -> Callable[[Iterable[object]], bool]:
    """The check that every item of an iterable fits `hint`."""
    if isinstance(hint, type) and typing.get_origin(hint) is None and hint is not float:
        exact = frozenset({hint})
        return lambda values: (exact.issuperset(map(type, values))
                               or all(isinstance(v, hint) for v in values))
    check = _check_for(hint)
    return lambda values: all(map(check, values))


def _hint_name(hint: object) -> str:
    return hint.__qualname__ if isinstance(hint, type) else str(hint).replace("abifit.", "")


# ---------------------------------------------------------------------------------------------
# framing


def frame(value: object, magic: bytes, version: int) -> bytes:
    """`value` encoded, after a header: `magic` (8 bytes), `version`, the payload's checksum."""
    if len(magic) != 8:
        raise ValueError(f"a magic of 8 bytes, not {magic!r}")
    payload = encode(value)
    return HEADER.pack(magic, version, hashlib.sha256(payload).digest()[:16]) + payload


class OtherVersion(FormatError):
    """Framed bytes of another format version than the reader's (`version`)."""

    def __init__(self, where: str, version: int) -> None:
        super().__init__(where, f"format version {version}")
        self.version = version


def read_frame(data: bytes | bytearray | memoryview, magic: bytes, version: int,
               where: str) -> memoryview:
    """The payload of framed bytes whose header has `magic` and `version` and whose payload
    matches its checksum; FormatError otherwise (`OtherVersion` for another version, whose
    checksum is not looked at)."""
    view = memoryview(data)
    found_magic, found, checksum = (HEADER.unpack_from(view) if len(view) >= HEADER.size
                                    else (b"", 0, b""))
    if found_magic != magic:
        raise FormatError(where, f"does not start with {magic!r}")
    if found != version:
        raise OtherVersion(where, found)
    payload = view[HEADER.size:]
    if hashlib.sha256(payload).digest()[:16] != checksum:
        raise FormatError(where, "the checksum does not match: the data is damaged")
    return payload
