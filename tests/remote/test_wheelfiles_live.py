"""Which wheel ships a soname, against PyPI itself, with small byte budgets (skipped when PyPI
cannot be reached)."""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from packaging.requirements import Requirement

from abifit.remote.http import HttpClient, HttpError
from abifit.remote.packageindex import (
    IndexConfig,
    IndexUnavailable,
    PackageIndex,
    Target,
    select_one,
)
from abifit.remote.pagefetch import cached_fetch
from abifit.remote.runcontext import RemoteContext
from abifit.remote.wheelfiles import LibraryRule, find_library_wheels, load_library_table
from abifit.remote.wheels import RemoteWheel

pytestmark = pytest.mark.network

TARGET = Target((3, 12), platforms=("manylinux_2_28_x86_64",))


@pytest.fixture
def ctx() -> Iterator[RemoteContext]:
    """A context on PyPI without a cache; skips the test when PyPI cannot be reached."""
    client = HttpClient(retries=2, backoff=0.2)
    context = RemoteContext(PackageIndex(cached_fetch(client, None), IndexConfig()), client,
                            None, TARGET)
    try:
        context.index.project_files("nvidia-cuda-runtime-cu12")
    except (HttpError, IndexUnavailable) as e:
        client.close()
        pytest.skip(f"PyPI is not reachable: {e}")
    try:
        yield context
    finally:
        client.close()


def bytes_fetched(ctx: RemoteContext) -> int:
    assert ctx.client is not None
    return ctx.client.transfer.bytes_fetched


@pytest.mark.parametrize(("soname", "project", "member", "major"), [
    pytest.param("libnvrtc.so.13", "nvidia-cuda-nvrtc", "nvidia/cu13/lib/libnvrtc.so.13", 13,
                 id="nvrtc-13"),
    pytest.param("libcudart.so.12", "nvidia-cuda-runtime-cu12",
                 "nvidia/cuda_runtime/lib/libcudart.so.12", 12, id="cudart-12"),
    pytest.param("libnvrtc-builtins.so.13.0", "nvidia-cuda-nvrtc",
                 "nvidia/cu13/lib/libnvrtc-builtins.so.13.0", 13, id="nvrtc-builtins-13.0"),
])
def test_finds_the_wheel_on_pypi(ctx: RemoteContext, soname: str, project: str, member: str,
                                 major: int) -> None:
    """The soname is found in the newest release of its project for that CUDA major, at the
    path the wheel installs it to, with under 2 MB fetched (wheels of 2-90 MB)."""
    search = find_library_wheels(soname, ctx)
    assert [(w.project, w.member) for w in search.wheels] == [(project, member)], search.reason
    assert search.wheels[0].version.split(".")[0] == str(major)
    assert bytes_fetched(ctx) < 2_000_000, bytes_fetched(ctx)


def _rule_problems(rule: LibraryRule, ctx: RemoteContext) -> list[str]:
    """For each candidate of the rule (those without fields): the patterns of the rule that no
    member of the newest wheel matches."""
    problems = []
    for candidate in rule.wheels:
        if "{" in candidate.requirement:
            continue
        requirement = Requirement(candidate.requirement)
        chosen = select_one(ctx.index.project_files(requirement.name), requirement, ctx.target)
        names = [posixpath.basename(m.path) for m in RemoteWheel(chosen.file, ctx).members()]
        for pattern in rule.sonames:
            single = LibraryRule((pattern,), ())
            if not any(single.matches(name) for name in names):
                problems.append(f"{chosen.file.filename} has nothing matching {pattern}")
    return problems


def test_every_table_pattern_is_in_every_candidate_wheel(ctx: RemoteContext) -> None:
    """Each pattern of the shipped table matches a file of the newest wheel of each of its rule's
    candidates on PyPI (the table is checked, not guessed); under 8 MB for ~40 wheels."""
    rules = [rule for rule in load_library_table().rules if rule.wheels]
    with ThreadPoolExecutor(8) as pool:
        problems = [p for found in pool.map(lambda r: _rule_problems(r, ctx), rules) for p in found]
    assert problems == []
    assert bytes_fetched(ctx) < 8_000_000, bytes_fetched(ctx)
