"""abifit: do the pre-built native parts of a Python stack fit together, and if not, why not.

As a library, the functions named after the commands do what those commands do and return
the report the command prints (frozen dataclasses; the text and JSON output are made from them):

    import abifit

    report = abifit.doctor()                        # the active environment
    report = abifit.check(["sgl-kernel==0.3.21"], with_=["torch==2.9.1"])
    report = abifit.inspect("/usr/lib/x86_64-linux-gnu/libstdc++.so.6", symbols="defined")
    report = abifit.explain(error_text, with_=["torch==2.10.0"])
    report = abifit.history("c10::cuda::c10_cuda_check_implementation", "torch",
                            versions=">=2.8,<2.11")
    report = abifit.snapshot(".venv/bin/python", output="pylock.toml")
    report = abifit.diff("pylock.toml", ".venv")
    report = abifit.resolve(["sgl-kernel==0.3.21", "torch"], python_version="3.11")
    report = abifit.matrix("sgl-kernel==0.3.21", "torch>=2.8")
    report = abifit.matrix(["sgl-kernel", "xformers"], "torch>=2.8", pythons=["3.11", "3.12"])
    report = abifit.variants("torchcodec==0.8.1")
    report = abifit.cuda()

Each is defined in its command's module, beside the options it builds (`abifit.commands.check`:
`check`, `CheckOptions`, `run_check`), which the command line builds from its arguments, and
runs the command's `run_<command>` with them: the two faces cannot drift apart. The keyword
arguments are the options' fields; those of the index (`python_version`, `platforms`,
`index_url`, `cache_dir`, `offline`, ...: `abifit.commands.contexts.IndexOptions`) are taken by
every function that reads an index, and `host`, `assume_driver` and `python` by those that
check for a host.

The verdict of `check` and `doctor` (`report.verdict`; `resolve`'s `report.set_check.verdict`)
is a word of `Verdict` (`fits`, `degraded`, `fails`: the rule of `abifit.sim.verdict`, the
same word every command prints; `check` adds `fits-but-host-lacks-driver`), and each
finding's `effect` an `Effect` (what a file that does not load costs). They raise an
`AbifitError` (`UsageError`, `FormatError`, ...) when something cannot be analysed; the
problems they find are data in the report. Importing abifit is cheap: a command's modules
are imported when its function is first used (`abifit.check`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from abifit.errors import AbifitError, FormatError, UsageError
from abifit.version import __version__

# Type checkers read these imports; at run time each name is imported on first use
# (`__getattr__`), so that `import abifit` imports only abifit.errors. A command's function is
# its module's (`abifit.commands.<command>.<command>`), its report type its engine's
# (`abifit.engines.<command>.<Command>Report`); tests/project/test_api.py fails when a command
# has no function, or when a name is missing here or in `__all__`.
if TYPE_CHECKING:
    from abifit.commands.check import check as check
    from abifit.commands.cuda import cuda as cuda
    from abifit.commands.diff import diff as diff
    from abifit.commands.doctor import doctor as doctor
    from abifit.commands.explain import explain as explain
    from abifit.commands.history import history as history
    from abifit.commands.inspect import inspect as inspect
    from abifit.commands.matrix import matrix as matrix
    from abifit.commands.resolve import resolve as resolve
    from abifit.commands.snapshot import snapshot as snapshot
    from abifit.commands.variants import variants as variants
    from abifit.engines.check import CheckReport as CheckReport
    from abifit.engines.cuda import CudaReport as CudaReport
    from abifit.engines.diff import DiffReport as DiffReport
    from abifit.engines.doctor import DoctorReport as DoctorReport
    from abifit.engines.explain import ExplainReport as ExplainReport
    from abifit.engines.history import HistoryReport as HistoryReport
    from abifit.engines.inspect import InspectReport as InspectReport
    from abifit.engines.matrix import GridReport as GridReport
    from abifit.engines.matrix import MatrixReport as MatrixReport
    from abifit.engines.resolve import ResolveReport as ResolveReport
    from abifit.engines.snapshot import SnapshotReport as SnapshotReport
    from abifit.engines.variants import VariantsReport as VariantsReport
    from abifit.formats.demangle import demangle as demangle
    from abifit.sim.findings import Effect as Effect
    from abifit.sim.findings import Verdict as Verdict

__all__ = [
    "AbifitError",
    "CheckReport",
    "CudaReport",
    "DiffReport",
    "DoctorReport",
    "Effect",
    "ExplainReport",
    "FormatError",
    "GridReport",
    "HistoryReport",
    "InspectReport",
    "MatrixReport",
    "ResolveReport",
    "SnapshotReport",
    "UsageError",
    "VariantsReport",
    "Verdict",
    "__version__",
    "check",
    "cuda",
    "demangle",
    "diff",
    "doctor",
    "explain",
    "history",
    "inspect",
    "matrix",
    "resolve",
    "snapshot",
    "variants",
]

# the names of __all__ that no command defines, and their modules
_ELSEWHERE = {
    "GridReport": "abifit.engines.matrix",  # matrix's report of several extensions or Pythons
    "demangle": "abifit.formats.demangle",
    "Effect": "abifit.sim.findings",
    "Verdict": "abifit.sim.findings",
}


def _home(name: str) -> str:
    """The module that defines a name of `__all__` imported on first use: a command's function
    is its module's (`check`: `abifit.commands.check`), a report type its engine's
    (`CheckReport`: `abifit.engines.check`)."""
    if name in _ELSEWHERE:
        return _ELSEWHERE[name]
    if name.endswith("Report"):
        return f"abifit.engines.{name.removesuffix('Report').lower()}"
    return f"abifit.commands.{name}"


if not TYPE_CHECKING:  # type checkers see the imports above; unknown names stay errors for them

    def __getattr__(name: str) -> object:
        if name not in __all__:
            raise AttributeError(f"module 'abifit' has no attribute {name!r}")
        import importlib

        value = getattr(importlib.import_module(_home(name)), name)
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        """Every name of the module, those imported on first use too (`help(abifit)` lists
        the functions)."""
        return sorted({*globals(), *__all__})
