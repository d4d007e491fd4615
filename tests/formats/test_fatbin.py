"""Tests for abifit.formats.fatbin (fat binary listing) and abifit.sim.gpu (which GPUs run it).

The fat binaries come from tests/fixtures/cuda/*.cu, compiled by nvcc at test time; listings and
entry headers are compared with `cuobjdump` (the nvidia-cuda-cuobjdump wheel of the test extra).
The CUDA libraries of the torch CUDA test venv (conftest.py's `torch_cuda_venv`) are compared
too when that venv exists; `pytest --run-cuda` creates it (about 3 GB). Inputs nvcc never makes
(millions of tiny containers, runs of copies) are laid byte by byte by tests/fixtures/crafted.
"""

from __future__ import annotations

import re
import struct
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from abifit.errors import FormatError
from abifit.formats import datacodec, fatbin
from abifit.formats.elf import ElfImage, parse_elf
from abifit.formats.fatbin import (
    Arch,
    Compression,
    CubinHead,
    EntryKind,
    FatbinContainer,
    FatbinEntry,
    GpuCode,
    PtxHead,
    Variant,
    lz4_block_prefix,
    read_fatbins,
    read_gpu_code,
)
from abifit.formats.sources import BytesSource, FileSource
from abifit.report.gpu import coverage_reason
from abifit.sim.derivation import NoImageFits, NoneRun
from abifit.sim.gpu import (
    NO_KERNEL_IMAGE,
    UNSUPPORTED_PTX,
    EmbeddedSummary,
    Verdict,
    coverage,
    driver_reads_ptx,
    object_coverage,
    parse_arch,
    ptx_compiles_for,
    sass_runs_on,
    summarize,
)
from abifit.sim.gputarget import (
    ComputeCapability,
    GpuTarget,
    parse_compute_capability,
    parse_release,
)
from fixtures.crafted import build as crafted
from fixtures.cuda import build as cuda_build

ALL_FIXTURES = cuda_build.NAMES
RELOCATABLE_FIXTURES = ("relocatable", "rdc_linked", "lto")


def _zstd_available() -> bool:
    return fatbin._zstd_codec() is not None


# ---------------------------------------------------------------------------------------------
# Fixtures and helpers


@pytest.fixture(scope="module")
def cuda_fixtures() -> tuple[Path, dict[str, Path]]:
    """The nvcc-built fixtures: (directory, name -> path)."""
    built = cuda_build.cached_build()
    if built is None:
        pytest.skip("nvcc is not on PATH")
    return built


@pytest.fixture(scope="module")
def cuobjdump() -> Path:
    """The cuobjdump binary of the nvidia-cuda-cuobjdump wheel."""
    found = cuda_build.find_cuobjdump()
    if found is None:
        pytest.skip("cuobjdump not found: pip install nvidia-cuda-cuobjdump")
    return found


def _fixture(built: tuple[Path, dict[str, Path]], name: str) -> Path:
    dest, paths = built
    if name not in paths:
        pytest.skip(cuda_build.unavailable_reason(dest, name))
    return paths[name]


def _read(path: Path, **options: bool) -> GpuCode:
    with FileSource(path) as source:
        return read_fatbins(source, parse_elf(source, relocations=False), **options)


def _run_cuobjdump(tool: Path, path: Path, *options: str) -> str:
    done = subprocess.run([str(tool), *options, str(path)], capture_output=True, text=True,
                          check=False)
    if done.returncode != 0 and "does not contain device code" not in done.stderr:
        raise AssertionError(f"cuobjdump failed on {path}: {done.stderr}")
    return done.stdout


_LISTED = re.compile(r"^(ELF|PTX) file\s+\d+: .*\.(sm_\w+)\.(?:cubin|ptx)$", re.MULTILINE)


def cuobjdump_listing(tool: Path, path: Path, all_sections: bool = False) -> tuple[
        tuple[str, str], ...]:
    """("ELF"|"PTX", arch) from `cuobjdump --list-elf --list-ptx`, in its order."""
    options = ("-all",) if all_sections else ()
    out = _run_cuobjdump(tool, path, *options, "--list-elf", "--list-ptx")
    return tuple((m[1], m[2]) for m in _LISTED.finditer(out))


def cuobjdump_headers(tool: Path, path: Path) -> list[dict[str, str]]:
    """The 'Fatbin <kind> code:' blocks of plain `cuobjdump`, one dict per entry."""
    blocks: list[dict[str, str]] = []
    in_header = False
    for line in _run_cuobjdump(tool, path).splitlines():
        if m := re.fullmatch(r"Fatbin (\w+) code:", line):
            blocks.append({"kind": m[1]})
            in_header = True
        elif in_header and not line:
            in_header = False
        elif in_header and not line.startswith("="):
            key, sep, value = line.partition(" = ")
            blocks[-1][key] = value if sep else ""
    return blocks


def _our_header(entry: FatbinEntry) -> dict[str, str]:
    """One entry in the form of cuobjdump_headers()."""
    kinds = {EntryKind.ELF: "elf", EntryKind.PTX: "ptx", EntryKind.NVVM: "nvvm"}
    block = {"kind": kinds[EntryKind(entry.kind)], "arch": str(entry.arch),
             "code version": f"[{entry.code_version[0]},{entry.code_version[1]}]"}
    if entry.flags & fatbin.FLAG_LINUX:
        block["host"] = "linux"
    block["compile_size"] = "64bit" if entry.flags & fatbin.FLAG_64BIT else "32bit"
    if entry.has_debug_info:
        block["has debug info"] = ""
    if entry.compression is not Compression.NONE:
        block["compressed"] = ""
    if entry.identifier:
        block["identifier"] = entry.identifier
    if entry.kind == EntryKind.PTX:
        block["ptxasOptions"] = entry.options
    if entry.kind == EntryKind.NVVM:
        block["nvvmOptions"] = entry.options
    return block


