"""Reading pasted error text for the loader's and CUDA's messages: every recognised form, with
traceback noise, colour codes and terminal wraps around it.

The loader's own texts are checked against the real loader in tests/commands/test_explain.py; the
GPU and CUDA texts here are the upstream ones:
- torch/cuda/__init__.py `_check_cubins` (torch 2.13.0): "{} with CUDA capability sm_{} is not
  compatible with the current PyTorch installation.\\nThe current PyTorch install supports CUDA
  capabilities {}." with `" ".join(get_arch_list())`;
- torchvision/extension.py `_check_cuda_version`: "Detected that PyTorch and torchvision were
  compiled with different CUDA major versions. PyTorch has CUDA Version={t_major}.{t_minor} and
  torchvision has CUDA Version={tv_major}.{tv_minor}. Please reinstall the torchvision that
  matches your PyTorch install.";
- the CUDA runtime's `cudaGetErrorString`: "no kernel image is available for execution on the
  device" (cudaErrorNoKernelImageForDevice; the same text came back on an H200, sm_90, driver
  580.159.04, from a kernel built for sm_80 alone, and `abifit explain` read it there against
  torch 2.11 cu130's environment), "CUDA driver version is insufficient for CUDA runtime
  version" (cudaErrorInsufficientDriver);
- glibc 2.36's text for a symbol whose version node the library has but not for it,
  "undefined symbol: bar, version VERS_1" (produced by a library rebuilt with `bar` moved from
  VERS_1 to VERS_2), and elf/dl-lookup.c's "symbol %s version %s not defined in file %s with
  link time reference", which other releases print for a version the file hides;
- torchvision's mask of a `_C.so` that did not load, "operator torchvision::nms does not exist"
  (src/abifit/data/import_rules.json), and torch/_ops.py `load_library`'s "Could not load this
  library: {path}".
"""

from __future__ import annotations

import pytest

from abifit.formats.errortext import (
    LOADER_REFUSALS,
    BusError,
    Clue,
    CouldNotLoad,
    CudaMajorMismatch,
    DamagedObject,
    DriverTooOld,
    MissingLibrary,
    MissingOperator,
    MissingVersion,
    NoKernelImage,
    UndefinedSymbol,
    UnsupportedArch,
    read_clues,
    unwrap,
)

SYMBOL = "_ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib"
SGL = "/x/site-packages/sgl_kernel/common_ops.abi3.so"

