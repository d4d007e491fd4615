"""Where what is read of a wheel is cached: under the wheel's key (`view_key`), an entry per
thing read of a member (`entry`: its view, with relocations, its summary, its fat binaries,
its use of NumPy's C API) and per wheel (its directory, metadata, Python files); a local
file is keyed by the sha256 of its bytes (`content_addressed`)."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

from abifit.errors import WheelRefused
from abifit.formats.wheel import Member
from abifit.remote.diskcache import Cache
from abifit.remote.packageindex import IndexFile, local_file
from abifit.remote.runcontext import RemoteContext

NOT_ELF = "not-elf"
DIRECTORY = "<directory-3>"  # 2: members under 4 bytes named like modules are listed;
# 3: members by the path an install gives them
METADATA = "<metadata>"
PYTHON = "<python>"
RELOCATIONS = "\x00relocations"  # cache entry of a view that has relocated_symbols
GPU_CODE = "\x00gpu-code"  # cache entry of a member's fat binaries
NUMPY_USE = "\x00numpy-use"  # cache entry of a member's use of NumPy's C API
SUMMARY = "\x00summary"  # cache entry of the summary of a member's view


def entry(member: Member, what: str) -> str:
    """A member's cache entry: its path with the CRC-32 and sizes the zip directory read gives
    it, and what is stored (`what`: a view, with relocations, the GPU code)."""
    return f"{member.path}\x00{member.crc:08x}:{member.size}:{member.compressed_size}{what}"


def view_key(file: IndexFile) -> str | None:
    """What a wheel's views are cached by. A local file: the sha256 of its bytes, which were
    read and hashed (`content_addressed`). A wheel on an index, read by ranges that cannot be
    hashed: the digest of the URL the bytes come from, the size and the sha256 the index gives;
    so an index that claims another wheel's sha256 while serving other bytes keys them apart
    from that wheel's views, which it cannot replace. None (nothing cached) when the index gives
    no sha256."""
    if not file.sha256:
        return None
    if local_file(file.url) is not None:
        return file.sha256.lower()
    url = file.url.split("#", 1)[0]
    return hashlib.sha256(f"{file.sha256}\0{url}\0{file.size}".encode()).hexdigest()


def lookup_keys(file: IndexFile) -> tuple[str, ...]:
    """Where a wheel's views are looked for: under its own key, and for a wheel on an index
    also under its sha256, where views of a local file with those very bytes are (they describe
    the wheel the sha256 names, whatever the index serves)."""
    key = view_key(file)
    if key is None:
        return ()
    return (key,) if local_file(file.url) is not None else (key, str(file.sha256).lower())


def cached(ctx: RemoteContext, file: IndexFile, member: str,
            expect: object = object) -> object | None:
    """The cached value of a wheel's entry, when it fits `expect` (an entry of another shape,
    planted or from another release, is a miss)."""
    if ctx.cache is None:
        return None
    for key in lookup_keys(file):
        found = ctx.cache.get_view(key, member, expect)
        if found is not None:
            return found
    return None


def remember(ctx: RemoteContext, file: IndexFile, member: str, value: object) -> None:
    key = view_key(file)
    if ctx.cache is not None and key is not None:
        ctx.cache.put_view(key, member, value)


def content_addressed(file: IndexFile, cache: Cache | None) -> IndexFile:
    """`file`, with the sha256 of its bytes when it is a local file: checked against the one
    its index gives (`WheelRefused` when they differ, as pip refuses it), else computed when there
    is a cache to key its views by. Unchanged otherwise (and when it cannot be read: the
    reader then says why)."""
    path = local_file(file.url)
    if path is None or (cache is None and not file.sha256):
        return file
    digest = file_sha256(path, cache)
    if digest is None:
        return file
    if file.sha256 and digest != file.sha256.lower():
        raise WheelRefused(file.filename, f"sha256 of the file is {digest}, its index says "
                           f"{file.sha256} (pip refuses this wheel)")
    return replace(file, hashes={**file.hashes, "sha256": digest})


def file_sha256(path: Path, cache: Cache | None) -> str | None:
    """The sha256 of a local file, read once and then remembered by the cache (if any) while
    the file keeps its size, modification time and inode; None when it cannot be read."""
    try:
        resolved = path.resolve()
        st = resolved.stat()
        stamp = f"{st.st_size}:{st.st_mtime_ns}:{st.st_dev}:{st.st_ino}"
        known = cache.get_digest(str(resolved), stamp) if cache is not None else None
        if known is not None:
            return known
        digest = hashlib.sha256()
        with open(resolved, "rb") as f:
            while chunk := f.read(_HASH_CHUNK):
                digest.update(chunk)
    except OSError:
        return None
    if cache is not None:
        cache.put_digest(str(resolved), stamp, digest.hexdigest())
    return digest.hexdigest()


_HASH_CHUNK = 1 << 20
