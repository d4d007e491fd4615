"""The symbol store: every dynamic view abifit reads from a wheel, kept in one SQLite database
(`STORE_NAME`, in the cache directory) that can be queried by symbol name.

    wheels   (id, key UNIQUE, package, version, wheel,      one recorded wheel; complete: every
              complete)                                     library and extension module of it
    objects  (id, wheel_id, member, soname)                 one ELF member of a wheel
    names    (id, name UNIQUE)                              each mangled name once
    versions (id, name UNIQUE)                              each symbol version node once
    symbols  (object_id, name_id, version_id, defined)      WITHOUT ROWID, keyed in that order;
                                                            version_id 0: unversioned
    seen     (key, member, package, version, wheel, entry)  views a command read, waiting

Two ways in. `record` writes a whole wheel at once (`index add`, `history`, `explain`: every
member that a process can load, `complete`). Any other command that reads a view (`check`,
`inspect`, `matrix`, `variants`, local wheels as remote ones) notes it in `seen` as it ends
(`note_seen`: a few rows, milliseconds, nothing decoded); the views themselves are in the
cache of views already, and `index_seen` moves them into `objects` and `symbols` before the
store is next queried (`abifit.remote.recording.index_seen`), as a wheel that is not `complete`
unless every one of its members was read. So every view read is recorded, and writing stays
off the commands' paths; a seen view that the cache no longer holds is dropped.

Names are stored once however many releases hold them, so twenty releases of a library of 75k
symbols hold 75k-odd names and 1.5M small rows. `symbols_name` indexes the rows by name: a
query for a name is a probe of `names` and one of `symbols_name` per row found; a glob with a
literal prefix is a range of `names`' index.

The database is in WAL mode with a busy timeout, so that two abifit processes may read and
write at once; each wheel is written in one transaction. `PRAGMA user_version` holds the schema
version: a database of another version, or a file that is not a database, is set aside
(renamed `*.damaged`) and a new one made. A store that cannot be opened at all (a read-only
directory) is None: nothing is recorded, nothing fails.

The store is the remote layer's: it knows wheels and views, not commands. `abifit.formats.
storefile` is the format its contents are exported in (`dump`, `load`).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from abifit.formats.elf import SHN_UNDEF
from abifit.formats.storefile import DumpObject, DumpWheel, StoreDump
from abifit.remote.diskcache import SYMBOLS_STORE

if TYPE_CHECKING:
    from abifit.formats.elf import ElfImage

STORE_NAME = f"{SYMBOLS_STORE}.sqlite"
SCHEMA_VERSION = 2
BUSY_TIMEOUT = 60.0  # seconds a writer waits for another process's transaction
CACHE_KIB = 64 << 10  # page cache of a connection (SQLite allocates it as pages are used)

_SCHEMA = (
    "CREATE TABLE wheels (id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, "
    "package TEXT NOT NULL, version TEXT NOT NULL, wheel TEXT NOT NULL, "
    "complete INTEGER NOT NULL)",
    "CREATE INDEX wheels_package ON wheels (package, version)",
    "CREATE TABLE objects (id INTEGER PRIMARY KEY, wheel_id INTEGER NOT NULL, "
    "member TEXT NOT NULL, soname TEXT)",
    "CREATE INDEX objects_wheel ON objects (wheel_id)",
    "CREATE TABLE names (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)",
    "CREATE TABLE versions (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)",
    "CREATE TABLE symbols (object_id INTEGER NOT NULL, name_id INTEGER NOT NULL, "
    "version_id INTEGER NOT NULL, defined INTEGER NOT NULL, "
    "PRIMARY KEY (object_id, name_id, version_id, defined)) WITHOUT ROWID",
    "CREATE INDEX symbols_name ON symbols (name_id)",
    "CREATE TABLE seen (key TEXT NOT NULL, member TEXT NOT NULL, package TEXT NOT NULL, "
    "version TEXT NOT NULL, wheel TEXT NOT NULL, entry TEXT NOT NULL, "
    "PRIMARY KEY (key, member)) WITHOUT ROWID",
)

# A symbol row with everything a query returns. The CROSS JOINs fix the order: from the names
# that match, through the name index of `symbols`, to their objects and wheels.
_ROWS = ("SELECT w.version, w.wheel, o.member, o.soname, n.name, v.name, s.defined "
         "FROM names n CROSS JOIN symbols s CROSS JOIN objects o CROSS JOIN wheels w "
         "LEFT JOIN versions v ON v.id = s.version_id "
         "WHERE s.name_id = n.id AND o.id = s.object_id AND w.id = o.wheel_id AND w.package = ?")


@dataclass(frozen=True, slots=True)
class StoredObject:
    """One ELF member of one wheel."""

    package: str  # canonical name
    version: str  # the release's version as the wheel names it
    wheel: str  # wheel file name
    member: str  # member path inside the wheel
    soname: str | None


@dataclass(frozen=True, slots=True)
class StoredSymbol:
    obj: StoredObject
    name: str  # mangled name
    version: str | None  # symbol version node (GLIBC_2.17), None when unversioned
    defined: bool


@dataclass(frozen=True, slots=True)
class StoredPackage:
    """A package of the store: its releases and wheels recorded (`partial`: of those wheels,
    the ones only some members of which were read)."""

    package: str
    releases: int
    wheels: int
    partial: int = 0


@dataclass(frozen=True, slots=True)
class SeenView:
    """A dynamic view a command read from a wheel, where the cache of views holds it."""

    key: str  # the wheel's (`abifit.remote.recording.store_key`; the views cache's key too)
    member: str  # member path inside the wheel
    package: str
    version: str
    wheel: str  # wheel file name
    entry: str  # the view's entry in the cache of views


@dataclass(frozen=True, slots=True)
class StoreInfo:
    path: Path
    bytes: int  # the database with its write-ahead log
    packages: tuple[StoredPackage, ...]
    names: int  # distinct symbol names
    symbols: int  # symbol rows


class SymbolStore:
    """The store at `root / STORE_NAME` (see the module's docstring). Methods may be called
    from several threads; each takes the store's lock."""

    def __init__(self, connection: sqlite3.Connection, path: Path) -> None:
        self._db = connection
        self.path = path
        self._lock = threading.Lock()
        # the ids of the names and of the version nodes, as far as this connection has read
        # them (rows of `names` and `versions` are never deleted, so an id never changes);
        # read when a wheel is first recorded, then only the rows added since
        self._ids: dict[str, dict[str, int]] = {"names": {}, "versions": {}}
        self._last: dict[str, int] = {"names": 0, "versions": 0}

    @classmethod
    def open(cls, root: Path) -> SymbolStore | None:
        """The store in the cache directory `root`, created on first use; a damaged file, or
        one of another schema version, is set aside and replaced. None when it cannot be
        opened or created (a read-only directory, a database locked past the timeout)."""
        path = root / STORE_NAME
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError:
            return None
        for attempt in range(2):
            try:
                db = _connect(path)
            except (sqlite3.Error, OSError):
                return None
            if db is not None:
                return cls(db, path)
            if attempt or not _set_aside(path):
                return None
        return None

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> SymbolStore:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @contextmanager
    def _writing(self) -> Iterator[sqlite3.Cursor]:
        """One write transaction, taken at once (BEGIN IMMEDIATE: a second writer waits)."""
        with self._lock:
            cursor = self._db.cursor()
            cursor.execute("BEGIN IMMEDIATE")
            try:
                yield cursor
            except BaseException:
                cursor.execute("ROLLBACK")
                self._forget_ids()  # ids read in the transaction may be gone with it
                raise
            cursor.execute("COMMIT")

    def _forget_ids(self) -> None:
        for table in self._ids:
            self._ids[table] = {}
            self._last[table] = 0

    def _id_of(self, cursor: sqlite3.Cursor, table: str, wanted: Iterable[str]) -> dict[str, int]:
        """The ids of `wanted` in `table` (names, versions), rows added for those missing;
        inside a write transaction, so that no other process adds rows meanwhile."""
        ids, needed = self._ids[table], set(wanted)
        for _round in range(2):
            new = cursor.execute(f"SELECT id, name FROM {table} WHERE id > ?",
                                 (self._last[table],)).fetchall()
            ids.update((name, i) for i, name in new)
            self._last[table] = max([self._last[table], *(i for i, _n in new)])
            missing = sorted(needed.difference(ids))
            if not missing:
                break
            cursor.executemany(f"INSERT OR IGNORE INTO {table} (name) VALUES (?)",
                               ((n,) for n in missing))
        return ids

    def _insert_wheel(self, cursor: sqlite3.Cursor, key: str, package: str, version: str,
                      wheel: str, objects: list[tuple[str, str | None, list[_Row]]]) -> None:
        """Replace the wheel of `key` with these objects, inside the caller's transaction."""
        numbered = self._numbered(cursor, objects)
        wheel_id = _new_wheel(cursor, key, package, version, wheel, True)
        for member, soname, rows in numbered:
            _add_object(cursor, wheel_id, member, soname, rows)

    def _numbered(self, cursor: sqlite3.Cursor, objects: list[tuple[str, str | None, list[_Row]]]
                  ) -> list[tuple[str, str | None, list[tuple[int, int, int]]]]:
        """The objects with their symbols as (name id, version id, defined), the ids of names
        and version nodes not stored yet added."""
        names = self._id_of(cursor, "names", (n for _m, _s, rows in objects for n, _v, _d in rows))
        versions = self._id_of(cursor, "versions", {v for _m, _s, rows in objects
                                                    for _n, v, _d in rows if v is not None})
        return [(member, soname, [(names[n], 0 if v is None else versions[v], d)
                                  for n, v, d in rows]) for member, soname, rows in objects]

    def has_wheel(self, wheel_key: str) -> bool:
        """Whether the wheel of this key (`abifit.remote.wheelcache.view_key`) is recorded whole."""
        with self._lock:
            row = self._db.execute("SELECT 1 FROM wheels WHERE key = ? AND complete = 1",
                                   (wheel_key,)).fetchone()
        return row is not None

    def note_seen(self, views: Iterable[SeenView]) -> None:
        """Note views a command read (see the module's docstring), in one transaction."""
        rows = [(v.key, v.member, str(canonicalize_name(v.package)), v.version, v.wheel, v.entry)
                for v in views]
        if rows:
            with self._writing() as cursor:
                cursor.executemany("INSERT OR REPLACE INTO seen VALUES (?, ?, ?, ?, ?, ?)", rows)

    def seen(self) -> list[SeenView]:
        """The views noted and not yet recorded, by wheel key and member."""
        with self._lock:
            rows = self._db.execute("SELECT key, member, package, version, wheel, entry "
                                    "FROM seen ORDER BY key, member").fetchall()
        return [SeenView(*(str(field) for field in row)) for row in rows]

    def record_seen(self, seen: Sequence[SeenView], views: Iterable[tuple[str, ElfImage]],
                    complete: bool) -> None:
        """Record the `views` (member path, view) of the seen views of one wheel, `seen`, and
        forget those: added to the wheel's objects (a member recorded before is replaced),
        nothing added to a wheel recorded whole. `complete`: the wheel now holds every member
        a process can load."""
        if not seen:
            return
        first = seen[0]
        objects = [(member, image.soname, _symbol_rows(image)) for member, image in views]
        with self._writing() as cursor:
            row = cursor.execute("SELECT id, complete FROM wheels WHERE key = ?",
                                 (first.key,)).fetchone()
            if row is None or not row[1]:
                self._add_members(cursor, first, row[0] if row else None, objects, complete)
            cursor.executemany("DELETE FROM seen WHERE key = ? AND member = ?",
                               [(v.key, v.member) for v in seen])

    def _add_members(self, cursor: sqlite3.Cursor, wheel: SeenView, wheel_id: int | None,
                     objects: list[tuple[str, str | None, list[_Row]]], complete: bool) -> None:
        numbered = self._numbered(cursor, objects)
        if wheel_id is None:
            wheel_id = _new_wheel(cursor, wheel.key, str(canonicalize_name(wheel.package)),
                                  wheel.version, wheel.wheel, complete)
        elif complete:
            cursor.execute("UPDATE wheels SET complete = 1 WHERE id = ?", (wheel_id,))
        for member, soname, rows in numbered:
            _delete_object(cursor, wheel_id, member)
            _add_object(cursor, wheel_id, member, soname, rows)

    def record(self, wheel_key: str, package: str, version: str, wheel: str,
               views: Iterable[tuple[str, ElfImage]]) -> None:
        """Record the ELF members of one wheel, (member path, dynamic view) each, in one
        transaction; a wheel recorded before under `wheel_key` is replaced."""
        objects = [(member, image.soname, _symbol_rows(image)) for member, image in views]
        with self._writing() as cursor:
            self._insert_wheel(cursor, wheel_key, canonicalize_name(package), version,
                               wheel, objects)

    def releases(self, package: str) -> list[tuple[str, str]]:
        """(version, wheel) of every wheel of `package` recorded whole, oldest release first."""
        with self._lock:
            rows = self._db.execute("SELECT version, wheel FROM wheels WHERE package = ? "
                                    "AND complete = 1", (canonicalize_name(package),)).fetchall()
        return sorted(((str(v), str(w)) for v, w in rows),
                      key=lambda r: (_version_key(r[0]), r[1]))

    def symbols(self, package: str, pattern: str, *,
                defined: bool | None = None) -> list[StoredSymbol]:
        """The symbols of `package`'s recorded wheels whose mangled name is `pattern`, or
        matches it as a glob (fnmatch's `*`, `?`, `[...]`, case-sensitive); only definitions
        (`defined` True) or requirements (False) when given. Ordered by release, wheel,
        member and name. An exact name, and a glob with a literal prefix, is found through
        the index of names."""
        prefix = _literal_prefix(pattern)
        args: list[object]
        sql, args = _ROWS, [str(canonicalize_name(package))]
        if prefix == pattern:
            sql += " AND n.name = ?"
            args.append(pattern)
        else:
            if prefix:
                sql += " AND n.name >= ? AND n.name < ?"
                args += [prefix, _after(prefix)]
            sql += " AND n.name GLOB ?"
            args.append(_glob(pattern))
        if defined is not None:
            sql += " AND s.defined = ?"
            args.append(int(defined))
        with self._lock:
            rows = self._db.execute(sql, args).fetchall()
        name = canonicalize_name(package)
        found = [StoredSymbol(StoredObject(name, v, w, m, so), n, sv, bool(d))
                 for v, w, m, so, n, sv, d in rows]
        found.sort(key=lambda s: (_version_key(s.obj.version), s.obj.wheel, s.obj.member,
                                  s.name, s.version or "", s.defined))
        return found

    def names_containing(self, package: str, word: str) -> list[str]:
        """The distinct mangled names of `package`'s symbols that contain `word`, sorted (a
        scan of the names, each match looked up in the name index)."""
        sql = ("SELECT n.name FROM names n WHERE instr(n.name, ?) > 0 AND EXISTS ("
               "SELECT 1 FROM symbols s CROSS JOIN objects o CROSS JOIN wheels w "
               "WHERE s.name_id = n.id AND o.id = s.object_id AND w.id = o.wheel_id "
               "AND w.package = ?) ORDER BY n.name")
        with self._lock:
            rows = self._db.execute(sql, (word, canonicalize_name(package))).fetchall()
        return [str(r[0]) for r in rows]

    def needed_from(self, package: str, version: str, providers: Iterable[str]) -> set[str]:
        """The names `package==version` requires (undefined symbols of its recorded wheels)
        that a recorded wheel of one of the `providers` (package names, any release) defines;
        every name it requires when `providers` is empty. `version` without a local label
        also matches the releases that have one (2.10.0 matches 2.10.0+cu128)."""
        wanted = sorted({canonicalize_name(p) for p in providers})
        sql = ("SELECT DISTINCT n.name FROM wheels w CROSS JOIN objects o CROSS JOIN symbols s "
               "CROSS JOIN names n WHERE w.package = ? AND (w.version = ? OR w.version GLOB ?) "
               "AND o.wheel_id = w.id AND s.object_id = o.id AND s.defined = 0 "
               "AND n.id = s.name_id")
        args: list[object] = [canonicalize_name(package), *_release(version)]
        if wanted:
            sql += (" AND EXISTS (SELECT 1 FROM symbols d CROSS JOIN objects od CROSS JOIN "
                    "wheels wd WHERE d.name_id = s.name_id AND d.defined = 1 "
                    "AND od.id = d.object_id AND wd.id = od.wheel_id AND wd.package IN "
                    f"({', '.join('?' * len(wanted))}))")
            args += wanted
        with self._lock:
            return {str(r[0]) for r in self._db.execute(sql, args)}

    def defined_names(self, package: str, version: str) -> set[str]:
        """The names `package==version`'s recorded wheels define (the version matched as in
        `needed_from`)."""
        sql = ("SELECT DISTINCT n.name FROM wheels w CROSS JOIN objects o CROSS JOIN symbols s "
               "CROSS JOIN names n WHERE w.package = ? AND (w.version = ? OR w.version GLOB ?) "
               "AND o.wheel_id = w.id AND s.object_id = o.id AND s.defined = 1 "
               "AND n.id = s.name_id")
        with self._lock:
            rows = self._db.execute(sql, (canonicalize_name(package), *_release(version)))
            return {str(r[0]) for r in rows}

    def info(self) -> StoreInfo:
        """The store's file size, its packages with their releases and wheels, and counts."""
        with self._lock:
            packages = self._db.execute(
                "SELECT package, count(DISTINCT version), count(*), count(*) - sum(complete) "
                "FROM wheels GROUP BY package ORDER BY package").fetchall()
            names = self._db.execute("SELECT count(*) FROM names").fetchone()[0]
            symbols = self._db.execute("SELECT count(*) FROM symbols").fetchone()[0]
        size = 0
        for suffix in ("", "-wal"):
            try:
                size += os.stat(f"{self.path}{suffix}").st_size
            except OSError:
                continue
        return StoreInfo(self.path, size, tuple(StoredPackage(str(p), int(r), int(w), int(x))
                                                for p, r, w, x in packages),
                         int(names), int(symbols))

    def dump(self) -> StoreDump:
        """Every wheel recorded whole, as `abifit.formats.storefile` writes it (the members
        commands happened to read of other wheels stay here)."""
        with self._lock:
            db = self._db
            db.execute("BEGIN")  # one snapshot, whatever other processes write meanwhile
            try:
                used = db.execute(
                    "SELECT id, name FROM names WHERE id IN (SELECT s.name_id FROM symbols s "
                    "JOIN objects o ON o.id = s.object_id JOIN wheels w ON w.id = o.wheel_id "
                    "WHERE w.complete = 1) ORDER BY id").fetchall()
                vers = db.execute("SELECT id, name FROM versions ORDER BY id").fetchall()
                wheels = db.execute("SELECT id, key, package, version, wheel FROM wheels "
                                    "WHERE complete = 1 ORDER BY package, id").fetchall()
                objects = db.execute("SELECT o.id, o.wheel_id, o.member, o.soname FROM objects o "
                                     "JOIN wheels w ON w.id = o.wheel_id WHERE w.complete = 1 "
                                     "ORDER BY o.id").fetchall()
                name_index = {i: n for n, (i, _name) in enumerate(used)}
                version_index = {i: n + 1 for n, (i, _name) in enumerate(vers)}
                version_index[0] = 0
                by_wheel: dict[int, list[DumpObject]] = {}
                for oid, wid, member, soname in objects:
                    rows = db.execute("SELECT name_id, version_id, defined FROM symbols "
                                      "WHERE object_id = ?", (oid,)).fetchall()
                    by_wheel.setdefault(wid, []).append(DumpObject(
                        member, soname, tuple(name_index[r[0]] for r in rows),
                        tuple(version_index[r[1]] for r in rows), bytes(r[2] for r in rows)))
            finally:
                db.execute("COMMIT")
        return StoreDump(tuple(n for _i, n in used), tuple(n for _i, n in vers),
                         tuple(DumpWheel(k, p, v, w, tuple(by_wheel.get(i, ())))
                               for i, k, p, v, w in wheels))

    def load(self, dump: StoreDump) -> tuple[int, int]:
        """Record the wheels of `dump` that the store does not hold whole, in one transaction;
        (wheels recorded, wheels already there)."""
        added = skipped = 0
        with self._writing() as cursor:
            known = self._id_of(cursor, "names", dump.names)
            names = [known[n] for n in dump.names]
            known = self._id_of(cursor, "versions", dump.versions)
            versions = [0, *(known[v] for v in dump.versions)]
            for w in dump.wheels:
                if cursor.execute("SELECT 1 FROM wheels WHERE key = ? AND complete = 1",
                                  (w.key,)).fetchone():
                    skipped += 1
                    continue
                wheel_id = _new_wheel(cursor, w.key, canonicalize_name(w.package), w.version,
                                      w.wheel, True)
                for o in w.objects:
                    _add_object(cursor, wheel_id, o.member, o.soname,
                                [(names[n], versions[v], d) for n, v, d
                                 in zip(o.names, o.versions, o.defined, strict=True)])
                added += 1
        return added, skipped


_Row = tuple[str, "str | None", int]  # name, version node, defined


def _symbol_rows(image: ElfImage) -> list[_Row]:
    table = image.symbols
    names: Iterable[str] = table.names
    if not "".join(table.names).isascii():  # names read with surrogate escapes: as UTF-8 can
        names = [_text(n) for n in table.names]
    defined = [int(s != SHN_UNDEF) for s in table.section_indexes]
    return list(zip(names, table.versions(), defined, strict=True))


def _text(name: str) -> str:
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _new_wheel(cursor: sqlite3.Cursor, key: str, package: str, version: str,
               wheel: str, complete: bool) -> int:
    """The id of a new row for the wheel of `key` (a wheel recorded under it before is
    removed)."""
    _delete_wheel(cursor, key)
    cursor.execute("INSERT INTO wheels (key, package, version, wheel, complete) "
                   "VALUES (?, ?, ?, ?, ?)", (key, package, version, wheel, int(complete)))
    return int(cursor.lastrowid or 0)


def _delete_object(cursor: sqlite3.Cursor, wheel_id: int, member: str) -> None:
    cursor.execute("DELETE FROM symbols WHERE object_id IN "
                   "(SELECT id FROM objects WHERE wheel_id = ? AND member = ?)", (wheel_id, member))
    cursor.execute("DELETE FROM objects WHERE wheel_id = ? AND member = ?", (wheel_id, member))


def _add_object(cursor: sqlite3.Cursor, wheel_id: int, member: str, soname: str | None,
                symbols: list[tuple[int, int, int]]) -> None:
    """An object of a wheel and its symbols: (name id, version id, defined) each."""
    cursor.execute("INSERT INTO objects (wheel_id, member, soname) VALUES (?, ?, ?)",
                   (wheel_id, member, soname))
    oid = cursor.lastrowid
    rows = [(oid, n, v, d) for n, v, d in symbols]
    rows.sort()  # in key order: appended to the table's end, not spread over it
    cursor.executemany("INSERT OR IGNORE INTO symbols VALUES (?, ?, ?, ?)", rows)


def _delete_wheel(cursor: sqlite3.Cursor, key: str) -> None:
    row = cursor.execute("SELECT id FROM wheels WHERE key = ?", (key,)).fetchone()
    if row is None:
        return
    cursor.execute("DELETE FROM symbols WHERE object_id IN "
                   "(SELECT id FROM objects WHERE wheel_id = ?)", row)
    cursor.execute("DELETE FROM objects WHERE wheel_id = ?", row)
    cursor.execute("DELETE FROM wheels WHERE id = ?", row)


def _connect(path: Path) -> sqlite3.Connection | None:
    """A connection to the store at `path`, its schema made when the file is new; None when
    the file is not a database of this schema version (sqlite3.OperationalError when it
    cannot be opened, is read-only or stays locked: that is no damage)."""
    db = sqlite3.connect(path, timeout=BUSY_TIMEOUT, isolation_level=None,
                         check_same_thread=False)
    try:
        usable = _prepare(db)
    except sqlite3.OperationalError:
        db.close()
        raise
    except sqlite3.DatabaseError:  # not a database, or a damaged one
        usable = False
    if not usable:
        db.close()
        return None
    return db


def _prepare(db: sqlite3.Connection) -> bool:
    """Make the schema in an empty database; False for a database of another schema."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version != SCHEMA_VERSION:
        db.execute("BEGIN IMMEDIATE")
        try:
            version = db.execute("PRAGMA user_version").fetchone()[0]  # another process's?
            if version == 0 and not db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                for statement in _SCHEMA:
                    db.execute(statement)
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            elif version != SCHEMA_VERSION:
                db.execute("ROLLBACK")
                return False
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    db.execute("PRAGMA temp_store = MEMORY")
    db.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
    return True


def _set_aside(path: Path) -> bool:
    """Rename a damaged store to `*.damaged` (and remove its log), so a new one can be made."""
    try:
        os.replace(path, f"{path}.damaged")
        for suffix in ("-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    except OSError:
        return False
    return True


def _literal_prefix(pattern: str) -> str:
    """The part of a glob before its first special character (all of it: not a glob)."""
    for i, char in enumerate(pattern):
        if char in "*?[":
            return pattern[:i]
    return pattern


def _after(prefix: str) -> str:
    """The least string greater than every string that starts with `prefix`."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


def _glob(pattern: str) -> str:
    """An fnmatch pattern in SQLite's GLOB syntax (`[!...]` is `[^...]` there)."""
    return pattern.replace("[!", "[^")


def _release(version: str) -> tuple[str, str]:
    """The stored version strings that `version` names: itself (normalised) and, without a
    local label, the same release with any label."""
    try:
        parsed = Version(version)
    except InvalidVersion:
        return version, "\x00"
    text = str(parsed)
    return text, "\x00" if parsed.local else f"{text}+*"


def _version_key(version: str) -> tuple[int, Version | str]:
    try:
        return 0, Version(version)
    except InvalidVersion:
        return 1, version
