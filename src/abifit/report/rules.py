"""What each kind of problem means, for the reports CI systems read: SARIF's rules (an id, a
short description, a help text), and the titles of annotations. A finding's rule is its kind
(`sim.findings.FindingKind`); `diff`'s is the kind of its change; `check` and `resolve` add
the two problems that are no finding (a machine without the NVIDIA driver, no set that fits).
"""

from __future__ import annotations

from dataclasses import dataclass

from abifit.sim.findings import FindingKind


@dataclass(frozen=True, slots=True)
class Rule:
    """A kind of problem: its id (the kind's value), what it is in a line, and what to do."""

    id: str
    short: str
    help: str


def _rules(*rows: tuple[str, str, str]) -> dict[str, Rule]:
    return {id_: Rule(id_, short, help_) for id_, short, help_ in rows}


FINDING_RULES = _rules(
    (FindingKind.MISSING_LIBRARY.value, "A library the file needs is not found",
     "The loader finds no file for a library the file names (DT_NEEDED). When the stack has "
     "it in another major, use a build of the package made for the stack's release; when a "
     "package should ship it, install that package; else install the library."),
    (FindingKind.WRONG_ELF_CLASS.value, "A library found is for another machine",
     "The file the loader finds under the library's name is for another architecture or word "
     "size, and the loader skips it. Install the build for this machine."),
    (FindingKind.UNREADABLE_OBJECT.value, "A file cannot be loaded as it is",
     "The file is cut short, damaged, or not an ELF object the loader accepts. Reinstall the "
     "package, or use another wheel of it."),
    (FindingKind.NOT_A_FILE.value, "A module's name is not a regular file",
     "Something named like an extension module is a directory, a FIFO or a broken link: the "
     "import system skips it and the import fails. Reinstall the package."),
    (FindingKind.MISSING_VERSION.value, "A symbol version the file needs is not defined",
     "The file needs a version node (GLIBC_2.28, GLIBCXX_3.4.30, ...) that the library found "
     "lacks: the file was built for a newer glibc, libstdc++ or library. Use a wheel built "
     "for an older system (a lower manylinux tag), or a newer system."),
    (FindingKind.UNDEFINED_SYMBOL.value, "A symbol the file needs is defined nowhere in its "
     "scope",
     "No object in the file's lookup scope defines a symbol it needs: it was built against "
     "another release of a library of the stack (an ABI break). Use the releases it was "
     "built for, or a build of it made for these."),
    (FindingKind.NUMPY_C_API.value, "The module needs another NumPy C API",
     "The module was built against NumPy headers the stack's NumPy does not accept: its "
     "`import_array()` raises. Use the NumPy it was built for, or a build of the package "
     "made for this NumPy."),
    (FindingKind.PYTHON_SYNTAX.value, "The package's code does not compile on this Python",
     "The first module of the import is not valid Python for the target's version: the "
     "import raises SyntaxError. Use a release of the package for this Python."),
    (FindingKind.BLOCKED_BY.value, "A package the module needs does not load",
     "The module fails only because a package it needs does not load; the fix is that "
     "package's own problem, reported first."),
    (FindingKind.DUPLICATE_SONAME.value, "Two libraries with one soname in the process",
     "Two files with the same soname are loaded, and the second binds to the first one's "
     "symbols. Keep one copy of the library in the stack."),
    (FindingKind.MODEL_DISAGREEMENT.value, "The prediction and the real loader disagree",
     "Loading the module for real (--verify) gave another result than abifit's simulation: "
     "the real result is the one to trust."),
    (FindingKind.NO_KERNEL_IMAGE.value, "No kernel image for the GPU",
     "The file's GPU code has neither machine code (SASS) for the GPU nor PTX the driver can "
     "compile for it: its kernels fail there. Use a build made for that GPU."),
    (FindingKind.PARTIAL_KERNEL_IMAGE.value, "Some kernels have no image for the GPU",
     "Some of the file's kernels carry code for the GPU and others do not."),
    (FindingKind.UNREADABLE_GPU_CODE.value, "GPU code that cannot be read",
     "The file's fat binary could not be read, so its GPU code was not checked."),
    (FindingKind.DRIVER_TOO_OLD.value, "The NVIDIA driver is older than the CUDA runtime",
     "The stack's CUDA runtime needs a newer NVIDIA driver than the machine has. Update the "
     "driver, or use builds for an older CUDA release."),
    (FindingKind.CUDA_MAJOR_MIX.value, "Libraries of two CUDA majors in one process",
     "A file needs a CUDA library of one major next to a stack that brings another. Use "
     "builds of one CUDA major for the whole stack."),
    (FindingKind.TOOLKIT_NOT_SEARCHED.value, "A CUDA library only where the loader does not "
     "look",
     "A needed CUDA library is only in a toolkit directory that the loader does not search. "
     "Install it from a wheel, or add the directory to the loader's configuration."),
)

HOST_LACKS_DRIVER = Rule(
    "host-lacks-driver", "The NVIDIA driver is not on this machine",
    "The modules' ABI fits, but they link libcuda.so.1, which only the NVIDIA driver "
    "installs: they load only where the driver is installed.")

CONFLICT = Rule(
    "conflict", "No set of releases loads together",
    "Every set of releases the requirements allow has a module that does not load next to "
    "another package, or metadata that conflicts: the derivation says which. Relax a "
    "requirement, or add a release that fits.")

CHANGE_RULES = _rules(
    ("stops-loading", "A module does not load on the new stack",
     "A module that loaded on side A does not load on side B: B breaks it. The explanation "
     "says why, down to the symbol or library."),
    ("module-gone", "A module is gone from the new stack",
     "The distribution is on both sides, and side B has no such module."),
    ("cuda-major", "A module maps a library of another CUDA major",
     "A module loads on both sides, and maps a CUDA library of another major on side B."),
    ("numpy-c-api", "A module is built against another NumPy C API",
     "A module loads on both sides and was built against another NumPy C API on side B: "
     "which NumPy releases it imports beside changed."),
    ("host", "A fact of the host the modules depended on changed",
     "The glibc or libstdc++ release, a loader directory that found one of A's libraries, or "
     "the driver's CUDA differs between the two machines."),
)
