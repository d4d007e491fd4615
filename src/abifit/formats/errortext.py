"""Pasted error text read for the loader and CUDA failures it reports: one `Clue` per message.

`read_clues` takes what a user pasted (one message, a whole traceback, a terminal's coloured and
wrapped output) and returns the messages it recognises, in the order they appear, each once:

- `UndefinedSymbol`: ``[OBJ: ]undefined symbol: NAME[, version V]`` (glibc's `dlopen` error;
  ``(NAME)`` too), and glibc's ``OBJ: symbol NAME version V not defined in file LIB with link
  time reference``;
- `MissingLibrary`: ``LIB: cannot open shared object file: No such file or directory``, with
  the program before ``error while loading shared libraries:`` when there is one;
- `MissingVersion`: ``[LIB: ]version `V' not found (required by OBJ)`` (GLIBC_, GLIBCXX_,
  CXXABI_ and any other version node);
- `NoKernelImage`: CUDA's ``no kernel image is available for execution on the device``;
- `UnsupportedArch`: torch's ``... with CUDA capability sm_120 is not compatible with the
  current PyTorch installation. The current PyTorch install supports CUDA capabilities ...``;
- `DriverTooOld`: CUDA's ``CUDA driver version is insufficient for CUDA runtime version``;
- `MissingOperator`: ``operator torchvision::nms does not exist`` (torchvision's mask of a
  `_C.so` that did not load);
- `CouldNotLoad`: ``Could not load this library: PATH`` (`torch.ops.load_library`'s mask);
- `CudaMajorMismatch`: torchvision's ``PyTorch has CUDA Version=X.Y and torchvision has CUDA
  Version=Z.W``;
- `DamagedObject`: ``OBJ: file too short``, ``OBJ: invalid ELF header`` and the loader's other
  refusals of a file it found (`LOADER_REFUSALS`);
- `BusError`: ``Bus error`` (the shell's word for a process SIGBUS killed; ``Fatal Python error:
  Bus error`` with faulthandler), what loading a library cut short does.

Pure: text in, frozen values out.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class UndefinedSymbol:
    """The loader found no definition of `symbol` for `obj` (None: the message names none)."""

    obj: str | None
    symbol: str


@dataclass(frozen=True, slots=True)
class MissingLibrary:
    """The loader found no file for `library`, needed by `obj` when the message names it."""

    library: str
    obj: str | None


@dataclass(frozen=True, slots=True)
class MissingVersion:
    """`library` (when named) does not define the version node `version` that `obj` needs."""

    version: str
    library: str | None
    obj: str | None


@dataclass(frozen=True, slots=True)
class NoKernelImage:
    """A kernel was launched on a GPU that none of the loaded code can run on."""


@dataclass(frozen=True, slots=True)
class UnsupportedArch:
    """torch's warning: the GPU's `arch` is not among the `supported` architectures of its
    build (empty when the message was cut before the list)."""

    arch: str
    supported: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DriverTooOld:
    """The NVIDIA driver supports an older CUDA than the runtime a library was built with."""


@dataclass(frozen=True, slots=True)
class MissingOperator:
    """A registered operator that is not there (`torchvision::nms`): its library did not load."""

    namespace: str
    name: str


@dataclass(frozen=True, slots=True)
class CouldNotLoad:
    """`torch.ops.load_library` could not load `path`: the loader's error is hidden."""

    path: str


@dataclass(frozen=True, slots=True)
class CudaMajorMismatch:
    """torchvision was built for another CUDA major than torch."""

    torch_cuda: str
    vision_cuda: str


@dataclass(frozen=True, slots=True)
class DamagedObject:
    """The loader found `obj` and refused it, in the words `said` (`LOADER_REFUSALS`): damaged,
    cut short, or not a shared object."""

    obj: str
    said: str


@dataclass(frozen=True, slots=True)
class BusError:
    """A process died of SIGBUS: the message names no file."""


@dataclass(frozen=True, slots=True)
class NumpyContract:
    """An import broke NumPy's C-API contract (`abifit.sim.numpyabi`): Cython's dtype size
    check, NumPy 2's banner for a module built with 1.x headers, `import_array()`'s error, or
    a feature version newer than the running NumPy's; `said` is the message as written."""

    said: str


# glibc's words for a file its loader found and will not load (elf/dl-load.c): what
# `abifit.sim.loader` says of such a file, in the order glibc checks
LOADER_REFUSALS = (
    "file too short", "cannot read file data", "invalid ELF header",
    "ELF file data encoding not little-endian", "ELF file data encoding not big-endian",
    "ELF file version ident does not match current one", "ELF file OS ABI invalid",
    "ELF file ABI version invalid", "nonzero padding in e_ident",
    "ELF file version does not match current one", "only ET_DYN and ET_EXEC can be loaded",
    "ELF file's phentsize not the expected size", "cannot dynamically load executable",
    "object file has no loadable segments", "object file has no dynamic section",
    "cannot dynamically load position-independent executable",
)

