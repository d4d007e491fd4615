"""abifit.remote.diskcache's `info` and the `abifit cache` command: entries and bytes per bucket,
`--json` validated by its schema, and a warning for a cache directory that is not there."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from abifit.cli import main
from abifit.remote.diskcache import BUCKETS, SYMBOLS_STORE, Cache, RootState
from helpers import schema, validate

SCHEMA = schema("cache")


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["cache", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def filled(tmp_path: Path) -> Path:
    """A cache with two index pages and one view."""
    root = tmp_path / "cache"
    cache = Cache(root)
    cache.put_page("https://example.org/simple/a/", "text/html", b"<html></html>")
    cache.put_page("https://example.org/simple/b/", "text/html", b"<html></html>")
    cache.put_view("0" * 64, "a/lib.so", ("a view",))
    return root


def test_info_counts_each_bucket(filled: Path) -> None:
    """`Cache.info` counts the files and bytes of every bucket, in BUCKETS order, then the
    symbol store's."""
    info = Cache(filled).info()
    assert info.state is RootState.DIRECTORY and info.root == filled
    assert [b.name for b in info.buckets] == [*BUCKETS, SYMBOLS_STORE]
    counts = {b.name: b.entries for b in info.buckets}
    assert (counts["index-v2"], counts["views-v2"], counts["elf-v2"]) == (2, 1, 0)
    assert info.entries == 3 and info.bytes == sum(b.bytes for b in info.buckets) > 0


@pytest.mark.parametrize(("make", "state"), [
    (lambda p: None, RootState.MISSING),
    (lambda p: p.write_text("not a directory"), RootState.NOT_A_DIRECTORY),
], ids=["missing", "file"])
def test_info_of_a_root_that_is_no_directory(tmp_path: Path, make: Callable[[Path], object],
                                             state: RootState) -> None:
    """A missing root or a file in its place holds nothing, and says which it is."""
    root = tmp_path / "cache"
    make(root)
    info = Cache(root).info()
    assert (info.state, info.entries, info.bytes) == (state, 0, 0)


def test_cache_info_json_validates(filled: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`abifit cache info --json` prints one document that validates against
    cache.schema.json, with the directory, the totals and each bucket; nothing on stderr."""
    code, out, err = run(capsys, "info", "--json", "--cache-dir", str(filled))
    doc = json.loads(out)
    validate(doc, SCHEMA)
    assert (code, err) == (0, "")
    assert (doc["command"], doc["path"], doc["state"]) == ("cache", str(filled), "directory")
    assert doc["entries"] == 3 and doc["bytes"] == sum(b["bytes"] for b in doc["buckets"])
    assert {b["name"]: b["entries"] for b in doc["buckets"]}["index-v2"] == 2


def test_cache_info_text_ends_with_the_total_and_the_directory(
        filled: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The text has a line per bucket, the total and the directory, as the JSON does."""
    code, out, err = run(capsys, "info", "--cache-dir", str(filled))
    lines = out.splitlines()
    assert (code, err) == (0, "")
    assert [line.split()[0] for line in lines[:-2]] == [*BUCKETS, SYMBOLS_STORE]
    assert lines[-2].split()[:3] == ["total", "3", "entries"]
    assert lines[-1] == str(filled)


@pytest.mark.parametrize(("make", "problem"), [
    (lambda p: None, "no such directory"),
    (lambda p: p.write_text("x"), "not a directory"),
], ids=["missing", "file"])
@pytest.mark.parametrize("json_flag", [[], ["--json"]], ids=["text", "json"])
def test_bad_cache_dir_is_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    make: Callable[[Path], object], problem: str,
                                    json_flag: list[str]) -> None:
    """`cache info` on a missing or non-directory --cache-dir exits 0 with no entries, and says
    why on stderr in one `warning:` line that names the path."""
    root = tmp_path / "nowhere"
    make(root)
    code, out, err = run(capsys, "info", *json_flag, "--cache-dir", str(root))
    assert code == 0
    assert err == f"warning: {root}: {problem}; nothing is cached there\n"
    if json_flag:
        doc = json.loads(out)
        validate(doc, SCHEMA)
        assert (doc["entries"], doc["bytes"]) == (0, 0)
        assert doc["state"] == ("missing" if problem == "no such directory"
                                else "not-a-directory")
    else:
        assert "total            0 entries" in out