def _torch_cu_file(venv: Path, relative: str) -> Path:
    found = sorted(venv.glob(f"lib/python3*/site-packages/{relative}"))
    if not found:
        pytest.skip(f"no {relative} under {venv} (the torch CUDA test venv; delete it and run "
                    "`pytest --run-cuda` to create it again)")
    return found[0]


# ---------------------------------------------------------------------------------------------
# Differential: listings and headers against cuobjdump


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_listing_matches_cuobjdump(
    cuda_fixtures: tuple[Path, dict[str, Path]], cuobjdump: Path, name: str
) -> None:
    """The listing equals `cuobjdump --list-elf --list-ptx` on every nvcc-built fixture."""
    path = _fixture(cuda_fixtures, name)
    assert _read(path).listing() == cuobjdump_listing(cuobjdump, path)


@pytest.mark.parametrize("name", RELOCATABLE_FIXTURES)
def test_all_sections_listing_matches_cuobjdump_all(
    cuda_fixtures: tuple[Path, dict[str, Path]], cuobjdump: Path, name: str
) -> None:
    """With all_sections, the listing equals `cuobjdump -all` (`__nv_relfatbin` included)."""
    path = _fixture(cuda_fixtures, name)
    ours = _read(path, all_sections=True).listing()
    assert ours == cuobjdump_listing(cuobjdump, path, all_sections=True)


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_entry_headers_match_cuobjdump(
    cuda_fixtures: tuple[Path, dict[str, Path]], cuobjdump: Path, name: str
) -> None:
    """Kind, arch with variant, code version, compression, identifier and options match."""
    path = _fixture(cuda_fixtures, name)
    ours = [_our_header(e) for e in _read(path).entries]
    assert ours == cuobjdump_headers(cuobjdump, path)


@pytest.mark.slow
def test_torchvision_listing_matches_cuobjdump(cuobjdump: Path, torch_cuda_venv: Path) -> None:
    """torchvision's extension module (_C.so, _C_stable.so from 0.29) lists as cuobjdump does."""
    path = _torch_cu_file(torch_cuda_venv, "torchvision/_C*.so")
    ours = _read(path, check_images=_zstd_available())
    assert ours.listing() == cuobjdump_listing(cuobjdump, path)
    assert [_our_header(e) for e in ours.entries] == cuobjdump_headers(cuobjdump, path)


@pytest.mark.slow
def test_library_without_device_code_has_no_containers(cuobjdump: Path,
                                                       torch_cuda_venv: Path) -> None:
    """libc10_cuda.so has no fat binary, and cuobjdump finds no device code in it either."""
    path = _torch_cu_file(torch_cuda_venv, "torch/lib/libc10_cuda.so")
    assert _read(path).containers == ()
    assert cuobjdump_listing(cuobjdump, path) == ()


@pytest.mark.slow
def test_libtorch_cuda_listing_matches_cuobjdump(cuobjdump: Path, torch_cuda_venv: Path) -> None:
    """libtorch_cuda.so's 2975 images list exactly as cuobjdump lists them (~15 s of cuobjdump)."""
    path = _torch_cu_file(torch_cuda_venv, "torch/lib/libtorch_cuda.so")
    code = _read(path)
    assert code.listing() == cuobjdump_listing(cuobjdump, path)
    assert Arch(103, Variant.FAMILY) in code.sass_archs


@pytest.mark.slow
def test_libtorch_cuda_images_agree_with_their_headers(torch_cuda_venv: Path) -> None:
    """Every zstd-compressed cubin of libtorch_cuda.so is an ELF file for the SM its entry says."""
    if not _zstd_available():
        pytest.skip("no zstd decoder: pip install backports.zstd")
    code = _read(_torch_cu_file(torch_cuda_venv, "torch/lib/libtorch_cuda.so"),
                 check_images=True)
    heads = [e.head for e in code.entries]
    assert all(isinstance(h, CubinHead) for h in heads) and code.notes == ()


# ---------------------------------------------------------------------------------------------
# What the fixtures hold


def test_sass_mix_has_arch_specific_sass_and_no_ptx(
    cuda_fixtures: tuple[Path, dict[str, Path]]
) -> None:
    """sm_80/sm_90/sm_90a/sm_120 SASS and no PTX; sm_90a is flagged arch-specific."""
    code = _read(_fixture(cuda_fixtures, "sass_mix"))
    assert code.sass_archs == {Arch(80), Arch(90), Arch(90, Variant.ARCH_SPECIFIC), Arch(120)}
    assert code.ptx_archs == frozenset()


def test_blackwell_family_and_arch_specific_variants(
    cuda_fixtures: tuple[Path, dict[str, Path]]
) -> None:
    """sm_100a, sm_100f and sm_120f SASS and compute_120f PTX keep their variants."""
    code = _read(_fixture(cuda_fixtures, "blackwell"))
    assert code.sass_archs == {Arch(100, Variant.ARCH_SPECIFIC), Arch(100, Variant.FAMILY),
                               Arch(120, Variant.FAMILY)}
    assert code.ptx_archs == {Arch(120, Variant.FAMILY)}


