"""What the adversarial tests share: a real extension module of the stable ABI, built from
tests/fixtures/trust/abi3_module.c (the `module` fixture), and wheels that pip
installs."""

from __future__ import annotations

import io
import os
import sysconfig
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from fixtures.build import ROOT, compile_c, run_tool

TAG = "cp310-abi3-linux_x86_64"


@dataclass(frozen=True)
class Built:
    small: bytes  # the module, about 15 KB
    large: bytes  # the module with 600 KB of random bytes in a section: stored past 256 KiB


def build_module(out: Path) -> Built:
    """The module, built under `out`; skips the test where Python.h is missing."""
    include = sysconfig.get_paths()["include"]
    if not (Path(include) / "Python.h").is_file():
        pytest.skip(f"Python.h is not in {include}")
    small = compile_c(ROOT / "trust" / "abi3_module.c", out / "small.so", flags=[f"-I{include}"])
    (out / "pad.bin").write_bytes(os.urandom(600_000))
    run_tool(["objcopy", "--add-section", f".pad={out / 'pad.bin'}", small, out / "large.so"])
    return Built(small.read_bytes(), (out / "large.so").read_bytes())


def wheel(project: str, members: Sequence[tuple[str, bytes]], *, dist: str | None = None,
          method: int = zipfile.ZIP_DEFLATED, extra: int = 0) -> tuple[str, bytes]:
    """A wheel with a RECORD (pip wants one) whose members are written in the order given;
    `extra` empty files more."""
    dist = dist or f"{project}-1.0.dist-info"
    meta = [(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {project}\nVersion: 1.0\n"),
            (f"{dist}/WHEEL", f"Wheel-Version: 1.0\nTag: {TAG}\n")]
    names = [n for n, _ in members] + [n for n, _ in meta] + [f"{dist}/RECORD"]
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", method) as z:
        for name, data in [*members, *meta, (f"{dist}/RECORD",
                                              "".join(f"{n},,\n" for n in names))]:
            z.writestr(name, data)
        for n in range(extra):
            z.writestr(f"{project}/data/{n % 100}/f{n}.txt", b"")
    return f"{project}-1.0-{TAG}.whl", out.getvalue()




@pytest.fixture(scope="session", name="module")
def module_fixture(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """The module (a fixture: a test module that imports it can ask for it)."""
    return build_module(tmp_path_factory.mktemp("abi3"))
