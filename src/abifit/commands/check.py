"""`abifit check`: would these wheels load together, before anything is installed? The
options the command line and the API give, run by `abifit.engines.check`, and the library
function `abifit.check`."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from abifit.commands.contexts import (
    HostOptions,
    IndexOptions,
    Progress,
    Session,
    host_and_index,
    index_keywords,
    linux_only,
    names,
    option_gpu,
    pin_files,
    run_as_library,
)
from abifit.engines import check as engine
from abifit.engines.check import CheckReport, locked_targets

if TYPE_CHECKING:
    from abifit.formats.pins import Pin
    from abifit.formats.pylock import Snapshot
    from abifit.remote.packageindex import IndexFile


@dataclass(frozen=True)
class CheckOptions:
    """What `abifit check` is asked: the requirements and local .whl files (`targets`), the
    packages to check them against (`withs`), the pins of lock and requirements files
    (`requirement_files`, `-r`), the stack of a snapshot (`snapshot`), a GPU (`gpu`: sm_120,
    9.0, 9.0@12.4, auto), the host and the index."""

    targets: tuple[str, ...] = ()
    withs: tuple[str, ...] = ()
    requirement_files: tuple[str, ...] = ()
    snapshot: str | None = None
    gpu: str | None = None
    host: HostOptions = field(default_factory=HostOptions)
    index: IndexOptions = field(default_factory=IndexOptions)


PIN_FILE_SUFFIXES = (".txt", ".in", ".lock", ".toml")


def pin_file_targets(targets: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The targets that are requirements or lock files on this machine (`requirements.txt`,
    `uv.lock`, `pylock.toml`: an existing file named so), apart from the others: checked as
    `-r FILE` is, so that a pre-commit hook may pass the files it was given as they are."""
    files = tuple(t for t in targets
                  if t.endswith(PIN_FILE_SUFFIXES) and os.path.isfile(t))
    return tuple(t for t in targets if t not in files), files


def run_check(options: CheckOptions, session: Session, *, records: bool = False) -> CheckReport:
    """`abifit check` as the command line and `abifit.check` run it: the targets' files
    (a snapshot's and the locks' as they recorded them), checked on the host for the index's
    target Python and platform (a snapshot's Python unless the index options name one); with
    `records`, each module's ABI record too (`CheckReport.records`: what `diff` compares a
    lock by)."""
    linux_only(options.index)
    targets_named, files_named = pin_file_targets(options.targets)
    if files_named:
        options = replace(options, targets=targets_named,
                          requirement_files=(*options.requirement_files, *files_named))
    index = options.index
    snap: Snapshot | None = None
    recorded: list[Pin] = []
    if options.snapshot is not None:
        from abifit.engines.snapshot import read_snapshot, snapshot_pins

        snap = read_snapshot(options.snapshot)
        recorded, skipped = snapshot_pins(snap)
        for entry in skipped:
            session.warn(f"{options.snapshot}: not checked: {entry}")
        if not index.python_version and snap.python_version:
            index = replace(index, python_version=".".join(snap.python_version.split(".")[:2]))
    host, remote = host_and_index(options.host, index, session)
    targets: list[str | IndexFile] = list(options.targets)
    written: list[Pin] = []  # where each pin of a file is written, for the reports of CI
    if recorded:  # the wheels the snapshot recorded, not whatever the index serves now
        targets += locked_targets(recorded, remote())
        written += _placed(recorded, options.snapshot)
    for pins in pin_files(options.requirement_files, remote(), session.warn, "checked"):
        targets += locked_targets(pins.pins, remote())  # each the file the lock names
        written += pins.pins
    gpu = option_gpu(options.gpu, session.environ)
    report = engine.check(targets, options.withs, remote(), remote().target, host,
                          session.progress, options.host.python,
                          skip_pure=bool(options.requirement_files or options.snapshot),
                          gpu=gpu, records=records)
    report = replace(report, file_pins=tuple(written))
    if snap is None:
        return report
    from abifit.engines.snapshot import with_recorded_fixes

    return with_recorded_fixes(report, snap)


def _placed(pins: list[Pin], snapshot: str | None) -> tuple[Pin, ...]:
    """The pins of a snapshot with the line of each one's entry in the file (none where the
    file cannot be read again)."""
    from abifit.formats.pins import placed_in_lock

    if snapshot is None:
        return tuple(pins)
    try:
        text = Path(snapshot).read_text("utf-8")
    except (OSError, UnicodeDecodeError):
        return tuple(pins)
    return placed_in_lock(pins, text, snapshot)


def check(
    requirements: str | Sequence[str] = (),
    *,
    with_: str | Sequence[str] = (),
    requirement_files: str | Sequence[str] = (),
    snapshot: str | Path | None = None,
    gpu: str | None = None,
    host: str | None = None,
    assume_driver: str | None = None,
    python: str | None = None,
    progress: Progress | None = None,
    **index: Any,
) -> CheckReport:
    """Would these wheels load together? What `abifit check` prints, as a report.

    `requirements` are requirements ("sgl-kernel==0.3.21") or local .whl files, checked against
    the `with_` packages (`--with`) and the pins of `requirement_files` (`-r`: requirements
    files, uv.lock, pylock.toml) or of a `snapshot`, for the index's `python_version` ("3.12",
    default: this interpreter) on its `platforms` (default: this machine's, or the manylinux
    tag of `host`), on `host`: this machine (None), a manylinux preset ("manylinux_2_28") or a
    profile saved by `abifit doctor --save-host`; with `gpu`, also whether the targets' GPU
    code runs on it. The index is pip's (`index_url` replaces it); `offline` reads only the
    cache.
    """
    return run_as_library(run_check, CheckOptions(
        names(requirements), names(with_), names(requirement_files),
        None if snapshot is None else str(snapshot), gpu,
        HostOptions(host, assume_driver, python), index_keywords("check", index)), progress)
