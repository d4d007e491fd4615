"""Remote reading against PyPI itself, with small byte budgets (skipped when unreachable)."""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import pytest

from abifit.formats.elf import parse_elf
from abifit.formats.sources import BytesSource
from abifit.formats.wheel import member_data_start
from abifit.remote.http import HttpClient, HttpError
from abifit.remote.memberbytes import open_member
from abifit.remote.packageindex import (
    IndexConfig,
    IndexFile,
    IndexUnavailable,
    PackageIndex,
    Target,
)
from abifit.remote.pagefetch import cached_fetch
from abifit.remote.runcontext import RemoteContext
from abifit.remote.wheels import open_wheel, resolve

pytestmark = pytest.mark.network

TARGET = Target((3, 11), platforms=("manylinux_2_28_x86_64",))


@pytest.fixture
def ctx() -> Iterator[RemoteContext]:
    client = HttpClient(retries=2, backoff=0.2)
    index = PackageIndex(cached_fetch(client, None), IndexConfig())
    try:
        yield RemoteContext(index, client, None, TARGET)
    finally:
        client.close()


def resolve_file(text: str, ctx: RemoteContext) -> IndexFile:
    """The wheel PyPI offers for the target; skips the test when PyPI cannot be reached."""
    try:
        return resolve(text, ctx)
    except (HttpError, IndexUnavailable) as e:
        if e.__class__ is IndexUnavailable or getattr(e, "status", None) is None:
            pytest.skip(f"PyPI is not reachable: {e}")
        raise


def test_sgl_kernel_member_list_costs_under_300_kb(ctx: RemoteContext) -> None:
    """The member list of sgl-kernel 0.3.21 (a 536 MB wheel) is read with < 300 KB fetched."""
    file = resolve_file("sgl-kernel==0.3.21", ctx)
    assert ctx.client is not None
    before = ctx.client.transfer.bytes_fetched
    archive, _source = open_wheel(file, ctx)
    fetched = ctx.client.transfer.bytes_fetched - before
    paths = {m.path for m in archive.members}
    assert "sgl_kernel/sm90/common_ops.abi3.so" in paths
    assert fetched < 300_000, fetched


def test_torch_libc10_cuda_exports_equal_whole_member(ctx: RemoteContext) -> None:
    """torch 2.10.0's libc10_cuda.so read by prefix and tail equals the whole member inflated."""
    file = resolve_file("torch==2.10.0", ctx)
    archive, source = open_wheel(file, ctx)
    member = archive.member("torch/lib/libc10_cuda.so")
    remote = parse_elf(open_member(source, member, member.path), relocations=False,
                       sections=False)
    start = member_data_start(source, member, member.path)
    whole = zlib.decompress(source.read_at(start, member.compressed_size), -15)
    assert zlib.crc32(whole) == member.crc
    local = parse_elf(BytesSource(whole), relocations=False, sections=False)
    assert remote.symbols.names == local.symbols.names
    assert remote.symbols.versym == local.symbols.versym
    assert remote.dynamic == local.dynamic
    assert remote.version_needs == local.version_needs