def test_cuda13_cubin_e_flags_do_not_tell_arch_specific(
    cuda_fixtures: tuple[Path, dict[str, Path]]
) -> None:
    """ELF ABI 8 cubins for sm_90 and sm_90a have equal e_flags: only the entry flags differ."""
    code = _read(_fixture(cuda_fixtures, "sass_mix"), check_images=True)
    flags = {str(e.arch): e.head.flags for e in code.containers[-1].entries
             if isinstance(e.head, CubinHead)}
    assert flags["sm_90"] == flags["sm_90a"]


def test_ptx_only_fixture_has_one_ptx_entry(cuda_fixtures: tuple[Path, dict[str, Path]]) -> None:
    """compute_80 alone gives one PTX entry of ISA 9.0 (nvcc 13) and an empty link container."""
    code = _read(_fixture(cuda_fixtures, "ptx_only"))
    (entry,) = code.entries
    assert (entry.is_ptx, entry.arch, entry.code_version) == (True, Arch(80), (9, 0))
    assert [len(c.entries) for c in code.containers] == [0, 1]


@pytest.mark.parametrize(("name", "compression"), [
    ("uncompressed", Compression.NONE), ("lz4", Compression.LZ4), ("zstd", Compression.ZSTD)])
def test_compression_of_every_entry(
    cuda_fixtures: tuple[Path, dict[str, Path]], name: str, compression: Compression
) -> None:
    """-compress-mode=none/speed/size with -compress-all give no compression, LZ4, zstd."""
    code = _read(_fixture(cuda_fixtures, name))
    assert {e.compression for e in code.entries} == {compression}
    if compression is not Compression.NONE:
        assert all(e.stored_size < e.uncompressed_size for e in code.entries)