def test_clean_removes_every_bucket(filled: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`cache clean` reports the bytes freed; `info` then counts nothing."""
    size = Cache(filled).info().bytes
    code, out, _err = run(capsys, "clean", "--cache-dir", str(filled))
    assert code == 0 and out == f"removed {size:,} bytes from {filled}\n"
    assert Cache(filled).info().entries == 0


def test_dir_prints_the_directory_from_the_environment(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --cache-dir the directory is $ABIFIT_CACHE_DIR."""
    monkeypatch.setenv("ABIFIT_CACHE_DIR", str(tmp_path / "env-cache"))
    assert run(capsys, "dir") == (0, f"{tmp_path / 'env-cache'}\n", "")


def test_json_is_only_for_info(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--json` with `dir` or `clean` is a usage error, exit 2 (said on stderr, and as the
    error document on stdout)."""
    code, out, err = run(capsys, "clean", "--json", "--cache-dir", str(tmp_path))
    assert code == 2
    assert err.startswith("error: --json: only `abifit cache info` prints JSON")
    assert json.loads(out)["error"]["message"] == err.removeprefix("error: ").strip()


def test_help_describes_the_cache(capsys: pytest.CaptureFixture[str]) -> None:
    """`abifit cache --help` says what the cache holds and what each action does."""
    with pytest.raises(SystemExit) as exited:
        main(["cache", "--help"])
    out = " ".join(capsys.readouterr().out.split())  # as one line, whatever the wrapping
    assert exited.value.code == 0
    assert "versioned bucket" in out and "`clean` removes every bucket" in out
    assert "--json with `info`: print one JSON document" in out


def _protect(path: Path) -> Callable[[], None] | None:
    """Make `path` impossible to remove, even for root (the immutable attribute, else a
    read-only directory for another user); the undo, or None when neither can be done here."""
    import os
    import shutil
    import subprocess

    if shutil.which("chattr") and subprocess.run(["chattr", "+i", str(path)],
                                                 capture_output=True).returncode == 0:
        return lambda: subprocess.run(["chattr", "-i", str(path)], check=False) and None
    if os.geteuid() != 0:
        path.parent.chmod(0o555)
        return lambda: path.parent.chmod(0o755)
    return None


def test_clean_of_a_cache_it_cannot_write_is_an_error(
        filled: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`cache clean` that cannot remove an entry says so (exit 2), and never claims to have
    removed what is still there."""
    entry = next(p for p in sorted(filled.rglob("*")) if p.is_file())
    undo = _protect(entry)
    if undo is None:
        pytest.skip("no way to make a file undeletable here (root without chattr)")
    try:
        code = main(["cache", "clean", "--cache-dir", str(filled)])
    finally:
        undo()
    captured = capsys.readouterr()
    assert code == 2
    assert entry.exists()
    assert captured.err.startswith(f"error: {filled}: could not remove")
    assert "removed" not in captured.out


def test_the_symbol_store_is_counted_and_cleaned(filled: Path) -> None:
    """The symbol store's database at the root is counted with the buckets, and `clean`
    removes it with them."""
    from abifit.remote.store import SymbolStore

    store = SymbolStore.open(filled)
    assert store is not None
    store.close()
    cache = Cache(filled)
    counted = {b.name: b for b in cache.info().buckets}[SYMBOLS_STORE]
    assert counted.entries >= 1 and counted.bytes > 0
    cache.clean()
    assert not list(filled.glob(f"{SYMBOLS_STORE}.sqlite*"))
    assert cache.info().bytes == 0


def test_prune_removes_the_oldest_entries_past_a_size_or_an_age(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Ten entries of 1000 bytes written a day apart: `prune --max-size 5000` keeps the five
    newest, `--older-than 2` then keeps those written in the last two days; the symbol store
    is kept."""
    import os

    root = tmp_path / "cache"
    bucket = Cache(root).bucket(BUCKETS[0])
    bucket.mkdir(parents=True)
    day = 86400.0
    now = 1_800_000_000.0
    for n in range(10):
        path = bucket / f"entry{n}"
        path.write_bytes(b"x" * 1000)
        os.utime(path, (now - (10 - n) * day, now - (10 - n) * day))
    (root / f"{SYMBOLS_STORE}.sqlite").write_bytes(b"s" * 5000)
    code, out, _err = run(capsys, "prune", "--max-size", "5000", "--cache-dir", str(root))
    assert code == 0 and out.startswith("removed 5 entries (5,000 bytes)")
    assert sorted(p.name for p in bucket.iterdir()) == [f"entry{n}" for n in range(5, 10)]
    assert Cache(root).prune(older_than_s=2.5 * day, now=now) == (3, 3000)
    assert sorted(p.name for p in bucket.iterdir()) == ["entry8", "entry9"]
    assert (root / f"{SYMBOLS_STORE}.sqlite").exists()
    with pytest.raises(SystemExit) as exited:
        run(capsys, "prune", "--max-size", "lots", "--cache-dir", str(root))
    assert exited.value.code == 2 and "not a size" in capsys.readouterr().err
