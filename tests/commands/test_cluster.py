"""`index add --ray`, `matrix --ray` and `resolve --ray` on a real local Ray cluster: a head
node and a worker node on this machine (`ray start --block`, each in a session of its own so
that it can be stopped, or killed mid-run, alone), reading from a loopback index.

What is held: the store a run on the cluster fills exports byte for byte as the run without
it (`--jobs 1`, which records in the same order); a second run skips every wheel; a matrix,
a grid of two extensions on two Pythons, and a resolution that rejects four host releases
before one fits (each pair direction a task), give the same document; a worker node killed
while its tasks read loses and duplicates nothing (Ray runs its tasks again on the head node);
an address where no cluster answers is an error at once. The driver is `python -m abifit` in
a process of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import (
    MATRIX_GRID,
    MATRIX_PYTHONS_GRID,
    MATRIX_TARGET,
    RESOLVE_WIDE_HOSTS,
    TARGET,
    make_wheel,
    matrix_binaries,
    matrix_projects,
    resolve_binaries,
    resolve_projects,
)
from httpserver import LoopbackIndex, LoopbackServer, publish_index
from raycluster import RAY, LocalCluster, free_port, ray_env, start_cluster

if RAY is None and os.environ.get("CI"):
    pytest.fail("ray is a test dependency: CI must have it", pytrace=False)
pytestmark = pytest.mark.skipif(RAY is None, reason="needs Ray (abifit[ray])")

VERSIONS = tuple(f"1.{n}" for n in range(8))  # the releases of hostpkg served


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    started = start_cluster()
    yield started
    started.stop()


@pytest.fixture(scope="module")
def index(binaries: dict[str, bytes]) -> Iterator[LoopbackIndex]:
    """hostpkg in eight releases (libhost.so of 1.0 and 2.0 in turn), each request held a
    little, so that tasks overlap."""
    projects = {"hostpkg": [
        make_wheel("hostpkg", version, {"hostpkg/__init__.py": b"",
                                        "hostpkg/lib/libhost.so": binaries[("v1", "v2")[n % 2]],
                                        f"hostpkg/lib/libextra{n}.so": binaries["v2m"]})
        for n, version in enumerate(VERSIONS)]}
    with LoopbackServer(delay_s=0.02) as server:
        yield publish_index(server, projects)


def abifit(*args: str, cache: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = ray_env()
    return subprocess.run([sys.executable, "-m", "abifit", *args, "--cache-dir", str(cache)],
                          capture_output=True, text=True, env=env, timeout=timeout, check=False)


def index_add(index: LoopbackIndex, cache: Path, *extra: str) -> dict[str, object]:
    done = abifit("index", "add", "hostpkg", "--versions", ">=1", *TARGET, "--index-url",
                  index.url, "--json", *extra, cache=cache)
    assert done.returncode == 0, done.stderr
    document: dict[str, object] = json.loads(done.stdout)
    return document


def export(cache: Path, tmp_path: Path) -> bytes:
    path = tmp_path / f"{cache.name}.export"
    done = abifit("index", "export", str(path), cache=cache)
    assert done.returncode == 0, done.stderr
    return path.read_bytes()


def statuses(document: dict[str, object]) -> list[tuple[str, str]]:
    result = document["result"]
    assert isinstance(result, dict)
    wheels = result["wheels"]
    assert isinstance(wheels, list)
    return [(w["version"], w["status"]) for w in wheels]


def test_index_add_on_the_cluster_records_what_a_local_run_does(
        cluster: LocalCluster, index: LoopbackIndex, tmp_path: Path) -> None:
    on_cluster = index_add(index, tmp_path / "cluster", "--ray", cluster.address)
    local = index_add(index, tmp_path / "local", "--jobs", "1")
    assert statuses(on_cluster) == [(v, "recorded") for v in VERSIONS]
    assert statuses(on_cluster) == statuses(local)
    assert export(tmp_path / "cluster", tmp_path) == export(tmp_path / "local", tmp_path)
    again = index_add(index, tmp_path / "cluster", "--ray", cluster.address)
    assert statuses(again) == [(v, "present") for v in VERSIONS]  # a run started again skips


def test_ray_address_from_the_environment(cluster: LocalCluster, index: LoopbackIndex,
                                          tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    """`RAY_ADDRESS` asks for the cluster as `--ray` does (`_ray_env` drops it otherwise)."""
    env = {**ray_env(), "RAY_ADDRESS": cluster.address}
    done = subprocess.run([sys.executable, "-m", "abifit", "index", "add", "hostpkg==1.3",
                           *TARGET, "--index-url", index.url, "--cache-dir",
                           str(tmp_path / "c"), "--json"], capture_output=True, text=True,
                          env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert statuses(json.loads(done.stdout)) == [("1.3", "recorded")]


@pytest.fixture(scope="module")
def matrix_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackIndex]:
    projects = matrix_projects(matrix_binaries(tmp_path_factory.mktemp("matrix")))
    with LoopbackServer() as server:
        yield publish_index(server, projects)


def test_matrix_on_the_cluster_gives_the_local_document(
        cluster: LocalCluster, matrix_index: LoopbackIndex, tmp_path: Path) -> None:
    documents, codes = [], []
    for name, extra in (("cluster", ("--ray", cluster.address)), ("local", ())):
        done = abifit(*MATRIX_GRID, *MATRIX_TARGET, "--index-url", matrix_index.url, "--json",
                      *extra, cache=tmp_path / name)
        codes.append(done.returncode)
        document = json.loads(done.stdout)
        for key in ("transfer", "checked_at"):
            document.pop(key, None)
        documents.append(document)
    assert codes == [0, 0]  # some cells fit
    assert documents[0] == documents[1]
    cells = documents[0]["rows"]
    assert len(cells) == 8 and documents[0]["fitting_pairs"] and len(
        documents[0]["fitting_pairs"]) < len(cells)


def test_a_grid_on_the_cluster_gives_the_local_document(
        cluster: LocalCluster, matrix_index: LoopbackIndex, tmp_path: Path) -> None:
    """extpkg and otherpkg on CPython 3.11 and 3.12: every cell of the four matrices is a task
    on the cluster, each for its own Python, and the `matrix.grid` document is the local
    run's, with otherpkg's verdicts told apart by Python."""
    documents, codes = [], []
    for name, extra in (("cluster", ("--ray", cluster.address)), ("local", ())):
        done = abifit(*MATRIX_PYTHONS_GRID, "--index-url", matrix_index.url, "--json", *extra,
                      cache=tmp_path / name)
        codes.append(done.returncode)
        document = json.loads(done.stdout)
        for key in ("transfer", "checked_at"):
            document.pop(key, None)
        documents.append(document)
    assert codes == [0, 0]  # each matrix has a fit
    assert documents[0] == documents[1]
    cells = documents[0]["cells"]
    assert documents[0]["document"] == "matrix.grid" and len(cells) == 18
    other = {(c["host_release"], c["variant"], c["python"]): c["verdict"] for c in cells
             if c["package"] == "otherpkg"}
    assert other[("1.0", "", "3.11")] == "fits" and other[("1.0", "", "3.12")] == "fails"
    assert other[("2.0", "cu130", "3.12")] == "fits" and other[("2.0", "cu130", "3.11")] == "fails"


@pytest.fixture(scope="module")
def resolve_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackIndex]:
    """The resolve world with hostpkg 1.0 to 1.5, which nopin loads with, and 2.0 to 2.3,
    which it does not (`helpers.RESOLVE_WIDE_HOSTS`)."""
    built = resolve_binaries(tmp_path_factory.mktemp("resolve"))
    with LoopbackServer() as server:
        yield publish_index(server, resolve_projects(built, RESOLVE_WIDE_HOSTS))


def tasks_started(cluster: LocalCluster, task: str) -> int:
    """How many tasks of the function `task` the cluster's workers have started: a worker
    writes `:task_name:NAME` in its log (the session's logs/worker-*.out) as each begins."""
    logs = Path(cluster.temp) / "session_latest" / "logs"
    return sum(p.read_text("utf-8", "replace").count(f":task_name:{task}\n")
               for p in logs.glob("worker-*.out"))


def test_resolve_on_the_cluster_gives_the_local_document(
        cluster: LocalCluster, resolve_index: LoopbackIndex, tmp_path: Path) -> None:
    """`nopin==0.1 hostpkg`: hostpkg 2.3 to 2.0 are rejected before 1.5 fits, each pair
    direction of two native wheels a task of the cluster (counted in its workers' logs), and
    the document is the local run's: the set, the rejections and their reasons, the numbers
    of pairs checked (`--jobs 2`: a read-ahead of 2 on both, the cluster having 2 CPUs)."""
    before = tasks_started(cluster, "judge_direction_task")
    documents, codes = [], []
    for name, extra in (("cluster", ("--ray", cluster.address)), ("local", ())):
        done = abifit("resolve", "nopin==0.1", "hostpkg", *MATRIX_TARGET, "--index-url",
                      resolve_index.url, "--jobs", "2", "--json", *extra,
                      cache=tmp_path / name)
        codes.append(done.returncode)
        document = json.loads(done.stdout)
        document.pop("transfer", None)
        documents.append(document)
        if name == "cluster":
            time.sleep(1.0)  # the workers' logs written
            ran = tasks_started(cluster, "judge_direction_task") - before
    assert codes == [0, 0]
    assert documents[0] == documents[1]
    document = documents[0]
    assert {p["name"]: p["version"] for p in document["pins"]} == {"nopin": "0.1",
                                                                   "hostpkg": "1.5"}
    (hostpkg,) = (p for p in document["pins"] if p["name"] == "hostpkg")
    assert [(r["version"], r["why"]) for r in hostpkg["newer"]] == [
        ("2.3", "binary"), ("2.2", "binary"), ("2.1", "binary"), ("2.0", "binary")]
    assert "parameter 4: `int` → `unsigned int`" in hostpkg["newer"][0]["reason"]
    stats = document["stats"]
    assert stats["pairs_checked"] == 6 and stats["pairs_cached"] == 0
    assert ran == stats["pairs_checked"] + stats["pairs_unchecked"]  # each direction a task


@pytest.mark.parametrize("command", [
    ("index", "add", "hostpkg==1.0", *TARGET),
    ("resolve", "nopin", *TARGET),
], ids=["index add", "resolve"])
def test_an_address_where_no_cluster_answers(command: tuple[str, ...], tmp_path: Path) -> None:
    port = free_port()
    started = time.monotonic()
    done = abifit(*command, "--ray", f"127.0.0.1:{port}", cache=tmp_path / "c", timeout=60)
    assert done.returncode == 2
    assert f"--ray 127.0.0.1:{port}: no Ray cluster answers there" in done.stderr
    assert time.monotonic() - started < 30


def _wait_for_wheels_read(server: LoopbackServer, wheels: int) -> None:
    """Until requests for `wheels` different wheel files have come (each node runs one task at
    a time, so the third means that both nodes are reading one)."""
    deadline = time.monotonic() + 120
    while len({s.path for s in list(server.log) if s.path.endswith(".whl")}) < wheels:
        if time.monotonic() > deadline:
            pytest.fail(f"the tasks did not read {wheels} wheels in 120 s")
        time.sleep(0.05)


def test_a_worker_node_killed_mid_run_loses_and_duplicates_nothing(
        binaries: dict[str, bytes], tmp_path: Path) -> None:
    """Sixteen slow wheels (every request held 0.3 s); the worker node is killed while tasks
    run on both nodes: the run ends with every wheel recorded once, the store as a local
    run's."""
    versions = [f"2.{n}" for n in range(16)]
    projects = {"hostpkg": [
        make_wheel("hostpkg", version, {"hostpkg/__init__.py": b"",
                                        "hostpkg/lib/libhost.so": binaries[("v1", "v2")[n % 2]]})
        for n, version in enumerate(versions)]}
    own = start_cluster()
    try:
        with LoopbackServer(delay_s=0.3) as server:
            slow = publish_index(server, projects)
            args = ["index", "add", "hostpkg", "--versions", ">=2", *TARGET, "--index-url",
                    slow.url, "--json"]
            driver = subprocess.Popen(
                [sys.executable, "-m", "abifit", *args, "--ray", own.address, "--cache-dir",
                 str(tmp_path / "cluster")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True, env=ray_env())
            _wait_for_wheels_read(server, 3)  # two tasks running: one on each node's CPU
            own.kill_worker()
            out, err = driver.communicate(timeout=300)
            assert driver.returncode == 0 and out, err
            # the kill came while tasks ran on that node: Ray says it runs them again (on
            # stderr: Ray prints it on stdout, where the JSON goes, unless abifit moves it)
            assert "retries remaining" in err, err[-2000:]
            local = abifit(*args, "--jobs", "1", cache=tmp_path / "local")
            assert local.returncode == 0, local.stderr
    finally:
        own.stop()
    assert statuses(json.loads(out)) == [(v, "recorded") for v in versions]
    assert export(tmp_path / "cluster", tmp_path) == export(tmp_path / "local", tmp_path)
    info = abifit("index", "info", "--json", cache=tmp_path / "cluster")
    (package,) = json.loads(info.stdout)["result"]["packages"]
    assert (package["package"], package["wheels"]) == ("hostpkg", len(versions))