CASES: list[tuple[str, str, tuple[Clue, ...]]] = [
    ("undefined-symbol-with-object", f"ImportError: {SGL}: undefined symbol: {SYMBOL}",
     (UndefinedSymbol(SGL, SYMBOL),)),
    ("undefined-symbol-alone", "OSError: undefined symbol: cublasLtMatmul",
     (UndefinedSymbol(None, "cublasLtMatmul"),)),
    ("undefined-symbol-parenthesised", "ImportError: undefined symbol (PyExc_Foo)",
     (UndefinedSymbol(None, "PyExc_Foo"),)),
    ("symbol-lookup-error", f"python: symbol lookup error: /a/libx.so.1: undefined symbol: "
     f"{SYMBOL}", (UndefinedSymbol("/a/libx.so.1", SYMBOL),)),
    ("undefined-versioned-symbol", "OSError: /tmp/vs/_use.so: undefined symbol: bar, version "
     "VERS_1", (UndefinedSymbol("/tmp/vs/_use.so", "bar"),)),
    ("symbol-not-defined-in-file", "ImportError: /x/_ext.so: symbol bar version VERS_1 not "
     "defined in file libvs.so with link time reference", (UndefinedSymbol("/x/_ext.so", "bar"),)),
    ("cannot-open", "ImportError: libcudart.so.12: cannot open shared object file: No such file "
     "or directory", (MissingLibrary("libcudart.so.12", None),)),
    ("cannot-open-program", "python3: error while loading shared libraries: "
     "libpython3.11.so.1.0: cannot open shared object file: No such file or directory",
     (MissingLibrary("libpython3.11.so.1.0", "python3"),)),
    ("glibcxx", "ImportError: /usr/lib/x86_64-linux-gnu/libstdc++.so.6: version "
     "`GLIBCXX_3.4.32' not found (required by /x/_C.so)",
     (MissingVersion("GLIBCXX_3.4.32", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6", "/x/_C.so"),)),
    ("glibc", "/lib64/libc.so.6: version `GLIBC_2.34' not found (required by ./tool)",
     (MissingVersion("GLIBC_2.34", "/lib64/libc.so.6", "./tool"),)),
    ("cxxabi-unicode-quotes", "libstdc++.so.6: version \u2018CXXABI_1.3.15\u2019 not found",
     (MissingVersion("CXXABI_1.3.15", "libstdc++.so.6", None),)),
    ("no-kernel-image", "RuntimeError: CUDA error: no kernel image is available for execution "
     "on the device\nCUDA kernel errors might be asynchronously reported", (NoKernelImage(),)),
    ("unsupported-arch", "UserWarning: \nNVIDIA GeForce RTX 5090 with CUDA capability sm_120 is "
     "not compatible with the current PyTorch installation.\nThe current PyTorch install "
     "supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90.\nIf you want to use "
     "the NVIDIA GeForce RTX 5090 GPU with PyTorch, please check the instructions at "
     "https://pytorch.org/get-started/locally/",
     (UnsupportedArch("sm_120", ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86",
                                 "sm_90")),)),
    ("unsupported-arch-cut", "CUDA error: sm_120 is not compatible with the current PyTorch "
     "installation", (UnsupportedArch("sm_120", ()),)),
    ("driver-too-old", "RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA "
     "runtime version", (DriverTooOld(),)),
    ("missing-operator", "RuntimeError: operator torchvision::nms does not exist",
     (MissingOperator("torchvision", "nms"),)),
    ("could-not-load", "OSError: Could not load this library: /x/torchvision/_C.so",
     (CouldNotLoad("/x/torchvision/_C.so"),)),
    ("cuda-majors", "RuntimeError: Detected that PyTorch and torchvision were compiled with "
     "different CUDA major versions. PyTorch has CUDA Version=12.8 and torchvision has CUDA "
     "Version=13.0. Please reinstall the torchvision that matches your PyTorch install.",
     (CudaMajorMismatch("12.8", "13.0"),)),
    ("file-too-short", "ImportError: /x/pkg/_m.abi3.so: file too short",
     (DamagedObject("/x/pkg/_m.abi3.so", "file too short"),)),
    ("phentsize", "OSError: /x/libbad.so.1: ELF file's phentsize not the expected size",
     (DamagedObject("/x/libbad.so.1", "ELF file's phentsize not the expected size"),)),
    ("bus-error-shell", "bash: line 1: 27715 Bus error               python -c 'import pkg'",
     (BusError(),)),
    ("bus-error-faulthandler", "Fatal Python error: Bus error\n\nCurrent thread 0x7f (most "
     "recent call first):", (BusError(),)),
    ("nothing", "Segmentation fault (core dumped)", ()),
    ("not-a-bus-error", "OmniBus errors: none", ()),
]


@pytest.mark.parametrize(("text", "clues"), [(t, c) for _, t, c in CASES],
                         ids=[i for i, _, _ in CASES])
def test_each_form_is_read(text: str, clues: tuple[Clue, ...]) -> None:
    """Every recognised message becomes its clue, with the names it carries."""
    assert read_clues(text) == clues


def test_traceback_order_and_repeats() -> None:
    """In a traceback: clues in the order they appear, each once, and a message that names no
    object dropped where the same one names it."""
    text = (f"Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n"
            f"OSError: {SGL}: undefined symbol: {SYMBOL}\n\nDuring handling of the above "
            f"exception, another exception occurred:\n\nOSError: Could not load this library: "
            f"{SGL}\nundefined symbol: {SYMBOL}\nOSError: {SGL}: undefined symbol: {SYMBOL}")
    assert read_clues(text) == (UndefinedSymbol(SGL, SYMBOL), CouldNotLoad(SGL))


def test_colour_codes_and_terminal_wraps() -> None:
    """ANSI colour codes are dropped; a symbol a terminal wrapped at its width is joined; the
    next message on its own line is not."""
    text = f"ImportError: {SGL}: undefined symbol: {SYMBOL}"
    wrapped = "\n".join(text[i:i + 100] for i in range(0, len(text), 100))
    assert wrapped.count("\n") == 1 and SYMBOL not in wrapped
    coloured = wrapped.replace("ImportError", "\x1b[1;31mImportError\x1b[0m")
    assert unwrap(coloured) == text
    assert read_clues(coloured + "\nImportError: libfoo.so: cannot open shared object file") == (
        UndefinedSymbol(SGL, SYMBOL), MissingLibrary("libfoo.so", None))


@pytest.mark.parametrize("said", LOADER_REFUSALS)
def test_every_refusal_of_the_loader_is_read(said: str) -> None:
    """Each of glibc's words for a file it refuses, after the file's path, as the loader and
    abifit's simulation both print it."""
    assert read_clues(f"OSError: /venv/lib/pkg/_x.so: {said}") == (
        DamagedObject("/venv/lib/pkg/_x.so", said),)
