"""`doctor --verify`'s real loads through fork servers: the same answers as a fresh process per
module (`real_load`), the prerequisites imported once per server, a crash or a hang one module's
result, never the run's."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from abifit.host.realload import CRASHED, LoadJob, real_load, real_loads
from fixtures.build import compile_c
from helpers import FIXTURES

SOURCES = FIXTURES / "trust"


@pytest.fixture(scope="module")
def objects(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("realload")
    good = compile_c(SOURCES / "good.c", root / "good.so")
    forged = compile_c(SOURCES / "forged.c", root / "forged.so")
    truncated = root / "truncated.so"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 3])
    counter = root / "site" / "countme.py"
    counter.parent.mkdir()
    counter.write_text("import os\nwith open(os.environ['ABIFIT_TEST_COUNT'], 'a') as f:\n"
                       "    f.write('imported\\n')\n")
    hang = root / "site" / "hangs.py"
    hang.write_text("import time\ntime.sleep(60)\n")
    return {"good": str(good), "forged": str(forged), "truncated": str(truncated),
            "site": str(counter.parent), "count": str(root / "count.txt")}


def _plain(result: object) -> tuple[object, ...]:
    return (result.loads, result.load_error, result.import_error,  # type: ignore[attr-defined]
            result.note.split(":")[0])  # type: ignore[attr-defined]


def test_fork_servers_answer_as_fresh_processes_do(objects: dict[str, str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Loads that work, fail and crash, with and without prerequisites and a preload: each job's
    answer equals a fresh process's; a crash (a truncated file: SIGBUS or SIGSEGV) is asked
    again of a fresh process and reported as that crash."""
    monkeypatch.setenv("PYTHONPATH", objects["site"])
    monkeypatch.setenv("ABIFIT_TEST_COUNT", objects["count"])
    jobs = [LoadJob("", objects["good"], ()), LoadJob("", objects["forged"], ("json",)),
            LoadJob("", objects["truncated"], ("json",)),
            LoadJob("good", objects["good"], ("countme",), ((objects["good"], True),)),
            LoadJob("", objects["forged"], ("countme",))]
    served = real_loads(sys.executable, jobs, workers=2)
    fresh = [real_load(sys.executable, j.module, j.path, list(j.imports), 60.0, list(j.preload))
             for j in jobs]
    assert [_plain(r) for r in served] == [_plain(r) for r in fresh]
    assert served[0].loads is True and served[1].loads is False
    assert "undefined symbol: abifit_defined_nowhere" in str(served[1].load_error)
    assert served[2].loads is not True
    if served[2].loads is None:
        assert served[2].note.startswith(CRASHED)
    assert served[3].import_error is not None  # no module "good" on the path: the load counts


def test_prerequisites_are_imported_once_per_server(objects: dict[str, str], tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Twelve modules that need the same package, two workers: the package is imported by two
    servers, not by twelve processes; a module whose import hangs is given up at its own time
    limit, and the modules after it on that server are still answered."""
    count = tmp_path / "count.txt"
    monkeypatch.setenv("PYTHONPATH", objects["site"])
    monkeypatch.setenv("ABIFIT_TEST_COUNT", str(count))
    jobs = [LoadJob("", objects["good" if i % 2 else "forged"], ("countme",)) for i in range(12)]
    jobs[1] = LoadJob("hangs", objects["good"], ("countme",))
    done: list[int] = []
    served = real_loads(sys.executable, jobs, workers=2, timeout=2.0, progress=done.append)
    assert [r.loads for r in served] == [False, None] + [i % 2 == 1 for i in range(2, 12)]
    assert "timed out" in served[1].note
    # two servers for the loads; for the import of the module that hangs, a server of the
    # second pass and the fresh process asked again when its child ran out of time
    assert count.read_text().count("imported") == 4
    assert sorted(done) == list(range(1, 13))
