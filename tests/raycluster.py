"""A Ray cluster on this machine, for the tests of `--ray` (tests/commands/test_cluster.py) and
its benchmark (bench/bench_ray.py): a `ray start --block` process per node, each in a session of
its own, so that a node can be stopped, or killed mid-run, alone."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

RAY = shutil.which("ray", path=str(Path(sys.executable).parent))
SRC = Path(__file__).resolve().parents[1] / "src"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ray_env() -> dict[str, str]:
    """What the nodes (and abifit's driver) run with: this checkout's abifit for the tasks, no
    usage reports, no pip configuration of this machine, and a node's death noticed within
    about two seconds."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "RAY_"))}
    env.update(PYTHONPATH=str(SRC), RAY_USAGE_STATS_ENABLED="0",
               RAY_health_check_period_ms="500", RAY_health_check_failure_threshold="3",
               RAY_health_check_initial_delay_ms="0", PIP_CONFIG_FILE="/dev/null")
    return env


@dataclass
class LocalCluster:
    """A head node and its worker nodes."""

    address: str
    nodes: list[subprocess.Popen[bytes]]  # the head first
    temp: str

    def kill_worker(self) -> None:
        """Kill the first worker node and everything it started."""
        os.killpg(self.nodes[1].pid, signal.SIGKILL)

    def stop(self) -> None:
        for node in reversed(self.nodes):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(node.pid, signal.SIGKILL)
            node.wait(timeout=30)
        shutil.rmtree(self.temp, ignore_errors=True)


def _node(cpus: int, *args: str) -> subprocess.Popen[bytes]:
    assert RAY is not None
    return subprocess.Popen([RAY, "start", "--block", "--num-cpus", str(cpus),
                             "--disable-usage-stats", "--object-store-memory",
                             str(80 * 1024 * 1024), "--node-ip-address", "127.0.0.1", *args],
                            env=ray_env(), start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _cpus(address: str) -> float:
    assert RAY is not None
    done = subprocess.run([RAY, "status", "--address", address], capture_output=True,
                          text=True, env=ray_env(), timeout=60, check=False)
    found = re.search(r"/(\d+(?:\.\d+)?) CPU", done.stdout)
    return float(found.group(1)) if found else 0.0


def start_cluster(cpus: tuple[int, ...] = (1, 1)) -> LocalCluster:
    """A cluster of a node per entry of `cpus` (the head first), with that many CPUs each,
    once all of them have joined; RuntimeError when they have not within 90 s."""
    port = free_port()
    address = f"127.0.0.1:{port}"
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's socket paths live in it
    nodes = [_node(cpus[0], "--head", "--port", str(port), "--include-dashboard=false",
                   "--temp-dir", temp)]
    cluster = LocalCluster(address, nodes, temp)
    if len(cpus) > 1:
        time.sleep(1.0)
        nodes += [_node(n, "--address", address) for n in cpus[1:]]
    deadline = time.monotonic() + 90
    while _cpus(address) < sum(cpus):
        if time.monotonic() > deadline:
            cluster.stop()
            raise RuntimeError(f"the local Ray cluster did not come up with {len(cpus)} "
                               "node(s) in 90 s")
        time.sleep(1.0)
    return cluster