def test_lz4_images_are_checked_without_zstd(
    cuda_fixtures: tuple[Path, dict[str, Path]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """LZ4 payloads are decoded here: cubin ELF headers and PTX directives are read."""
    monkeypatch.setattr(fatbin, "_zstd_codec", lambda: None)
    code = _read(_fixture(cuda_fixtures, "lz4"), check_images=True)
    heads = {(str(e.arch), type(e.head).__name__) for e in code.entries}
    assert heads == {("sm_80", "CubinHead"), ("sm_90", "CubinHead"), ("sm_90", "PtxHead")}
    assert code.notes == ()


def test_zstd_images_unchecked_without_a_decoder_say_so(
    cuda_fixtures: tuple[Path, dict[str, Path]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a zstd decoder the zstd payloads keep no head, and a note names the fix."""
    monkeypatch.setattr(fatbin, "_zstd_codec", lambda: None)
    code = _read(_fixture(cuda_fixtures, "zstd"), check_images=True)
    assert all(e.head is None for e in code.entries)
    assert len(code.notes) == 1 and "backports.zstd" in code.notes[0]


def test_zstd_images_checked_with_a_decoder(cuda_fixtures: tuple[Path, dict[str, Path]]) -> None:
    """With a zstd decoder, zstd payloads are checked: cubin SM and PTX .version/.target."""
    if not _zstd_available():
        pytest.skip("no zstd decoder: pip install backports.zstd")
    code = _read(_fixture(cuda_fixtures, "zstd"), check_images=True)
    ptx = [e.head for e in code.entries if e.is_ptx]
    assert ptx == [PtxHead((9, 0), "sm_80")]
    assert all(isinstance(e.head, CubinHead) for e in code.entries if e.is_sass)


def test_debug_build_records_identifier_and_ptxas_options(
    cuda_fixtures: tuple[Path, dict[str, Path]]
) -> None:
    """nvcc -G: debug flag, the source identifier, and -g among the PTX's ptxas options."""
    code = _read(_fixture(cuda_fixtures, "debug"))
    ptx = next(e for e in code.entries if e.is_ptx)
    assert ptx.has_debug_info and ptx.identifier.endswith("/vector_add.cu")
    assert "-g" in ptx.options.split()


def test_two_translation_units_are_two_containers(
    cuda_fixtures: tuple[Path, dict[str, Path]]
) -> None:
    """Objects compiled apart and linked by g++ keep one container each, with their own archs."""
    code = _read(_fixture(cuda_fixtures, "two_units"))
    archs = [c.sass_archs for c in code.containers]
    assert archs == [{Arch(80), Arch(90)}, {Arch(90, Variant.ARCH_SPECIFIC)}]


def test_relocatable_object_reads_relfatbin(cuda_fixtures: tuple[Path, dict[str, Path]]) -> None:
    """An -rdc object has only __nv_relfatbin, which is read when .nv_fatbin is absent."""
    code = _read(_fixture(cuda_fixtures, "relocatable"))
    assert {c.section for c in code.containers} == {"__nv_relfatbin"}


def test_lto_ir_entry_is_kept_but_not_listed(cuda_fixtures: tuple[Path, dict[str, Path]]) -> None:
    """-dlto objects carry an NVVM IR entry; it is read but, as in cuobjdump, not listed."""
    code = _read(_fixture(cuda_fixtures, "lto"))
    assert EntryKind.NVVM in {e.kind for e in code.entries}
    assert code.listing() == (("PTX", "sm_90"),)


def test_object_without_fatbin_has_no_containers() -> None:
    """An ELF file without .nv_fatbin (this Python) has no GPU code."""
    code = _read(Path(sys.executable).resolve())
    assert code.containers == () and code.sass_archs == frozenset()


# ---------------------------------------------------------------------------------------------
# Corrupt data: FormatError, never another exception


def _fatbin_bytes(path: Path) -> tuple[bytes, ElfImage, int, int]:
    """The file's bytes, its parsed headers, and where its .nv_fatbin starts and ends."""
    data = path.read_bytes()
    image = parse_elf(BytesSource(data, path.name), relocations=False)
    section = image.section(".nv_fatbin")
    assert section is not None
    return data, image, section.offset, section.offset + section.size


def _patched(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


def _read_bytes(data: bytes, image: ElfImage, check_images: bool = False) -> GpuCode:
    return read_fatbins(BytesSource(data, "lib.so"), image, check_images=check_images)


@pytest.mark.parametrize(("where", "fmt", "value", "message"), [
    pytest.param(0, "<I", 0x12345678, "bad magic 0x12345678", id="container-magic"),
    pytest.param(6, "<H", 8, "header size 8 is smaller than 16", id="container-header-size"),
    pytest.param(8, "<Q", 1 << 40, "extends past the end of section", id="container-size"),
    pytest.param(16 + 4, "<I", 8, "entry: header size 8 is smaller than 64", id="entry-header"),
    pytest.param(16 + 8, "<Q", 1 << 40, "extends past the end of its container", id="entry-size"),
    pytest.param(16 + 40, "<Q", 0xA011, "both LZ4 and zstd", id="two-compressions"),
])
def test_corrupt_headers_raise_format_error(
    cuda_fixtures: tuple[Path, dict[str, Path]], where: int, fmt: str, value: int, message: str
) -> None:
    """A bad field in the first container or entry header raises FormatError naming it."""
    data, image, start, _end = _fatbin_bytes(_fixture(cuda_fixtures, "lz4"))
    with pytest.raises(FormatError, match=re.escape(message)):
        _read_bytes(_patched(data, start + where, fmt, value), image)


def test_truncated_file_raises_format_error(cuda_fixtures: tuple[Path, dict[str, Path]]) -> None:
    """A file cut inside .nv_fatbin raises FormatError: the section extends past the end."""
    data, image, start, _end = _fatbin_bytes(_fixture(cuda_fixtures, "lz4"))
    with pytest.raises(FormatError, match=r"section \.nv_fatbin .* extends past the end"):
        _read_bytes(data[:start + 100], image)


def test_cubin_for_another_sm_raises_when_checked(
    cuda_fixtures: tuple[Path, dict[str, Path]]
) -> None:
    """An entry that says sm_75 over an sm_80 cubin is caught by check_images."""
    data, image, start, _end = _fatbin_bytes(_fixture(cuda_fixtures, "lz4"))
    patched = _patched(data, start + 16 + 28, "<I", 75)
    assert _read_bytes(patched, image).entries[0].arch == Arch(75)
    with pytest.raises(FormatError, match=r"e_flags .* name sm_80"):
        _read_bytes(patched, image, check_images=True)


def test_corrupt_lz4_raises_when_checked(cuda_fixtures: tuple[Path, dict[str, Path]]) -> None:
    """LZ4 data whose first match reaches before the output start raises FormatError."""
    data, image, start, _end = _fatbin_bytes(_fixture(cuda_fixtures, "lz4"))
    payload = start + 16 + struct.unpack_from("<I", data, start + 16 + 4)[0]
    patched = bytearray(data)
    patched[payload:payload + 4] = b"\x04\xff\xff\x00"  # no literals, match 64 KiB back
    with pytest.raises(FormatError, match="corrupt LZ4 data"):
        _read_bytes(bytes(patched), image, check_images=True)


def test_unreadable_section_headers_raise_format_error(
    cuda_fixtures: tuple[Path, dict[str, Path]]
) -> None:
    """Without readable section headers the fat binaries cannot be found: FormatError."""
    data, image, _start, _end = _fatbin_bytes(_fixture(cuda_fixtures, "lz4"))
    broken = replace(image, sections=(), section_problem="section header table truncated")
    with pytest.raises(FormatError, match="section headers are unreadable"):
        _read_bytes(data, broken)


_FUZZ_FIXTURES = ("lz4", "zstd", "blackwell")


@pytest.fixture(scope="module")
def fuzz_inputs(
    cuda_fixtures: tuple[Path, dict[str, Path]]
) -> dict[str, tuple[bytes, ElfImage, int, int]]:
    """Bytes, headers and .nv_fatbin range of the fixtures the fuzz test corrupts."""
    return {name: _fatbin_bytes(cuda_fixtures[1][name]) for name in _FUZZ_FIXTURES
            if name in cuda_fixtures[1]}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_flipped_or_truncated_fatbins_raise_only_format_error(
    fuzz_inputs: dict[str, tuple[bytes, ElfImage, int, int]], data: st.DataObject
) -> None:
    """Flipping bytes of .nv_fatbin or cutting it short gives a listing or FormatError."""
    name = data.draw(st.sampled_from(sorted(fuzz_inputs)))
    original, image, start, end = fuzz_inputs[name]
    corrupt = bytearray(original)
    for _ in range(data.draw(st.integers(1, 4))):
        corrupt[data.draw(st.integers(start, end - 1))] ^= data.draw(st.integers(1, 255))
    if data.draw(st.booleans()):
        corrupt = corrupt[:data.draw(st.integers(start, end))]
    try:
        code = _read_bytes(bytes(corrupt), image, check_images=data.draw(st.booleans()))
    except FormatError as e:
        assert e.where == "lib.so" and e.problem
    else:
        assert isinstance(code, GpuCode)


# ---------------------------------------------------------------------------------------------
# Bounds: millions of tiny containers cost a comparison each, not a parse and an object


TINY = crafted.container(crafted.cubin(90))  # 80 bytes: one empty sm_90 cubin
PAIR = crafted.container(crafted.cubin(80), crafted.ptx(80))
JUNK = crafted.container(crafted.cubin(90, b"not an ELF file"))  # kernels not known (None)
ARCH = crafted.container(crafted.cubin(90, flags=crafted.LINUX_64BIT | crafted.ARCH_SPECIFIC))
UNITS = (TINY, PAIR, JUNK, ARCH)
SPACE = 1 << 17  # bytes of the .nv_fatbin that `spaced` rewrites (12 runs of 40 fit)


@pytest.fixture(scope="module")
def crafted_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("crafted")


def _crafted(dest: Path, name: str, **sections: bytes) -> GpuCode:
    """read_gpu_code of a library carrying `sections` (`nv_fatbin=` is `.nv_fatbin`)."""
    path = crafted.library(dest, name, {f".{k}": v for k, v in sections.items()})
    with FileSource(path) as source:
        code = read_gpu_code(source, parse_elf(source, relocations=False))
    assert code is not None
    return code


def test_identical_tiny_containers_are_one_value_with_a_count(crafted_dir: Path) -> None:
    """50,000 copies of an 80-byte container (4 MB) are one container of count 50,000: the
    listing, the summary and the verdict count every copy, and the cached value stays small."""
    copies = 50_000
    code = _crafted(crafted_dir, "tiny", nv_fatbin=TINY * copies)
    assert [(c.offset - code.containers[0].offset, c.size, c.count)
            for c in code.containers] == [(0, 80, copies)]
    assert code.fat_binaries == copies and code.sass_archs == {Arch(90)}
    assert code.listing() == (("ELF", "sm_90"),) * copies
    assert (summarize(code).containers, summarize(code).entries) == (copies, copies)
    assert object_coverage(code, GpuTarget(parse_compute_capability("9.0"), None, "--gpu")
                           ).covered == copies
    encoded = datacodec.encode(code)
    assert len(encoded) < 1024 and datacodec.decode(encoded, "cache") == code


def test_runs_of_real_containers_list_as_cuobjdump_lists_them(
    cuda_fixtures: tuple[Path, dict[str, Path]], cuobjdump: Path, crafted_dir: Path
) -> None:
    """nvcc-built containers laid in runs (a stub, 300 x A, 2 x B, padding, A) list in
    cuobjdump's order and number, from four values."""
    def containers(name: str) -> list[bytes]:
        data = _fixture(cuda_fixtures, name).read_bytes()
        return [data[c.offset:c.offset + c.size]
                for c in _read(_fixture(cuda_fixtures, name)).containers]

    stub, first = containers("uncompressed")
    second = containers("lz4")[1]
    path = crafted.library(crafted_dir, "runs", {
        ".nv_fatbin": stub + first * 300 + second * 2 + bytes(16) + first})
    code = _read(path)
    assert [(c.count, c.kernels) for c in code.containers] == [
        (1, False), (300, True), (2, True), (1, True)]
    assert code.listing() == cuobjdump_listing(cuobjdump, path)


def test_unchecked_images_of_repeats_are_counted(
    cuda_fixtures: tuple[Path, dict[str, Path]], crafted_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without a zstd decoder, the note counts the images of every repeat, as when each
    container is read on its own."""
    monkeypatch.setattr(fatbin, "_zstd_codec", lambda: None)
    path = _fixture(cuda_fixtures, "zstd")
    last = _read(path).containers[-1]
    unit = path.read_bytes()[last.offset:last.offset + last.size]
    crafted_path = crafted.library(crafted_dir, "zstd_runs", {".nv_fatbin": unit * 5})
    folded = _read(crafted_path, check_images=True)
    monkeypatch.setattr(fatbin, "_REPEAT_UNIT", 0)
    one_by_one = _read(crafted_path, check_images=True)
    assert [c.count for c in folded.containers] == [5]
    assert folded.notes == one_by_one.notes
    assert folded.notes[0].startswith(f"{5 * len(last.entries)} zstd-compressed images")


@pytest.fixture(scope="module")
def spaced(crafted_dir: Path) -> tuple[bytes, ElfImage, int]:
    """A library whose .nv_fatbin is SPACE zero bytes, its headers, and where the section
    starts: tests write containers over the zeros (what is left is padding)."""
    path = crafted.library(crafted_dir, "spaced", {".nv_fatbin": bytes(SPACE)})
    data = path.read_bytes()
    image = parse_elf(BytesSource(data, path.name), relocations=False)
    section = image.section(".nv_fatbin")
    assert section is not None
    return data, image, section.offset


def _without_offsets(code: GpuCode) -> list[tuple[object, ...]]:
    """Each container (a repeated one once per repeat), its entries without their offsets."""
    return [(c.section, c.size, c.version, c.kernels,
             tuple(replace(e, offset=0) for e in c.entries))
            for c in code.containers for _ in range(c.count)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs=st.lists(st.tuples(st.sampled_from(range(len(UNITS))), st.integers(1, 40),
                               st.sampled_from((0, 8, 24))), min_size=1, max_size=12))
def test_folding_repeats_changes_nothing_but_the_count(
    spaced: tuple[bytes, ElfImage, int], runs: list[tuple[int, int, int]]
) -> None:
    """Runs of containers, with or without padding after each, read as they are read one by
    one: the same containers in the same order, the same listing."""
    data, image, start = spaced
    layout = b"".join((UNITS[unit] + bytes(pad)) * times for unit, times, pad in runs)
    assert len(layout) <= SPACE
    source = BytesSource(data[:start] + layout + data[start + len(layout):])
    folded = read_fatbins(source, image)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fatbin, "_REPEAT_UNIT", 0)  # no repeats looked for: one value each
        one_by_one = read_fatbins(source, image)
    assert all(c.count == 1 for c in one_by_one.containers)
    assert _without_offsets(folded) == _without_offsets(one_by_one)
    assert folded.listing() == one_by_one.listing()
    assert len(folded.containers) <= len(runs)


def test_embedded_repeats_are_counted(crafted_dir: Path) -> None:
    """Fat binaries in a data section, in runs between other data, are counted like those of
    .nv_fatbin; the library's kernels run where any of them has code."""
    rodata = b"\x01" * 8 + TINY * 1000 + b"\x02" * 8 + PAIR * 3 + bytes(8) + TINY
    code = _crafted(crafted_dir, "embedded_runs", nv_fatbin=crafted.container(),
                    lrodata=rodata)
    assert [(c.count, sorted(map(str, c.sass_archs))) for c in code.embedded] == [
        (1000, ["sm_90"]), (3, ["sm_80"]), (1, ["sm_90"])]
    assert summarize(code).embedded == EmbeddedSummary(1004, (".lrodata",), ("sm_80", "sm_90"),
                                                       ("compute_80",))
    on_ampere = object_coverage(code, GpuTarget(parse_compute_capability("8.6"), None, "--gpu"))
    assert (on_ampere.verdict, on_ampere.covered, on_ampere.containers) == ("runs-sass", 3, 1004)
    assert coverage_reason(on_ampere.reason).startswith("3 of 1004 fat binaries have code for 8.6")


@pytest.mark.parametrize(("limit", "sections", "message"), [
    pytest.param("READ_FLOOR", {"nv_fatbin": (TINY + PAIR) * 60},
                 "more than 100 fat binary containers and entries to read in .nv_fatbin",
                 id="containers"),
    pytest.param("READ_FLOOR", {"nv_fatbin": crafted.container(*[crafted.cubin(90)] * 100)},
                 "more than 100 fat binary containers and entries", id="entries"),
    pytest.param("STRAY_LIMIT", {"nv_fatbin": crafted.container(),
                                 "lrodata": (struct.pack("<IIQ", crafted.MAGIC, 0, 1)) * 101},
                 "more than 100 fat binary magic numbers in .lrodata that start no fat binary",
                 id="aligned-strays"),
    pytest.param("STRAY_LIMIT", {"nv_fatbin": crafted.container(),
                                 "lrodata": struct.pack("<II", 0, crafted.MAGIC) * 101},
                 "more than 100 fat binary magic numbers in .lrodata", id="misaligned-strays"),
])
def test_past_a_limit_the_read_stops_with_one_format_error(
    crafted_dir: Path, monkeypatch: pytest.MonkeyPatch, limit: str,
    sections: dict[str, bytes], message: str,
) -> None:
    """Containers that are not repeats, entries, and magic numbers that start no fat binary
    are read up to a limit; past it, a FormatError names the limit (here set to 100)."""
    monkeypatch.setattr(fatbin, limit, 100)
    monkeypatch.setattr(fatbin, "READ_BYTES", 1 << 40)  # no allowance for the bytes read
    with pytest.raises(FormatError, match=re.escape(message)) as raised:
        _crafted(crafted_dir, f"limit_{limit}", **sections)
    assert raised.value.where.endswith(f"limit_{limit}.so")


def test_the_limit_grows_with_the_bytes_read(crafted_dir: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """One more container or entry is read per READ_BYTES bytes of the sections: 300 of them
    in 13,440 bytes pass a floor of 100 at one per 32 bytes."""
    monkeypatch.setattr(fatbin, "READ_FLOOR", 100)
    monkeypatch.setattr(fatbin, "READ_BYTES", 32)
    code = _crafted(crafted_dir, "allowance", nv_fatbin=(TINY + PAIR) * 60)
    assert code.fat_binaries == 120 and len(code.containers) == 120


def test_notes_about_single_images_are_bounded() -> None:
    """Past NOTE_LIMIT notes about single images, the rest are counted in one line."""
    reader = fatbin._Reader(BytesSource(b""), False, None)
    for n in range(fatbin.NOTE_LIMIT + 5):
        reader.note(f"image {n}")
    assert reader.notes()[-1] == "5 more notes like these were left out"
    assert len(reader.notes()) == fatbin.NOTE_LIMIT + 1


# ---------------------------------------------------------------------------------------------
# LZ4


@pytest.mark.parametrize(("block", "limit", "expected"), [
    pytest.param(b"\x50hello", 10, b"hello", id="literals-only"),
    pytest.param(b"\x26ab\x02\x00", 12, b"ab" * 6, id="overlapping-match"),
    pytest.param(b"\x1fa\x01\x00\xff\x05", 8, b"aaaaaaaa", id="long-match-cut-at-limit"),
    pytest.param(b"\xf0\x05" + b"x" * 20, 25, b"x" * 20, id="long-literals"),
    pytest.param(b"\x40abcd\x04\x00", 3, b"abc", id="prefix-only"),
])
def test_lz4_block_prefix(block: bytes, limit: int, expected: bytes) -> None:
    """LZ4 blocks decode to their first `limit` bytes, matches overlapping their source."""
    assert lz4_block_prefix(block, limit) == expected


def test_lz4_match_before_output_start_raises() -> None:
    """A match distance beyond the bytes decoded so far is an error."""
    with pytest.raises(ValueError, match="match distance 9"):
        lz4_block_prefix(b"\x20ab\x09\x00", 16)


# ---------------------------------------------------------------------------------------------
# Coverage rules (abifit.sim.gpu)


def _entry(spec: str) -> FatbinEntry:
    """'sm_90a' is SASS; 'compute_80' PTX of ISA 9.0; 'compute_80@8.5' PTX of ISA 8.5."""
    name, _at, isa = spec.partition("@")
    arch = parse_arch(name)
    kind = EntryKind.PTX if name.startswith("compute_") else EntryKind.ELF
    version = parse_release(isa or "9.0") if kind == EntryKind.PTX else (1, 8)
    return FatbinEntry(0, kind, arch, version, 0x11, 64, 0, 0, 0, Compression.NONE)


def _code(*containers: str) -> GpuCode:
    """A GpuCode with one container per space-separated list of entry specs."""
    return GpuCode("lib.so", tuple(
        FatbinContainer(".nv_fatbin", i, 0, 1, tuple(_entry(s) for s in specs.split()))
        for i, specs in enumerate(containers)))


def _cc(text: str) -> ComputeCapability:
    return parse_compute_capability(text)


@pytest.mark.parametrize(("arch", "gpu", "runs"), [
    ("sm_80", "9.0", False), ("sm_90", "9.0", True), ("sm_90a", "9.0", True),
    ("sm_120", "9.0", False), ("sm_100", "9.0", False), ("sm_86", "8.9", True),
    ("sm_89", "8.6", False), ("sm_100", "10.3", True), ("sm_100a", "10.3", False),
    ("sm_100f", "10.3", True), ("sm_103f", "10.0", False), ("sm_100f", "11.0", False),
    ("sm_120f", "12.1", True), ("sm_120a", "12.1", False), ("sm_121a", "12.1", True),
], ids=lambda v: str(v))
def test_sass_rules(arch: str, gpu: str, runs: bool) -> None:
    """SASS runs on its major with minor <= the GPU's; `a` only on its exact arch."""
    assert sass_runs_on(parse_arch(arch), _cc(gpu)) is runs


@pytest.mark.parametrize(("arch", "gpu", "compiles"), [
    ("compute_80", "9.0", True), ("compute_80", "12.0", True), ("compute_120", "9.0", False),
    ("compute_90a", "9.0", True), ("compute_90a", "10.0", False),
    ("compute_100f", "10.3", True), ("compute_100f", "12.0", False),
    ("compute_103f", "10.0", False),
], ids=lambda v: str(v))
def test_ptx_jit_rules(arch: str, gpu: str, compiles: bool) -> None:
    """PTX JIT-compiles for newer GPUs; `a` PTX for its arch only; `f` PTX within its family."""
    assert ptx_compiles_for(parse_arch(arch), _cc(gpu)) is compiles


@pytest.mark.parametrize(("isa", "driver", "reads"), [
    ("9.0", "13.0", True), ("9.0", "12.9", False), ("8.8", "12.9", True), ("8.6", "12.6", False),
    ("8.5", "12.6", True), ("7.0", None, True), ("9.9", "13.5", False), ("9.9", "14.0", True),
], ids=lambda v: str(v))
def test_driver_reads_ptx_isa(isa: str, driver: str | None, reads: bool) -> None:
    """A driver reads PTX ISA versions up to its CUDA release's (unknown driver: assumed yes)."""
    release = parse_release(driver) if driver else None
    assert driver_reads_ptx(parse_release(isa), release) is reads


@pytest.mark.parametrize(("containers", "gpu", "driver", "verdict", "partial"), [
    pytest.param(("sm_120 sm_100 sm_80",), "9.0", "13.0", Verdict.NO_KERNEL_IMAGE, False,
                 id="sm_120-sm_100-sm_80-sass-on-9.0"),
    pytest.param(("sm_80",), "9.0", "13.0", Verdict.NO_KERNEL_IMAGE, False,
                 id="sm_80-sass-on-9.0"),
    pytest.param(("sm_90a",), "9.0", "13.0", Verdict.RUNS_SASS, False, id="sm_90a-sass-on-9.0"),
    pytest.param(("sm_90a",), "10.0", "13.0", Verdict.NO_KERNEL_IMAGE, False,
                 id="sm_90a-sass-on-10.0"),
    pytest.param(("compute_80",), "9.0", "13.0", Verdict.RUNS_PTX_JIT, False,
                 id="compute_80-ptx-only-on-9.0"),
    pytest.param(("compute_80",), "9.0", None, Verdict.RUNS_PTX_JIT, False,
                 id="compute_80-ptx-only-driver-unknown"),
    pytest.param(("compute_80@9.0",), "9.0", "12.4", Verdict.NO_KERNEL_IMAGE, False,
                 id="ptx-too-new-for-driver"),
    pytest.param(("sm_80 compute_80@8.0",), "12.0", "12.4", Verdict.RUNS_PTX_JIT, False,
                 id="old-ptx-jit-on-12.0"),
    pytest.param(("sm_80 sm_90", "sm_90a"), "8.6", "13.0", Verdict.RUNS_SASS, True,
                 id="two-containers-one-covers-8.6"),
    pytest.param(("sm_80", "compute_80"), "9.0", "13.0", Verdict.RUNS_PTX_JIT, True,
                 id="jit-in-one-container-only"),
    pytest.param((), "9.0", "13.0", Verdict.NO_GPU_CODE, False, id="no-fatbin"),
    pytest.param(("",), "9.0", "13.0", Verdict.NO_GPU_CODE, False, id="empty-container"),
])
def test_coverage_verdicts(
    containers: tuple[str, ...], gpu: str, driver: str | None, verdict: Verdict, partial: bool
) -> None:
    """The per-object verdict and the partial flag follow the SASS, PTX and driver rules."""
    result = coverage(_code(*containers), _cc(gpu), parse_release(driver) if driver else None)
    assert (result.verdict, result.partial) == (verdict, partial)


def test_no_kernel_image_reason_is_a_derivation() -> None:
    """The reason names the GPU, the archs present and the runtime's error message."""
    result = coverage(_code("sm_80 sm_120"), _cc("9.0"))
    assert result.reason == NoneRun("9.0", NoImageFits("9.0", ("sm_80", "sm_120"), ()), 1, 1,
                                    NO_KERNEL_IMAGE)
    assert coverage_reason(result.reason) == (
        "Because the GPU is 9.0 and there is no SASS for 9.0 (SASS: sm_80, sm_120) and no PTX "
        f"that can be JIT-compiled for it (PTX: none), launching a kernel fails: {NO_KERNEL_IMAGE}")


def test_ptx_too_new_names_the_unsupported_toolchain_error() -> None:
    """PTX newer than the driver is no kernel image, with the runtime's toolchain message."""
    result = coverage(_code("compute_80@9.0"), _cc("9.0"), (12, 8))
    assert result.containers[0].error == UNSUPPORTED_PTX
    assert "newer than a CUDA 12.8 driver reads" in coverage_reason(result.reason)


def test_repeated_containers_count_in_verdicts() -> None:
    """A container that stands for five repeats counts five times in verdicts and reasons."""
    single = _code("sm_80", "sm_90")
    code = replace(single, containers=(replace(single.containers[0], count=5),
                                       single.containers[1]))
    on_hopper = object_coverage(code, GpuTarget(_cc("9.0"), None, "--gpu"))
    assert (on_hopper.covered, on_hopper.containers, on_hopper.partial) == (1, 6, True)
    assert coverage_reason(on_hopper.reason).startswith("1 of 6 fat binaries have code for 9.0")
    assert "(in 5 of 6 fat binaries)" in coverage_reason(coverage(code, _cc("7.5")).reason)
    assert [(g.count, g.sass) for g in summarize(code).groups] == [
        (5, ("sm_80",)), (1, ("sm_90",))]


def test_coverage_prefers_the_closest_sass() -> None:
    """Among runnable SASS the driver's pick is the newest, arch-specific first."""
    result = coverage(_code("sm_80 sm_86 sm_90 sm_90a compute_90"), _cc("9.0"))
    chosen = result.containers[0].entry
    assert chosen is not None and str(chosen.arch) == "sm_90a"


def test_coverage_of_fixtures_on_a_hopper(cuda_fixtures: tuple[Path, dict[str, Path]]) -> None:
    """On 9.0: sass_mix runs SASS, ptx_only needs the JIT (and a CUDA 13 driver)."""
    hopper = _cc("9.0")
    assert coverage(_read(_fixture(cuda_fixtures, "sass_mix")), hopper).verdict \
        is Verdict.RUNS_SASS
    ptx_only = _read(_fixture(cuda_fixtures, "ptx_only"))
    assert coverage(ptx_only, hopper, (13, 0)).verdict is Verdict.RUNS_PTX_JIT
    assert coverage(ptx_only, hopper, (12, 8)).verdict is Verdict.NO_KERNEL_IMAGE


def test_partial_coverage_of_two_units_on_ampere(
    cuda_fixtures: tuple[Path, dict[str, Path]]
) -> None:
    """On 8.6 the sm_90a-only translation unit is uncovered while the other runs."""
    result = coverage(_read(_fixture(cuda_fixtures, "two_units")), _cc("8.6"))
    assert result.partial and result.verdict is Verdict.RUNS_SASS
    assert [c.container.sass_archs for c in result.uncovered] == [
        {Arch(90, Variant.ARCH_SPECIFIC)}]


@pytest.mark.parametrize(("text", "expected"), [
    ("9.0", ComputeCapability(9, 0)), ("12.0", ComputeCapability(12, 0)),
    ("sm_90", ComputeCapability(9, 0)), ("sm_90a", ComputeCapability(9, 0)),
    ("sm_121", ComputeCapability(12, 1)),
], ids=lambda v: str(v))
def test_parse_compute_capability(text: str, expected: ComputeCapability) -> None:
    """Compute capabilities parse from 'X.Y' and from sm names."""
    assert parse_compute_capability(text) == expected


@pytest.mark.parametrize("text", ["nine", "9", "sm_9", "9.10"])
def test_parse_compute_capability_rejects_and_quotes(text: str) -> None:
    """A bad compute capability raises ValueError quoting the input."""
    with pytest.raises(ValueError, match=re.escape(repr(text))):
        parse_compute_capability(text)


@pytest.mark.parametrize(("text", "expected"), [
    ("sm_90a", Arch(90, Variant.ARCH_SPECIFIC)), ("compute_80", Arch(80)),
    ("sm_120f", Arch(120, Variant.FAMILY)),
], ids=lambda v: str(v))
def test_parse_arch(text: str, expected: Arch) -> None:
    """Architecture names parse to SM and variant, and print back the same."""
    assert parse_arch(text) == expected
    assert str(expected) == text.replace("compute_", "sm_")
