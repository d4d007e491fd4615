"""Errors: abifit could not analyse something.

An *error* means the input could not be read or understood; a *finding* (a problem abifit found in
something it could read) is data in a report and is never raised.

    AbifitError                   base of everything abifit raises on purpose
    ├── UsageError                a target or option that names nothing usable
    ├── FormatError               bytes that do not form what they claim to be
    │   ├── ElfError              not an ELF file, truncated, offsets or counts out of range
    │   └── WheelError            not a zip, a corrupt zip, a zip that is not a wheel
    └── EnvironmentQueryError     a Python interpreter that could not be asked for its facts

Every error renders as one line that names the file (and the member inside a wheel, and the offset
where that is known).
"""

from __future__ import annotations


class AbifitError(Exception):
    """Base class of the errors abifit raises on purpose."""


class UsageError(AbifitError):
    """A command-line target or option that does not name anything abifit can read."""


class FormatError(AbifitError):
    """Bytes that do not form the format they claim to be.

    `where` names the file (with the member for wheel members); `offset` is the byte offset in that
    file or member where the problem was seen, when known.
    """

    def __init__(self, where: str, problem: str, offset: int | None = None) -> None:
        self.where = where
        self.problem = problem
        self.offset = offset
        at = f" at offset {offset:#x}" if offset is not None else ""
        super().__init__(f"{where}: {problem}{at}")

    def __reduce__(self) -> tuple[type[FormatError], tuple[str, str, int | None]]:
        return type(self), (self.where, self.problem, self.offset)  # pickles (a worker's error)

    def relocated(self, where: str) -> FormatError:
        """The same error, attributed to another name (a wheel member instead of a byte source)."""
        return type(self)(where, self.problem, self.offset)


class ElfError(FormatError):
    """Not an ELF file, or an ELF file that is truncated or inconsistent."""


class WheelError(FormatError):
    """Not a zip file, a corrupt zip file, or a zip file that is not a wheel."""


class EnvironmentQueryError(AbifitError):
    """A Python interpreter that could not be run or did not answer as expected."""
