"""Root causes, not cascades: when a package another one needs does not load, its failure is
said once, and each module that fails only because of it is one `blocked-by` finding."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from abifit.cli import main
from fixtures.build import compile_c
from helpers import FIXTURES, make_wheel

SOURCES = FIXTURES / "roots"
TAG = "cp310-abi3-linux_x86_64"


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """hostpkg (its _core cannot load, so its libhost.so never arrives) and userpkg, whose
    _user needs libhost.so and requires hostpkg."""
    root = tmp_path_factory.mktemp("roots")
    lib = compile_c(SOURCES / "libhost.c", root / "libhost.so", soname="libhost.so")
    core = compile_c(SOURCES / "core.c", root / "_core.abi3.so", libs=[lib],
                     rpath=["$ORIGIN/lib"], flags=["-Wl,--allow-shlib-undefined"])
    user = compile_c(SOURCES / "user.c", root / "_user.abi3.so", libs=[lib])
    host_name, host = make_wheel("hostpkg", "1.0", {
        "hostpkg/__init__.py": b"from hostpkg import _core\n",
        "hostpkg/_core.abi3.so": core.read_bytes(), "hostpkg/lib/libhost.so": lib.read_bytes()},
        tag=TAG)
    user_name, user_data = make_wheel("userpkg", "1.0", {
        "userpkg/__init__.py": b"import hostpkg\nfrom userpkg import _user\n",
        "userpkg/_user.abi3.so": user.read_bytes()}, requires=("hostpkg",), tag=TAG)
    (root / host_name).write_bytes(host)
    (root / user_name).write_bytes(user_data)
    return root / host_name, root / user_name


def test_a_failing_prerequisite_is_the_root_cause(
        wheels: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """userpkg with the hostpkg whose _core does not load: one finding for _core's own
    problem (the root cause), and _user is blocked by it, without a missing-library finding
    for libhost.so."""
    host, user = wheels
    code = main(["check", str(user), "--with", str(host), "--python-version", "3.11",
                 "--platform", "linux_x86_64", "--no-cache", "--offline", "--json"])
    doc = json.loads(capsys.readouterr().out)
    kinds = [(f["kind"], f["module"]) for f in doc["findings"]]
    assert code == 1
    assert ("undefined-symbol", "hostpkg._core") in kinds
    assert ("blocked-by", "userpkg._user") in kinds
    assert not [k for k in kinds if k[0] == "missing-library"]
    blocked = next(f for f in doc["findings"] if f["kind"] == "blocked-by")
    assert blocked["library"] == "libhost.so"
    assert "hostpkg._core (hostpkg) does not load" in blocked["message"]
    assert "symbol_nothing_defines" in blocked["explanation"]
    failing = [v for v in doc["imports"] if not v["loads"]]
    assert [(v["name"], v["cause"]) for v in failing] == [("userpkg", "hostpkg._core")]
    assert "undefined symbol: symbol_nothing_defines" in failing[0]["error"]


def test_the_root_cause_comes_first_in_the_text(
        wheels: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """The text names the root cause before the modules it blocks."""
    host, user = wheels
    main(["check", str(user), "--with", str(host), "--python-version", "3.11", "--platform",
          "linux_x86_64", "--no-cache", "--offline"])
    out = capsys.readouterr().out
    assert out.index("undefined-symbol: hostpkg._core") < out.index("blocked-by: userpkg._user")