Clue = (UndefinedSymbol | MissingLibrary | MissingVersion | NoKernelImage | UnsupportedArch
        | DriverTooOld | MissingOperator | CouldNotLoad | CudaMajorMismatch | DamagedObject
        | BusError | NumpyContract)

CLUE_KINDS: dict[type[Clue], str] = {
    UndefinedSymbol: "undefined-symbol", MissingLibrary: "missing-library",
    MissingVersion: "missing-version", NoKernelImage: "no-kernel-image",
    UnsupportedArch: "unsupported-arch", DriverTooOld: "driver-too-old",
    MissingOperator: "missing-operator", CouldNotLoad: "could-not-load",
    CudaMajorMismatch: "cuda-major-mismatch", DamagedObject: "damaged-object",
    BusError: "bus-error", NumpyContract: "numpy-c-api",
}


def clue_kind(clue: Clue) -> str:
    """The clue's kind as reports print it ("undefined-symbol")."""
    return CLUE_KINDS[type(clue)]


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
# a new message, never the tail of a wrapped line
_STARTS_MESSAGE = re.compile(r"(?:[\w.]+(?:Error|Exception|Warning|Exit)\b|Traceback|During "
                             r"|The above|File |\[|error|warning|hint|\$|>>>)")
_TOKEN = r"[\w$.@/+-]"
_PATH = r"[^\s:'\"()`]+"  # a file name or path, as the loader prints it
# where a path may start: not just after a character a path holds. The leftmost match starts
# there anyway; without it each position inside a long token is tried again (quadratic)
_AT = r"(?<![^\s:'\"()`])"
_SO = rf"{_AT}(?:{_PATH}\.so(?:\.[\w.]+)?|/{_PATH})"

_UNDEFINED = re.compile(
    rf"(?:(?P<obj>{_SO})\s*:\s*)?undefined\s+symbol\s*:?\s*\(?\s*(?P<sym>[A-Za-z_.$][\w.$@]*)\)?")
_NOT_DEFINED_IN_FILE = re.compile(  # glibc elf/dl-lookup.c, a version the file hides
    rf"(?:(?P<obj>{_SO})\s*:\s*)?symbol\s+(?P<sym>[A-Za-z_.$][\w.$@]*)\s+version\s+\S+"
    rf"\s+not\s+defined\s+in\s+file\s+{_PATH}\s+with\s+link\s+time\s+reference")
_MISSING_LIBRARY = re.compile(
    rf"(?:(?P<obj>{_AT}{_PATH})\s*:\s*error\s+while\s+loading\s+shared\s+libraries\s*:\s*)?"
    rf"(?P<lib>{_AT}{_PATH})\s*:\s*cannot\s+open\s+shared\s+object\s+file")
_MISSING_VERSION = re.compile(  # quoted `V' by glibc, \u2018V\u2019 where a terminal prettifies it
    rf"(?:(?P<lib>{_SO})\s*:\s*)?version\s+[`'\u2018\"](?P<ver>[^`'\u2019\"\s]+)"
    rf"[`'\u2019\"]\s+not\s+found"
    rf"(?:\s*\(\s*required\s+by\s+(?P<obj>[^\s()]+)\s*\))?")
_NO_KERNEL = re.compile(r"no\s+kernel\s+image\s+is\s+available\s+for\s+execution\s+on\s+the"
                        r"\s+device")
_ARCH = r"(?:sm|compute)_\d+[a-z]?"
_UNSUPPORTED = re.compile(
    rf"(?:CUDA\s+capability\s+)?(?P<arch>sm_\d+[a-z]?)\s+is\s+not\s+compatible\s+with\s+the"
    rf"\s+current\s+PyTorch\s+installation\.?(?:\s*The\s+current\s+PyTorch\s+install\s+supports"
    rf"\s+CUDA\s+capabilities\s+(?P<supported>{_ARCH}(?:\s+{_ARCH})*))?")
_DRIVER = re.compile(r"CUDA\s+driver\s+version\s+is\s+insufficient\s+for\s+CUDA\s+runtime"
                     r"\s+version")
_OPERATOR = re.compile(r"operator\s+(?P<ns>\w+)::(?P<name>\w+)\s+does\s+not\s+exist")
_COULD_NOT_LOAD = re.compile(rf"Could\s+not\s+load\s+this\s+library\s*:\s*(?P<path>{_PATH})")
_CUDA_MAJORS = re.compile(
    r"PyTorch\s+has\s+CUDA\s+Version\s*=\s*(?P<torch>\d+(?:\.\d+)*)\s+and\s+torchvision\s+has"
    r"\s+CUDA\s+Version\s*=\s*(?P<vision>\d+(?:\.\d+)*)")

