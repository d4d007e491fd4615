"""What a `doctor` run asks for live, the key of the run kept for it, and what it printed (I/O).

A run of `doctor` is kept in the cache directory (`abifit.host.runcache`) under a key made of
what it was given and what it asked for live: the interpreter's facts, this host's loader, the
GPUs. This module asks those and finds the kept run with nothing else: it imports no simulation,
so a warm `abifit doctor` prints what the kept run printed (`DoctorPrinted`) and exits, and
`commands.doctor` (which computes a run and keeps it) takes its key from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from abifit.host.environment import InterpreterFacts, InterpreterQuery
from abifit.host.ldconfig import HostFacts, probe_host
from abifit.host.runcache import Guess, RunCache, run_key
from abifit.sim.gputarget import GpuTarget
from abifit.workers import Beside


@dataclass(frozen=True)
class DoctorOptions:
    """What `abifit doctor` is asked: the environment's interpreter (`python`; default:
    $VIRTUAL_ENV, $CONDA_PREFIX, python3 on PATH), only the modules of some distributions or
    import packages (`packages`), to load each module for real too (`verify`), where to save
    this host's profile (`save_host`), the GPU to check for instead of this machine's (`gpu`),
    the NVIDIA driver taken as present (`assume_driver`), the cache, and whether to ask the
    index which wheel ships a missing library (not with `no_index`)."""

    python: str | None = None
    packages: tuple[str, ...] = ()
    verify: bool = False
    save_host: str | None = None
    gpu: str | None = None
    assume_driver: bool = False
    cache_dir: str | None = None
    no_cache: bool = False
    no_index: bool = False


# what a kept whole run holds changes with the model, not only with releases
RUN_FORMAT = "verdict-3"


@dataclass(frozen=True, slots=True)
class DoctorAsked:
    """What a doctor run asks for live, the parts of its key that no argument gives."""

    facts: InterpreterFacts
    host: HostFacts
    gpus: tuple[GpuTarget, ...]
    gpu_reason: str | None  # why no GPU is checked


@dataclass(frozen=True, slots=True)
class DoctorPrinted:
    """A doctor report as `abifit doctor` prints it (`report.doctor.doctor_printed`), kept with
    the run: each output, and what its exit status is made of."""

    json: str
    text: str
    verbose_text: str
    verdict: str
    prerequisite: bool  # a finding has the prerequisite effect (`--fail-on prerequisite`)


def ask(python: str | InterpreterQuery, environ: Mapping[str, str],
        gpus: tuple[GpuTarget, ...] | None = None,
        host: HostFacts | None = None) -> DoctorAsked:
    """The interpreter's facts, the host's loader (unless given) and the GPUs (unless given:
    this machine's, probed in a thread while the interpreter answers; both wait on a driver or
    a process). Raises EnvironmentQueryError when the interpreter gives no facts."""
    query = python if isinstance(python, InterpreterQuery) else InterpreterQuery(python)
    if gpus is not None:
        return DoctorAsked(query.facts(), probe_host(environ) if host is None else host, gpus,
                           None)
    detecting = Beside(_detect_gpus, environ)
    try:
        facts = query.facts()
        host = probe_host(environ) if host is None else host
    finally:
        gpus, reason = detecting.result()
    return DoctorAsked(facts, host, gpus, reason)


def _detect_gpus(environ: Mapping[str, str]) -> tuple[tuple[GpuTarget, ...], str | None]:
    """This machine's GPUs as targets, or why none (`engines.gpus.detect_targets`, imported
    here: a report that shows a kept run needs no probe)."""
    from abifit.engines.gpus import detect_targets

    return detect_targets(environ)


def doctor_runs(cache_dir: Path | None, *, kept: bool) -> RunCache | None:
    """The doctor runs kept in `cache_dir`; None without a cache directory or for a run that
    is never kept (`kept` false: see `commands.doctor.doctor`)."""
    return RunCache(cache_dir, "doctor") if cache_dir is not None and kept else None


def doctor_key(asked: DoctorAsked, packages: tuple[str, ...], *, offline: bool,
               assume_driver: bool) -> str:
    """The key of a doctor run: what it asked for live and the arguments that decide it."""
    return run_key(RUN_FORMAT, asked.facts, asked.host, asked.gpus, asked.gpu_reason, packages,
                   offline, assume_driver)


def latest_name(python: str, packages: tuple[str, ...]) -> str:
    """What names the doctor run kept last for the interpreter `python` (as it was given) and
    `packages`, before the interpreter has answered (`RunCache.remember`). Not a run's key:
    the key the name leads to is compared with the run's own, which holds abifit's release
    and files, so the name need not walk abifit's files again."""
    return "\0".join((RUN_FORMAT, python, *packages))  # no path or name holds a NUL


def guess_kept(cache_dir: Path | None, python: str, packages: tuple[str, ...],
               environ: Mapping[str, str]) -> Guess | None:
    """The doctor run kept last for `python` and `packages`, checked (`RunCache.guess`): a
    warm run starts this beside the interpreter's query (`workers.Apart`: in a fork)."""
    runs = doctor_runs(cache_dir, kept=True)
    return None if runs is None else runs.guess(latest_name(python, packages), environ)


def kept_printed(cache_dir: Path | None, asked: DoctorAsked, packages: tuple[str, ...], *,
                 offline: bool, assume_driver: bool, environ: Mapping[str, str],
                 python: str | None = None, guessed: Guess | None = None
                 ) -> DoctorPrinted | None:
    """What the kept run for these arguments printed, while everything it was worked out from
    is unchanged; None when there is none. `guessed` (`guess_kept` of the interpreter `python`
    as given) is taken for the check of the kept run when its key is this run's; a kept run
    taken under another key is noted as the last for `python`, for the next guess."""
    runs = doctor_runs(cache_dir, kept=True)
    if runs is None:
        return None
    key = doctor_key(asked, packages, offline=offline, assume_driver=assume_driver)
    printed = runs.printed(key, environ, DoctorPrinted, guessed)
    if printed is not None and python is not None and (guessed is None or guessed.key != key):
        runs.remember(latest_name(python, packages), key)
    return printed if isinstance(printed, DoctorPrinted) else None
