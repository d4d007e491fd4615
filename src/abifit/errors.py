"""Errors: abifit could not analyse something.

An *error* means the input could not be read or understood; a *finding* (a problem abifit found in
something it could read) is data in a report and is never raised.

    AbifitError                   base of everything abifit raises on purpose
    ├── UsageError                a target or option that names nothing usable
    ├── LocatedError              an error about bytes at a place (file, member, offset)
    │   ├── WheelRefused          a wheel pip refuses: a name escaping the tree, headers that
    │   │                         disagree, a CRC or sha256 that does not match
    │   └── FormatError           bytes that do not form what they claim to be
    │       ├── ElfError          not an ELF file, truncated, offsets or counts out of range
    │       ├── WheelError        not a zip, a corrupt zip, a zip that is not a wheel
    │       └── OtherVersion      a cache entry or host profile of another format version
    ├── EnvironmentQueryError     a Python interpreter that could not be asked for its facts
    ├── CacheError                a cache operation that could not be done (a read-only cache)
    ├── HttpError                 a URL that could not be fetched, or was answered wrongly
    ├── IndexUnavailable          an index page that could not be fetched
    ├── _Hinted                   one line, and a `hint:` line under it when there is a hint
    │   ├── PackageNotFound       no configured index or find-links location has the project
    │   └── NoMatchingWheel       the project has no wheel for the requirement and the target
    ├── _Retry                    internal: an HTTP attempt worth another; never leaves the client
    ├── _WorkerDied               internal: a worker process that died; its call runs in-process
    ├── ForkFailed                a `fork_call` fork that ended without its answer
    └── ClusterError              a Ray cluster (`--ray`) that does not answer

This module defines `AbifitError`, `UsageError`, `LocatedError`, `FormatError`, `ElfError`,
`WheelError`, `WheelRefused`, `EnvironmentQueryError` and `CacheError`, and `first_line`, an
error as one line. The others are defined
beside the code that raises them, so that no module imports from a layer above its own:
`OtherVersion` in `abifit.formats.datacodec`, `HttpError` and `_Retry` in `abifit.remote.http`,
`IndexUnavailable`, `_Hinted`, `PackageNotFound` and `NoMatchingWheel` in
`abifit.remote.packageindex`, `_WorkerDied` and `ForkFailed` in `abifit.workers`, `ClusterError`
in `abifit.engines.cluster`. The two
internal ones are caught where they are raised (`HttpClient` retries or turns `_Retry` into an
`HttpError`; the worker pool runs the call in the calling thread after `_WorkerDied`) and never
reach a caller; `ForkFailed` reaches only the caller of `fork_call`, which computes the call
itself then.

Every error renders as one line that names what could not be read: the file (and the member
inside a wheel, and the offset where that is known), the URL, the interpreter, the input as given;
a `_Hinted` one adds its `hint:` line.
"""

from __future__ import annotations


class AbifitError(Exception):
    """Base class of the errors abifit raises on purpose."""


class UsageError(AbifitError):
    """A command-line target or option that does not name anything abifit can read; with a
    `hint:` line under it when a fix is known."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(message if hint is None else f"{message}\nhint: {hint}")

    def __reduce__(self) -> tuple[type[UsageError], tuple[str, str | None]]:
        return type(self), (self.message, self.hint)


class LocatedError(AbifitError):
    """An error about bytes at a place: `where` names the file (with the member for wheel
    members); `offset` is the byte offset in that file or member where the problem was seen,
    when known."""

    def __init__(self, where: str, problem: str, offset: int | None = None) -> None:
        self.where = where
        self.problem = problem
        self.offset = offset
        at = f" at offset {offset:#x}" if offset is not None else ""
        super().__init__(f"{where}: {problem}{at}")

    def __reduce__(self) -> tuple[type[LocatedError], tuple[str, str, int | None]]:
        return type(self), (self.where, self.problem, self.offset)  # pickles (a worker's error)


class FormatError(LocatedError):
    """Bytes that do not form the format they claim to be: where the bytes come from is known,
    and what cannot be read of them becomes a finding (an unreadable module) or an error."""


class ElfError(FormatError):
    """Not an ELF file, or an ELF file that is truncated or inconsistent. `size` is the size of
    the bytes read, `encoding` the byte of the ELF identification that gives the byte order
    (EI_DATA), when known; `refusal` is what glibc's loader says of the file when the problem
    lies in what it reads before mapping anything (the ELF header, the program header table):
    "invalid ELF header", "cannot read file data", "nonzero padding in e_ident"...
    (`abifit.formats.elf`); None when the loader would map the file. `cut` says where the file
    ends when it ends inside what the loader maps (`abifit.formats.elf.cut_short`)."""

    def __init__(self, where: str, problem: str, offset: int | None = None,
                 size: int | None = None, refusal: str | None = None,
                 encoding: int | None = None, cut: str | None = None) -> None:
        super().__init__(where, problem, offset)
        self.size = size
        self.refusal = refusal
        self.encoding = encoding
        self.cut = cut

    def __reduce__(self) -> tuple[type[ElfError], tuple[str, str, int | None,  # type: ignore[override]
                                                        int | None, str | None, int | None,
                                                        str | None]]:
        return type(self), (self.where, self.problem, self.offset, self.size, self.refusal,
                            self.encoding, self.cut)


class WheelError(FormatError):
    """Not a zip file, a corrupt zip file, or a zip file that is not a wheel."""


class WheelRefused(LocatedError):
    """A wheel that pip refuses to install, and so abifit refuses to read: a member name that
    escapes the install tree, a local header that names another file than the central directory,
    member bytes whose CRC-32 or a file whose sha256 is not the one given for it. It is an error
    for the whole wheel, never a finding about one member: not a `FormatError`, so that nothing
    that turns unreadable bytes into a finding catches it."""


class EnvironmentQueryError(AbifitError):
    """A Python interpreter that could not be run or did not answer as expected."""


class CacheError(AbifitError):
    """A cache operation that could not be done, such as cleaning a cache one may not write."""


def first_line(error: BaseException) -> str:
    """An error's first line, or its type's name where it says nothing: how an error is named
    where one line is all there is room for (a wheel that failed, a task that failed)."""
    text = str(error)
    return text.splitlines()[0] if text else type(error).__name__
