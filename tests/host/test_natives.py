"""`host.natives.mark_plugins`: which files of a distribution are loaded by package code.

Files built here: a library-only distribution's library is a plugin (nothing links to it, its
package's code or another package's loads it); a program it ships is not, whether it has an
interpreter or is a static position-independent executable, which glibc refuses to load."""

from __future__ import annotations

import ctypes
import shutil
from pathlib import Path

import pytest

from abifit.host.localfs import LocalObjects
from abifit.host.natives import NativeFile, image_or_none, mark_plugins
from fixtures.build import compile_c
from helpers import FIXTURES

SOURCES = FIXTURES / "natives"

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    site = tmp_path_factory.mktemp("site")
    return {
        "library": compile_c(SOURCES / "thing.c", site / "libonly/lib/libthing.so",
                             soname="libthing.so"),
        "static_pie": compile_c(SOURCES / "tool.c", site / "libonly/bin/tool-static",
                                shared=False, flags=["-static-pie"]),
        "pie": compile_c(SOURCES / "tool.c", site / "libonly/bin/tool", shared=False,
                         flags=["-pie", "-fPIE"]),
        "site": site,
    }


def test_library_only_distribution(built: dict[str, Path]) -> None:
    """The library becomes a plugin; both programs stay what they are. Checked against the
    real loader: the library loads with RTLD_NOW, the static PIE is refused."""
    files = [NativeFile(str(built[k]), "libonly", None)
             for k in ("library", "static_pie", "pie")]
    marked = {Path(n.path).name: n.plugin
              for n in mark_plugins(files, image_or_none(LocalObjects()), [str(built["site"])],
                                    package_dir=lambda _d: False)}
    assert marked == {"libthing.so": True, "tool-static": False, "tool": False}
    ctypes.CDLL(str(built["library"]), mode=ctypes.RTLD_GLOBAL | 2)
    with pytest.raises(OSError, match="position-independent executable"):
        ctypes.CDLL(str(built["static_pie"]), mode=2)


def test_distribution_with_a_module_keeps_its_libraries(built: dict[str, Path]) -> None:
    """A distribution that has an extension module: its library outside a package directory
    is linked by that module or loaded by no one, not a plugin."""
    files = [NativeFile(str(built["library"]), "withmod", None),
             NativeFile(str(built["site"] / "withmod/_ext.so"), "withmod", "withmod._ext")]
    marked = mark_plugins(files, image_or_none(LocalObjects()), [str(built["site"])],
                          package_dir=lambda _d: False)
    assert [n.plugin for n in marked] == [False, False]
