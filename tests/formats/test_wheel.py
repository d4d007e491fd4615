"""Wheels read in place: directory, STORED and DEFLATE members, and broken archives."""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path

import pytest

from abifit.errors import FormatError, WheelError
from abifit.formats.elf import might_be_elf, parse_elf
from abifit.formats.sources import BytesSource, FileSource
from abifit.formats.wheel import WheelArchive, is_elf_member

LIBSTDCXX = Path("/usr/lib/x86_64-linux-gnu/libstdc++.so.6")
TORCH_WHEEL = Path("/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")


def make_wheel(path: Path, members: dict[str, tuple[bytes, int]]) -> Path:
    """A wheel file with the given (bytes, compression) members plus its dist-info."""
    with zipfile.ZipFile(path, "w") as zf:
        for name, (data, method) in members.items():
            zf.writestr(name, data, compress_type=method)
        zf.writestr("demo-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")
        zf.writestr("demo-1.0.dist-info/RECORD", "")
    return path


@pytest.fixture(scope="module")
def lib_bytes() -> bytes:
    return LIBSTDCXX.read_bytes()


@pytest.mark.parametrize("method", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED],
                         ids=["stored", "deflated"])
def test_member_reads_equal_the_file(tmp_path: Path, lib_bytes: bytes, method: int) -> None:
    """An ELF member parses to the same dynamic view as the same bytes on disk."""
    wheel = make_wheel(tmp_path / "demo-1.0-py3-none-any.whl",
                       {"demo/libstdc++.so.6": (lib_bytes, method), "demo/x.py": (b"x", method)})
    with FileSource(wheel) as src:
        archive = WheelArchive(src)
        member = archive.member("demo/libstdc++.so.6")
        opened = archive.open(member)
        assert is_elf_member(opened)
        assert opened.read_at(0, opened.size) == lib_bytes
        from_wheel = parse_elf(opened)
    expected = parse_elf(BytesSource(lib_bytes, "lib"))
    assert from_wheel.symbols.names == expected.symbols.names
    assert from_wheel.version_needs == expected.version_needs
    assert from_wheel.name == f"{wheel}!demo/libstdc++.so.6"
    assert [m.path for m in archive.candidates()] == ["demo/libstdc++.so.6"]


def test_wheel_name_and_tags(tmp_path: Path) -> None:
    """The wheel's name, version and tags come from its file name."""
    wheel = make_wheel(tmp_path / "demo-1.0-2-cp311-cp311-manylinux_2_28_x86_64.whl", {})
    with FileSource(wheel) as src:
        archive = WheelArchive(src)
    assert (archive.name, str(archive.version), archive.build) == ("demo", "1.0", (2, ""))
    assert {str(t) for t in archive.tags} == {"cp311-cp311-manylinux_2_28_x86_64"}


@pytest.mark.parametrize(
    ("name", "expected"),
    [("a/b.so", True), ("a/libx.so.1.2", True), ("a/_C.cpython-311-x86_64-linux-gnu.so", True),
     ("bin/tool", True), ("a/b.py", False), ("a/README.md", False), ("a/dir/", False),
     ("a.dist-info/METADATA", False), ("a.dist-info/entry_points.txt", False)],
)
def test_might_be_elf(name: str, expected: bool) -> None:
    """Names that could be ELF objects are checked for magic; text files are not."""
    assert might_be_elf(name) is expected


def test_not_a_zip(tmp_path: Path) -> None:
    """A file that is not a zip is a WheelError naming the file."""
    bad = tmp_path / "demo-1.0-py3-none-any.whl"
    bad.write_bytes(b"this is not a zip file" * 10)
    with FileSource(bad) as src, pytest.raises(WheelError, match=r"not a valid zip file"):
        WheelArchive(src)


