"""Where a pin is written: the physical line of a requirements file (the first of a requirement
continued with `\\`), the line of a TOML lock's `name = "..."` entry, and the file it is in
(an included requirements file its own)."""

from __future__ import annotations

from pathlib import Path

import pytest

from abifit.errors import UsageError
from abifit.formats.pins import (
    Pin,
    logical_lines,
    package_lines,
    placed_in_lock,
    pylock_toml,
    read_pins,
    requirements_txt,
    uv_lock,
)

DIGEST = "ab" * 32


def test_a_requirement_is_at_its_first_physical_line() -> None:
    """Comments, blank lines, options and continued lines count as the lines they are."""
    text = (f"# pinned\n\n--index-url https://example.org/simple\ntorch==2.9.1 \\\n"
            f"    --hash=sha256:{DIGEST}\nnumpy==2.1.0  # numeric\n-e ./local\nsix\n")
    pins, _included, skipped = requirements_txt(text)
    assert [(p.requirement, p.line) for p in pins] == [("torch==2.9.1", 4), ("numpy==2.1.0", 6),
                                                       ("six", 8)]
    assert pins[0].hashes == (DIGEST,) and skipped == ["-e ./local"]


def test_logical_lines_join_continued_lines_as_pip_does() -> None:
    """A line ending in a backslash is joined to the next; a last line may end in one."""
    assert list(logical_lines("a \\\n b\nc\nd\\")) == [(1, "a   b"), (3, "c"), (4, "d")]


def test_a_line_that_is_no_requirement_is_named_by_its_physical_line() -> None:
    """The error names the physical line, continued lines before it counted."""
    with pytest.raises(UsageError, match=r"reqs\.txt, line 3: not a requirement"):
        requirements_txt("a==1 \\\n  --hash=sha256:" + DIGEST + "\n!!\n", where="reqs.txt")


def test_read_pins_names_the_file_of_each_pin(tmp_path: Path) -> None:
    """A pin of an included file is written in that file, at its line there."""
    (tmp_path / "base.txt").write_text("# base\nnumpy==2.1.0\n")
    (tmp_path / "requirements.txt").write_text("-r base.txt\ntorch==2.9.1\n")
    pins = read_pins(str(tmp_path / "requirements.txt")).pins
    assert [(p.requirement, Path(p.file or "").name, p.line) for p in pins] == [
        ("torch==2.9.1", "requirements.txt", 2), ("numpy==2.1.0", "base.txt", 2)]


UV_LOCK = """\
version = 1
requires-python = ">=3.11"
resolution-markers = [
    "python_full_version < '3.12'",
    "python_full_version >= '3.12'",
]

[[package]]
name = "app"
version = "0.1"
source = { virtual = "." }
dependencies = [
    { name = "numpy", version = "2.4.6", marker = "python_full_version < '3.12'" },
    { name = "numpy", version = "2.5.5", marker = "python_full_version >= '3.12'" },
]

[package.metadata]
requires-dist = [{ name = "numpy" }]

[[package]]
name = "numpy"
version = "2.4.6"
source = { registry = "https://pypi.org/simple" }
resolution-markers = [
    "python_full_version < '3.12'",
]

[[package]]
name = "numpy"
version = "2.5.5"
source = { registry = "https://pypi.org/simple" }
resolution-markers = [
    "python_full_version >= '3.12'",
]
"""


def test_a_uv_lock_pin_is_at_the_entry_of_the_version_the_target_gets() -> None:
    """numpy is locked twice; each target's pin is at the `name` line of its own entry, and
    the dependency tables that name numpy inline are no entries."""
    older = {"python_version": "3.11", "python_full_version": "3.11.0"}
    newer = {"python_version": "3.12", "python_full_version": "3.12.0"}
    assert [(p.requirement, p.line) for p in uv_lock(UV_LOCK, older).pins] == [
        ("numpy==2.4.6", 21)]
    assert [(p.requirement, p.line) for p in uv_lock(UV_LOCK, newer).pins] == [
        ("numpy==2.5.5", 29)]


PYLOCK = """\
lock-version = "1.0"
created-by = "uv"

[[packages]]
name = "Torch"
version = "2.9.1"
wheels = [{ name = "torch.whl", url = "https://files/torch.whl" }]

[[packages]]
version = "2.1.0"
name = 'numpy'

[[packages.wheels]]
name = "numpy-2.1.0-cp311-cp311-manylinux_2_28_x86_64.whl"
url = "https://files/numpy.whl"
"""


def test_a_pylock_pin_is_at_its_name_line() -> None:
    """The `name` line, before or after the version, quoted either way; a wheel's own
    `name` in `[[packages.wheels]]` is no entry; names are compared canonically."""
    assert [(p.requirement, p.line) for p in pylock_toml(PYLOCK).pins] == [
        ("Torch==2.9.1", 5), ("numpy==2.1.0", 11)]
    assert package_lines(PYLOCK, "packages") == {
        ("torch", "2.9.1"): 5, ("torch", None): 5, ("numpy", "2.1.0"): 11, ("numpy", None): 11}


def test_pins_made_from_a_snapshot_are_placed_in_its_text() -> None:
    """A snapshot's pins (made from its packages, not its text) get the lock's lines."""
    placed = placed_in_lock([Pin("numpy==2.1.0"), Pin("scipy==1.0")], PYLOCK, "pylock.toml")
    assert [(p.file, p.line) for p in placed] == [("pylock.toml", 11), ("pylock.toml", None)]
