"""Which native files of an environment use NumPy's C API, and how, read from their bytes.

The I/O edge of `formats.numpyapi`: for the files of the distributions that require numpy (the
only ones that can rely on its C API being importable), whose dynamic symbols show a capsule
being taken (`PyCapsule_GetPointer`, which `import_array()` calls), the string literals of
`.rodata` are read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from abifit.errors import FormatError
from abifit.formats.elf import ElfImage, Section
from abifit.formats.numpyapi import NumpyUse, read_numpy_use
from abifit.formats.sources import FileSource
from abifit.host.natives import NativeFile

CAPSULE = "PyCapsule_GetPointer"


def takes_capsule(image: ElfImage) -> bool:
    """Whether the object leaves `PyCapsule_GetPointer` undefined (it takes a capsule: NumPy's
    `_ARRAY_API` is one)."""
    table = image.symbols
    return any(not table.is_defined(i) for i in table.positions(CAPSULE))


def numpy_candidates(natives: Iterable[NativeFile], requires_numpy: Callable[[str], bool],
                     image: Callable[[str], ElfImage | None]) -> list[tuple[str, ElfImage]]:
    """The files whose use of NumPy's C API is worth reading, with their images: of a
    distribution that requires numpy, taking a capsule."""
    out = []
    for native in natives:
        if not native.distribution or not requires_numpy(native.distribution):
            continue
        img = image(native.path)
        if img is not None and takes_capsule(img):
            out.append((native.path, img))
    return out


def read_numpy_uses(files: Iterable[tuple[str, tuple[Section, ...]]]) -> dict[str, NumpyUse]:
    """`read_numpy_use` of each local file, with the section headers of its image (parsed
    already: only the string sections are read); a file that cannot be read is left out (its
    load is judged, and reported, by the loader simulation). A function another process can
    run."""
    found: dict[str, NumpyUse] = {}
    for path, sections in files:
        try:
            with FileSource(path) as source:
                use = read_numpy_use(source, sections)
        except (OSError, FormatError):
            continue
        if use is not None:
            found[path] = use
    return found
