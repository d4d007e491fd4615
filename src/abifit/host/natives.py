"""The native files of an installed environment: which ELF files its distributions hold, which
are importable extension modules, and which are plugins that package code loads itself.

I/O at the edge: `scan_native_files` and `glob_files` read the file system; what decides a
module's name, its `PyInit_*` export and a plugin is pure and takes the parsed images through a
callable.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from abifit.errors import FormatError
from abifit.formats.elf import ElfImage, FileType, might_be_elf
from abifit.formats.sources import ObjectSource
from abifit.host.environment import (
    Distribution,
    InterpreterFacts,
)
from abifit.host.localfs import is_elf_file

if TYPE_CHECKING:

    pass


@dataclass(frozen=True, slots=True)
class NativeFile:
    """An ELF file of a distribution; `module` is set for an importable extension module.

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
    return any(name == wanted and table.is_defined(i) for i, name in enumerate(table.names))


def scan_native_files(
    facts: InterpreterFacts, dists: list[Distribution],
    image: Callable[[str], ElfImage | None],
) -> list[NativeFile]:
    """Every ELF file the distributions' RECORDs list; an extension module is one at an
    importable name that exports its `PyInit_*` function."""
    roots = [p for p in facts.sys_path if os.path.isdir(p)]
    found = []
    for dist in dists:
        for path in dist.files:
            if (might_be_elf(os.path.basename(path)) and not os.path.islink(path)
                    and is_elf_file(path)):
                name = module_name(path, roots, facts.extension_suffixes)
                if name is not None and not defines_init(image(path), name):
                    name = None
                found.append(NativeFile(path, dist.key, name))
    return mark_plugins(found, image, roots)


def _has_init(directory: str) -> bool:
    return os.path.isfile(os.path.join(directory, "__init__.py"))


def mark_plugins(natives: list[NativeFile], image: Callable[[str], ElfImage | None],
                 roots: list[str], package_dir: Callable[[str], bool] = _has_init
                 ) -> list[NativeFile]:
    """Libraries in a package directory that nothing links to are loaded by package code."""
    candidates = {n.path for n in natives if n.module is None
                  and package_dir(os.path.dirname(n.path))}
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
        if (n.path in candidates and img is not None and img.interpreter is None
                and img.file_type == FileType.DYN
                and os.path.basename(n.path) not in linked
                and (img.soname or "") not in linked):
            root = site_root(n.path, roots) or directory
            n = NativeFile(n.path, n.distribution, None, True, os.path.relpath(n.path, root))
        out.append(n)
    return out


def glob_files(directory: str, pattern: str) -> list[str]:
    """Paths under `directory` matching a relative glob pattern, sorted."""
    return sorted(str(p) for p in Path(directory).glob(pattern))


def image_or_none(source: ObjectSource) -> Callable[[str], ElfImage | None]:
    def image(path: str) -> ElfImage | None:
        try:
            return source.image(path)
        except (OSError, FormatError):
            return None

    return image


def short_name(native: NativeFile, roots: list[str]) -> str:
    """A module's name, a plugin's label, else the file's path inside its site-packages."""
    if native.module or native.label:
        return native.name
    root = site_root(native.path, roots)
    return os.path.relpath(native.path, root) if root else native.path
