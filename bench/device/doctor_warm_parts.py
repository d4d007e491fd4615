"""Where a warm `abifit doctor` spends its time on this machine: the parts of what it asks live
(the interpreter's facts, the host's loader, the GPU probe) and the check of the kept run, each
timed alone (medians of 5), beside whole warm runs. Needs a warm cache (run doctor once first).

    python3 bench/device/doctor_warm_parts.py PYTHON CACHE_DIR
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def median_time(function, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    python, cache = sys.argv[1], sys.argv[2]
    from abifit.engines.gpus import detect_targets
    from abifit.engines.kept import ask, kept_printed
    from abifit.host.environment import InterpreterQuery
    from abifit.host.ldconfig import probe_host

    env = dict(os.environ)
    parts = {
        "interpreter start (python -c pass)": lambda: subprocess.run([python, "-c", "pass"]),
        "interpreter start -S": lambda: subprocess.run([python, "-S", "-c", "pass"]),
        "interpreter facts": lambda: InterpreterQuery(python).facts(),
        "host probe": lambda: probe_host(env),
        "gpu probe": lambda: detect_targets(env),
    }
    for name, function in parts.items():
        print(f"{name}: {median_time(function):.4f} s", flush=True)
    asked = ask(python, env)

    def kept() -> object:
        return kept_printed(Path(cache), asked, (), offline=False, assume_driver=False,
                            environ=env)

    command = [sys.executable, "-m", "abifit", "doctor", "--python", python, "--cache-dir", cache]

    def whole() -> object:
        return subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    print(f"kept run check: {median_time(kept):.4f} s")
    print(f"whole warm run: {median_time(whole):.4f} s")


if __name__ == "__main__":
    main()
