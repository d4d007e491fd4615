"""The native files of an installed environment: which ELF files its distributions hold, which
are importable extension modules, and which are plugins that package code loads itself.

Files no distribution claims are *loose*: an extension module dropped into site-packages, a
package copied onto `sys.path`. `loose_files` finds them on the interpreter's path, but not in its
own module directories (the stdlib, lib-dynload: those modules are the interpreter's), without
walking more than the top of each directory and the regular packages (`__init__.py`) that no
distribution claims.

I/O at the edge: `scan_native_files`, `loose_files` and `glob_files` read the file system; what
decides a module's name, its `PyInit_*` export and a plugin is pure and takes the parsed images
through a callable.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

from abifit.errors import FormatError
from abifit.formats.elf import DF_1_PIE, ElfImage, FileType, might_be_elf
from abifit.formats.objects import ObjectSource
from abifit.host import observe
from abifit.host.environment import (
    Distribution,
    InterpreterFacts,
)
from abifit.host.localfs import LocalObjects, is_elf_file, special_kind

NO_DISTRIBUTION = ""  # the `distribution` of a loose file


@dataclass(frozen=True, slots=True)
class NativeFile:
    """An ELF file of a distribution (`distribution` is its key, or `NO_DISTRIBUTION` for a
    loose file); `module` is set for an importable extension module.

    A *plugin* is a library inside a Python package that no ELF file of the environment links
    to: packages load those themselves (`ctypes`, `torch.ops.load_library`), with RTLD_NOW.
    """

    path: str
    distribution: str
    module: str | None
    plugin: bool = False
    label: str = ""

    @property
    def name(self) -> str:
        return self.module or self.label or self.path

    @property
    def checked(self) -> bool:
        return self.module is not None or self.plugin


def module_name(path: str, roots: Iterable[str], suffixes: Iterable[str]) -> str | None:
    """The dotted name under which an extension module at `path` is imported, if any."""
    base = os.path.basename(path)
    suffix = next((s for s in sorted(suffixes, key=len, reverse=True) if base.endswith(s)), None)
    if suffix is None:
        return None
    for root in sorted(roots, key=len, reverse=True):
        prefix = root.rstrip("/") + "/"
        if path.startswith(prefix):
            rel = path[len(prefix):-len(suffix)]
            parts = rel.split("/")
            if all(part.isidentifier() for part in parts):
                return ".".join(parts)
    return None


def site_root(path: str, roots: Iterable[str]) -> str | None:
    """The deepest of `roots` (site-packages directories) that holds `path`, if any."""
    return next((r for r in sorted(roots, key=len, reverse=True)
                 if path.startswith(r.rstrip("/") + "/")), None)


def defines_init(image: ElfImage | None, module: str) -> bool:
    """Whether an object exports the `PyInit_<name>` function that makes it an extension module."""
    if image is None:
        return False
    wanted = "PyInit_" + module.rsplit(".", 1)[-1]
    table = image.symbols
    return any(table.is_defined(i) for i in table.positions(wanted))


def scan_native_files(
    facts: InterpreterFacts, dists: list[Distribution],
    image: Callable[[str], ElfImage | None], *, loose: bool = False,
    head: Callable[[str], ElfImage | None] | None = None,
) -> list[NativeFile]:
    """Every ELF file the distributions list; an extension module is one at an importable name
    that exports its `PyInit_*` function. A file two distributions claim is the first's that
    lists it (listed files before inferred ones). With `loose`, also the ELF files on the
    interpreter's path that no distribution claims (`loose_files`), of no distribution.
    `head` reads the files that are not extension modules (`mark_plugins` needs no more of
    them); by default `image` does."""
    roots = [p for p in facts.sys_path if observe.isdir(p)]
    found: list[NativeFile] = []
    claimed: set[str] = set()

    def add(path: str, key: str) -> None:
        if (path in claimed or not might_be_elf(path.rpartition("/")[2])
                or not _regular_not_link(path)):
            return
        name = module_name(path, roots, facts.extension_suffixes)
        if not is_elf_file(path) and name is None:
            return
        claimed.add(path)
        if name is not None:
            # an extension module that cannot be read (empty, truncated, not ELF) stays one:
            # importing it fails, and the simulation says why
            read = image(path)
            if read is not None and not defines_init(read, name):
                name = None
        found.append(NativeFile(path, key, name))

    for dist in sorted(dists, key=lambda d: d.inferred):
        key = dist.key
        for path in dist.files:
            add(path, key)
    if loose:
        owned = {f for dist in dists for f in dist.files}
        for path in loose_files(search_dirs(facts), facts.extension_suffixes, owned):
            add(path, NO_DISTRIBUTION)
    return mark_plugins(found, head or image, roots)


def has_shared_objects(dist: Distribution) -> bool:
    """Whether the distribution lists a file named like a shared object (`x.so`, `libx.so.1`)."""
    return any(".so" in path.rpartition("/")[2] and might_be_elf(path) for path in dist.files
               if ".so" in path)


def parse_ahead_names(dists: Iterable[Distribution], executable: Callable[[str], bool],
                      ) -> tuple[list[str], list[str]]:
    """Nearly all the files `scan_native_files` will read, to be read ahead: those the
    distributions list that are named like shared objects, to be parsed whole, and those with
    no dot in their name that are `executable` (`bin/protoc`, not `zoneinfo/Europe/Paris`), of
    which the scan reads the head only (programs: what they link to, see `mark_plugins`)."""
    objects: list[str] = []
    programs: list[str] = []
    for dist in dists:
        for path in dist.files:
            if might_be_elf(path):
                base = path.rpartition("/")[2]
                if ".so" in base:
                    objects.append(path)
                elif "." not in base and executable(path):
                    programs.append(path)
    return objects, programs


def executable_file(path: str) -> bool:
    """Whether `path` is a file someone may execute (False when it cannot be read)."""
    try:
        return bool(observe.stat(path).st_mode & 0o111)
    except OSError:
        return False


def not_files(facts: InterpreterFacts, dists: list[Distribution]) -> list[NotAFile]:
    """Entries the distributions list that are named like an extension module but are not
    regular files: a directory, a FIFO or device, a symbolic link that cannot be followed. The
    import system skips them (so the module is not found), unless a regular file beside it
    provides the module (another extension suffix, a `.py`, a package), which leaves it out."""
    roots = [p for p in facts.sys_path if observe.isdir(p)]
    ends = tuple(facts.extension_suffixes)
    out = []
    for dist in dists:
        for path in dist.files:
            module = module_name(path, roots, ends) if path.endswith(ends) else None
            what = None if module is None else _not_regular(path)
            if module is not None and what is not None and \
                    not _provided(path, module, facts.extension_suffixes):
                out.append(NotAFile(path, dist.key, module, what))
    return out


@dataclass(frozen=True, slots=True)
class NotAFile:
    """An entry named like an extension module that is not a regular file."""

    path: str
    distribution: str
    module: str
    what: str  # "a directory", "a named pipe", ...


def _not_regular(path: str) -> str | None:
    """What `path` is when it is not a regular file (None when it is one, or is not there)."""
    try:
        mode = observe.stat(path).st_mode
    except OSError as e:
        if not observe.islink(path):
            return None
        loop = e.errno == errno.ELOOP
        return "a symbolic link loop" if loop else "a symbolic link to nothing"
    return special_kind(mode)


def _provided(path: str, module: str, suffixes: Iterable[str]) -> bool:
    """Whether a regular file beside `path` provides `module`: another extension suffix, a
    `.py`, or a package directory."""
    directory, leaf = os.path.dirname(path), module.rpartition(".")[2]
    beside = [os.path.join(directory, leaf + s) for s in (*suffixes, ".py")]
    beside.append(os.path.join(directory, leaf, "__init__.py"))
    return any(p != path and observe.isfile(p) for p in beside)


def _regular_not_link(path: str) -> bool:
    """Whether `path` is a regular file and not a link to one (one `lstat`)."""
    try:
        return stat.S_ISREG(observe.lstat(path).st_mode)
    except OSError:
        return False


def search_dirs(facts: InterpreterFacts) -> list[str]:
    """The directories on the interpreter's path, but its own module directories (stdlib,
    lib-dynload), once each."""
    own = {observe.realpath(d) for d in facts.stdlib_dirs}
    out: dict[str, str] = {}
    for entry in facts.sys_path:
        real = observe.realpath(entry)
        if real not in own and real not in out and observe.isdir(entry):
            out[real] = entry
    return list(out.values())


def loose_files(dirs: Iterable[str], suffixes: Iterable[str],
                owned: Collection[str]) -> list[str]:
    """Files in `dirs` that may be native and that no distribution owns (not in `owned`): the
    extension modules at the top of each directory, and every file under a regular package
    (a directory with `__init__.py`) whose `__init__.py` no distribution owns, in its
    importable subdirectories. Candidates only: the caller checks that they are ELF files."""
    ends = tuple(suffixes)
    out: list[str] = []
    for root in dirs:
        try:
            entries = sorted(observe.scandir(root), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            path = os.path.join(root, entry.name)
            if entry.name.endswith(ends) and entry.is_file() and path not in owned:
                out.append(path)
            elif (entry.name.isidentifier() and entry.name != "__pycache__"
                  and os.path.join(path, "__init__.py") not in owned
                  and entry.is_dir() and observe.isfile(os.path.join(path, "__init__.py"))):
                out += [f for f in _package_files(path) if f not in owned]
    return out


def _package_files(package: str) -> list[str]:
    """The files under a package directory that may be native, in its importable subdirectories."""
    out = []
    for directory, subdirs, files in observe.walk(package):
        subdirs[:] = sorted(d for d in subdirs if d.isidentifier() and d != "__pycache__")
        out += [os.path.join(directory, f) for f in sorted(files) if might_be_elf(f)]
    return out


def _has_init(directory: str) -> bool:
    return observe.isfile(os.path.join(directory, "__init__.py"))


def mark_plugins(natives: list[NativeFile], image: Callable[[str], ElfImage | None],
                 roots: list[str], package_dir: Callable[[str], bool] = _has_init
                 ) -> list[NativeFile]:
    """Libraries in a package directory that nothing links to are loaded by package code; so
    are those of a distribution that ships no extension module (a library-only wheel such as
    mlx-cpu's `mlx/lib/libmlx.so`: what it ships is for others to load). `image` may give
    heads (`abifit.formats.elf.parse_elf` with `symbols=False`): only what a file is and what
    it links to are read."""
    with_modules = {n.distribution for n in natives if n.module is not None}
    candidates = {n.path for n in natives if n.module is None
                  and (package_dir(os.path.dirname(n.path))
                       or (n.distribution and n.distribution not in with_modules))}
    if not candidates:
        return natives
    linked: set[str] = set()
    images = {n.path: image(n.path) for n in natives}
    for img in images.values():
        if img is not None:
            linked.update(img.needed)
    out = []
    for n in natives:
        img = images[n.path]
        directory = os.path.dirname(n.path)
        if (n.path in candidates and img is not None and _library(img)
                and os.path.basename(n.path) not in linked
                and (img.soname or "") not in linked):
            root = site_root(n.path, roots) or directory
            n = NativeFile(n.path, n.distribution, None, True, os.path.relpath(n.path, root))
        out.append(n)
    return out


def _library(img: ElfImage) -> bool:
    """Whether a file is a shared library, not a program: a program with an interpreter, or a
    static position-independent one (DF_1_PIE, as selenium's `selenium-manager`), is run, never
    loaded by package code."""
    return (img.interpreter is None and img.file_type == FileType.DYN
            and not (img.dynamic is not None and img.dynamic.flags_1 & DF_1_PIE))


def glob_files(directory: str, pattern: str) -> list[str]:
    """Paths under `directory` matching a relative glob pattern, sorted."""
    return sorted(observe.glob(str(Path(directory, pattern)), hidden=True))


def heads_or_none(source: LocalObjects) -> Callable[[str], ElfImage | None]:
    """`image_or_none` for heads (`LocalObjects.head`)."""
    return _or_none(source.head)


def image_or_none(source: ObjectSource) -> Callable[[str], ElfImage | None]:
    """The source's image of a path; None for a file that cannot be read or is no ELF file."""
    return _or_none(source.image)


def _or_none(read: Callable[[str], ElfImage]) -> Callable[[str], ElfImage | None]:
    def image(path: str) -> ElfImage | None:
        try:
            return read(path)
        except (OSError, FormatError):
            return None

    return image


def short_name(native: NativeFile, roots: list[str]) -> str:
    """A module's name, a plugin's label, else the file's path inside its site-packages."""
    if native.module or native.label:
        return native.name
    root = site_root(native.path, roots)
    return os.path.relpath(native.path, root) if root else native.path