def test_truncated_zip(tmp_path: Path, lib_bytes: bytes) -> None:
    """A zip cut short (central directory gone) is a WheelError, not a crash."""
    whole = make_wheel(tmp_path / "demo-1.0-py3-none-any.whl",
                       {"demo/lib.so": (lib_bytes, zipfile.ZIP_DEFLATED)}).read_bytes()
    cut = tmp_path / "cut" / "demo-1.0-py3-none-any.whl"
    cut.parent.mkdir()
    cut.write_bytes(whole[: len(whole) // 2])
    with FileSource(cut) as src, pytest.raises(WheelError):
        WheelArchive(src)


def test_zip_that_is_not_a_wheel(tmp_path: Path) -> None:
    """A zip with a wheel's name but no .dist-info/WHEEL is refused."""
    path = tmp_path / "demo-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("demo/__init__.py", "")
    with FileSource(path) as src, pytest.raises(WheelError, match=r"no \*\.dist-info/WHEEL"):
        WheelArchive(src)


def test_bad_wheel_file_name(tmp_path: Path) -> None:
    """A zip whose file name is not a wheel name is refused with packaging's reason."""
    path = make_wheel(tmp_path / "archive.zip", {})
    with FileSource(path) as src, pytest.raises(WheelError, match="not a wheel"):
        WheelArchive(src)


def test_corrupt_member_data(tmp_path: Path, lib_bytes: bytes) -> None:
    """Damaged compressed bytes of one member raise FormatError naming that member."""
    path = make_wheel(tmp_path / "demo-1.0-py3-none-any.whl",
                      {"demo/lib.so": (lib_bytes, zipfile.ZIP_DEFLATED)})
    with FileSource(path) as src:
        archive = WheelArchive(src)
        member = archive.member("demo/lib.so")
        start = member.header_offset + 30 + len(member.path)
    raw = bytearray(path.read_bytes())
    raw[start : start + 64] = b"\xff" * 64
    path.write_bytes(bytes(raw))
    with FileSource(path) as src:
        opened = WheelArchive(src).open(member)
        with pytest.raises(FormatError, match=r"demo/lib\.so"):
            parse_elf(opened)


@pytest.mark.slow
@pytest.mark.skipif(not TORCH_WHEEL.exists(), reason="the torch 2.13.0 CPU wheel is not on disk")
def test_torch_wheel_members_equal_installed_files(torch_dir: Path) -> None:
    """Every ELF member of the real torch wheel, read in place, equals the installed file."""
    with FileSource(TORCH_WHEEL) as src:
        archive = WheelArchive(src)
        site = torch_dir.parent
        checked = 0
        for member in archive.candidates():
            opened = archive.open(member)
            if not is_elf_member(opened):
                continue
            installed = parse_elf(FileSource(site / member.path))
            in_wheel = parse_elf(opened)
            assert in_wheel.symbols.names == installed.symbols.names, member.path
            assert in_wheel.needed == installed.needed, member.path
            assert in_wheel.symbols.versym == installed.symbols.versym, member.path
            checked += 1
    assert checked > 10


def _zipfile_members(path: Path) -> tuple[tuple[str, int, int, int, int, int], ...]:
    with zipfile.ZipFile(path) as zf:
        return tuple((i.filename, i.file_size, i.compress_size, i.CRC, i.compress_type,
                      i.header_offset) for i in zf.infolist() if not i.is_dir())


def _ours(path: Path) -> tuple[tuple[str, int, int, int, int, int], ...]:
    with FileSource(path) as src:
        return tuple((m.path, m.size, m.compressed_size, m.crc, m.method, m.header_offset)
                     for m in WheelArchive(src).members)


@pytest.mark.parametrize("shape", ["plain", "zip64", "comment", "prepended", "names"])
def test_directory_equals_zipfiles_reading(tmp_path: Path, lib_bytes: bytes, shape: str) -> None:
    """The central directory as the standard library's zipfile reads it: ZIP64 records and
    extra fields, an archive comment, bytes prepended to the archive, UTF-8 and cp437 names,
    directories left out."""
    path = tmp_path / "demo-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("demo/", b"")
        for n in range(300):
            zf.writestr(f"demo/m{n}.py", f"x = {n}\n" * n)
        if shape == "zip64":
            with zf.open("demo/lib.so", "w", force_zip64=True) as member:
                member.write(lib_bytes)
        else:
            zf.writestr("demo/lib.so", lib_bytes)
        if shape == "names":
            zf.writestr("demo/ünïcode-名前.txt", b"utf-8 flagged")
            legacy = zipfile.ZipInfo("demo/legacy.txt")
            zf.writestr(legacy, b"cp437")
        if shape == "comment":
            zf.comment = b"an archive comment " * 100
        zf.writestr("demo-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")
    if shape == "prepended":
        path.write_bytes(b"#!/bin/sh\nexit 0\n" * 50 + path.read_bytes())
    assert _ours(path) == _zipfile_members(path)
    assert len(_ours(path)) == 302 + (2 if shape == "names" else 0)
    if shape == "comment":  # a comment that holds the end record's signature (zipfile
        before = _ours(path)  # takes that one for the record and fails)
        with zipfile.ZipFile(path, "a") as zf:
            zf.comment = b"PK\x05\x06 is not the end record" * 100
        assert _ours(path) == before


def test_directory_that_runs_past_the_end(tmp_path: Path, lib_bytes: bytes) -> None:
    """An end record whose directory is longer than what precedes it is a WheelError."""
    whole = make_wheel(tmp_path / "demo-1.0-py3-none-any.whl",
                       {"demo/lib.so": (lib_bytes, zipfile.ZIP_DEFLATED)}).read_bytes()
    at = whole.rfind(b"PK\x05\x06")
    broken = whole[: at + 12] + (len(whole) * 2).to_bytes(4, "little") + whole[at + 16 :]
    bad = tmp_path / "bad" / "demo-1.0-py3-none-any.whl"
    bad.parent.mkdir()
    bad.write_bytes(broken)
    with FileSource(bad) as src, pytest.raises(WheelError, match="not a valid zip file"):
        WheelArchive(src)


def test_zip64_extra_field_too_short(tmp_path: Path, lib_bytes: bytes) -> None:
    """A central entry whose sizes say ZIP64 but whose ZIP64 extra field holds fewer values is
    a WheelError, not a crash."""
    path = tmp_path / "demo-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("demo/lib.so", lib_bytes[:100])
        zf.writestr("demo-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")
    data = bytearray(path.read_bytes())
    entry = data.find(b"PK\x01\x02")  # the first central entry: demo/lib.so
    name_length, extra_length = struct.unpack_from("<HH", data, entry + 28)
    assert extra_length == 0
    data[entry + 20 : entry + 28] = b"\xff" * 8  # both sizes saturated, but one value given:
    extra = b"\x01\x00\x08\x00" + bytes(8)
    data[entry + 46 + name_length : entry + 46 + name_length] = extra
    struct.pack_into("<H", data, entry + 30, len(extra))
    end = data.rfind(b"PK\x05\x06")
    struct.pack_into("<L", data, end + 12, struct.unpack_from("<L", data, end + 12)[0]
                     + len(extra))
    path.write_bytes(bytes(data))
    with FileSource(path) as src, pytest.raises(WheelError, match="ZIP64 extra field"):
        WheelArchive(src)
