"""The other fix of a module built with NumPy 1.x headers beside NumPy 2: the first release of
its package built against NumPy 2, found by reading the `.rodata` of the same module in the
package's later wheels on the index (`RemoteWheel.numpy_use`), as `history` reads symbols.

Releases are searched by bisection between the installed one and the newest that has a wheel
for the target: once a package builds against NumPy 2 it does not go back, so a few modules
are read (each inflated up to its `.rodata`; cached by the wheel's sha256).
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from packaging.requirements import Requirement
from packaging.version import InvalidVersion, Version

from abifit.errors import AbifitError
from abifit.sim.findings import Finding, FindingKind

if TYPE_CHECKING:
    from abifit.remote.packageindex import Candidate
    from abifit.remote.runcontext import RemoteContext

MAX_READS = 6  # modules read per package at most


def _built_for_numpy2(candidate: Candidate, member_path: str, ctx: RemoteContext) -> bool | None:
    """Whether the release's copy of the module was built with NumPy 2.x headers (None: the
    release has no such module, or it could not be read)."""
    from abifit.formats.numpyapi import NumpyUse
    from abifit.remote.wheels import shared_wheel

    wheel = shared_wheel(candidate.file, ctx)
    stem = posixpath.basename(member_path).split(".")[0]
    folder = posixpath.dirname(member_path)
    members = [m for m in wheel.members() if posixpath.dirname(m.path) == folder
               and posixpath.basename(m.path).split(".")[0] == stem]
    if not members:
        return None
    use = wheel.numpy_use(members[0])
    return use.headers == 2 if isinstance(use, NumpyUse) else None


def first_numpy2_release(name: str, installed: str, member_path: str,
                         ctx: RemoteContext) -> str | None:
    """The first release of `name` after `installed` whose module at `member_path` (relative
    to site-packages) was built with NumPy 2.x headers; None when none is found."""
    from abifit.remote.packageindex import select

    try:
        since = Version(installed)
        files = ctx.index.project_files(name)
    except (InvalidVersion, AbifitError):
        return None
    newer = sorted({c.version: c for c in select(files, Requirement(name), ctx.target)
                    if c.version > since and not c.version.is_prerelease}.items())
    releases = [c for _v, c in newer]
    low, high, found = 0, len(releases) - 1, None
    for _ in range(MAX_READS):
        if low > high:
            break
        middle = (low + high) // 2
        built = _built_for_numpy2(releases[middle], member_path, ctx)
        if built is None:
            return None
        if built:
            found, high = releases[middle], middle - 1
        else:
            low = middle + 1
    return str(found.version) if found is not None and low > high else None


def with_numpy2_releases(findings: Sequence[Finding],
                         owners: dict[str, tuple[str, str, str]],
                         ctx: RemoteContext) -> list[Finding]:
    """`findings`, each NumPy 1.x finding's hint naming the first release of its package built
    against NumPy 2 where one is found; `owners` gives each object's distribution (name,
    version) and its path relative to site-packages."""
    found: dict[tuple[str, str], str | None] = {}
    out = []
    for f in findings:
        known = owners.get(f.object)
        if f.kind is not FindingKind.NUMPY_C_API or f.version != "numpy<2" or known is None:
            out.append(f)
            continue
        owner = known[:2]
        if owner not in found:
            found[owner] = first_numpy2_release(owner[0], owner[1], known[2], ctx)
        release = found[owner]
        out.append(f if release is None else replace(
            f, hint=f"`pip install 'numpy<2'`, or `pip install '{owner[0]}>={release}'` (its "
                    "first release built against NumPy 2)"))
    return out