_REFUSED = re.compile(rf"(?P<obj>{_AT}{_PATH})\s*:\s*(?P<said>"
                      + "|".join(re.escape(said) for said in LOADER_REFUSALS) + ")")
_BUS_ERROR = re.compile(r"\bBus error\b")
_NUMPY = re.compile(
    r"numpy\.dtype\s+size\s+changed,\s+may\s+indicate\s+binary\s+incompatibility[^\n]*"
    r"|A\s+module\s+that\s+was\s+compiled\s+using\s+NumPy\s+1\.x\s+cannot\s+be\s+run\s+in"
    r"\s+NumPy\s+[\w.]+"
    r"|module\s+was\s+compiled\s+against\s+NumPy\s+C-API\s+version\s+\w+\s+\(NumPy\s+[\d.]+\)"
    r"[^\n.]*"
    r"|numpy\.(?:_core|core)\.(?:multiarray|umath)\s+failed\s+to\s+import")


def _trim(path: str | None) -> str | None:
    """A path as the message names it, without the punctuation of the text around it."""
    return path.rstrip(".,;") if path else None


def _undefined(m: re.Match[str]) -> Clue:
    return UndefinedSymbol(_trim(m["obj"]), m["sym"].rstrip("."))


def _missing_library(m: re.Match[str]) -> Clue:
    return MissingLibrary(m["lib"], _trim(m["obj"]))


def _missing_version(m: re.Match[str]) -> Clue:
    return MissingVersion(m["ver"], _trim(m["lib"]), _trim(m["obj"]))


def _unsupported(m: re.Match[str]) -> Clue:
    return UnsupportedArch(m["arch"], tuple((m["supported"] or "").split()))


_READERS = (
    (_UNDEFINED, _undefined),
    (_NOT_DEFINED_IN_FILE, _undefined),
    (_MISSING_LIBRARY, _missing_library),
    (_MISSING_VERSION, _missing_version),
    (_NO_KERNEL, lambda _m: NoKernelImage()),
    (_UNSUPPORTED, _unsupported),
    (_DRIVER, lambda _m: DriverTooOld()),
    (_OPERATOR, lambda m: MissingOperator(m["ns"], m["name"])),
    (_COULD_NOT_LOAD, lambda m: CouldNotLoad(m["path"].rstrip(".,;"))),
    (_CUDA_MAJORS, lambda m: CudaMajorMismatch(m["torch"], m["vision"])),
    (_REFUSED, lambda m: DamagedObject(m["obj"], m["said"])),
    (_BUS_ERROR, lambda _m: BusError()),
    (_NUMPY, lambda m: NumpyContract(" ".join(m[0].split()))),
)


_WIDTHS = frozenset({80, 100, 120, 160, 200, 240})  # terminals' widths


def unwrap(text: str) -> str:
    """`text` without colour codes and with lines a terminal wrapped joined again: a line that
    ends inside a name and fills the terminal (a common width, or the length of another line
    that does), followed by an unindented line that goes on with a name and does not start a
    message of its own."""
    lines = _ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "\n").split("\n")
    lengths = Counter(len(line) for line in lines)
    out: list[str] = []
    for i, line in enumerate(lines):
        prev = lines[i - 1] if i else ""
        width = len(prev)
        if (out and width >= 60 and (width in _WIDTHS or lengths[width] >= 2)
                and re.search(rf"{_TOKEN}$", prev) and re.match(_TOKEN, line)
                and not _STARTS_MESSAGE.match(line)):
            out[-1] += line
        else:
            out.append(line)
    return "\n".join(out)


def read_clues(text: str) -> tuple[Clue, ...]:
    """The messages of `text` that abifit recognises, in the order they appear, each once."""
    plain = unwrap(text)
    found: list[tuple[int, Clue]] = []
    for pattern, make in _READERS:
        found += [(m.start(), make(m)) for m in pattern.finditer(plain)]
    found.sort(key=lambda f: f[0])
    clues = tuple(dict.fromkeys(clue for _, clue in found))
    return tuple(c for c in clues if not _said_in_full(c, clues))


def _said_in_full(clue: Clue, clues: tuple[Clue, ...]) -> bool:
    """Whether `clue` names no object and another clue says the same with one (Python's
    exception repeats the loader's message that a log printed in full)."""
    if isinstance(clue, UndefinedSymbol) and clue.obj is None:
        return any(isinstance(c, UndefinedSymbol) and c.obj and c.symbol == clue.symbol
                   for c in clues)
    if isinstance(clue, MissingLibrary) and clue.obj is None:
        return any(isinstance(c, MissingLibrary) and c.obj and c.library == clue.library
                   for c in clues)
    if isinstance(clue, MissingVersion) and clue.obj is None:
        return any(isinstance(c, MissingVersion) and c.obj and c.version == clue.version
                   for c in clues)
    return False
