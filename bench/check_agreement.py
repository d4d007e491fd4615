"""Do `abifit check` predictions agree with a real import? (live: PyPI, scratch venvs)

For each pair (an extension wheel, a host to check it with), in a scratch virtual environment
that already holds the host (torch and its dependencies, installed by pip):

1. `abifit check EXT --with HOST --json` predicts, from the index alone, whether each extension
   module of EXT loads (and the loader's first error when not);
2. pip installs EXT (`--no-deps`) into the venv, replacing any other version;
3. each module is loaded for real in a fresh process of the venv's interpreter, after `import
   torch`, with `ctypes.CDLL(path, RTLD_NOW | RTLD_LOCAL)` (abifit.host.realload.real_load);
4. prediction and reality agree when both load, or both fail with the same loader message (the
   path of the virtual site-packages replaced by the venv's).

The NVIDIA driver is assumed present (`--assume-driver`) only where the venv's machine has it;
this machine has none, and none of these modules links it directly.

Each venv is put back as it was afterwards (the test suite uses them). Default pairs:
torchvision 0.29.1, 0.29.0, 0.27.0, 0.26.0, 0.28.0 with torch 2.14.1 (the PyPI
CUDA build in the venv `~/.cache/abifit-tests/torch-2.14.1-cu`), and torchvision 0.28.0 with
the local CPU wheel torch 2.13.0+cpu (from /opt/wheels, in the test venv
`~/.cache/abifit-tests/torch-2.13.0`; checked with `--with PATH.whl`). A venv that is missing is
skipped with a message. Output: one JSON document on stdout, a one-line summary on stderr.

    .venv/bin/python bench/check_agreement.py
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from pathlib import Path

from abifit.engines.check import SITE
from abifit.host.realload import real_load

HOME = Path.home() / ".cache" / "abifit-tests"
PYPI = "https://pypi.org/simple"
TARGET = ["--python-version", "3.11", "--platform", "manylinux_2_28_x86_64"]
CU = HOME / "torch-2.14.1-cu"
CPU = HOME / "torch-2.13.0"
CPU_WHEEL = next(iter(sorted(glob.glob("/opt/wheels/torch-2.13.0+cpu-cp311-*.whl"))), None)

PAIRS: list[tuple[Path, str, str]] = [
    (CU, "torchvision==0.29.1", "torch==2.14.1"),
    (CU, "torchvision==0.29.0", "torch==2.14.1"),
    (CU, "torchvision==0.27.0", "torch==2.14.1"),
    (CU, "torchvision==0.26.0", "torch==2.14.1"),
    (CU, "torchvision==0.28.0", "torch==2.14.1"),
]
if CPU_WHEEL:
    PAIRS.append((CPU, "torchvision==0.28.0", CPU_WHEEL))

ENV = {**os.environ, "PIP_CONFIG_FILE": "/dev/null"}
for _var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_CONSTRAINT"):
    ENV.pop(_var, None)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def predict(ext: str, host: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-m", "abifit", "check", ext, "--with", host, *TARGET,
                           "--index-url", PYPI, "--json"], capture_output=True, text=True,
                          env=ENV, timeout=1800)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"abifit check failed: {done.stderr.strip()}")
    doc: dict[str, object] = json.loads(done.stdout)
    return doc


def site_packages(venv: Path) -> str:
    return next(iter(glob.glob(str(venv / "lib" / "python3*" / "site-packages"))))


def pip(venv: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(venv / "bin" / "python"), "-m", "pip", *args], env=ENV,
                          capture_output=True, text=True, timeout=1800)


def installed(venv: Path, name: str) -> str | None:
    """The version of `name` installed in the venv, if any."""
    shown = pip(venv, "show", name)
    return next((line.split(":", 1)[1].strip() for line in shown.stdout.splitlines()
                 if line.startswith("Version:")), None)


def install(venv: Path, ext: str) -> None:
    done = pip(venv, "install", "-q", "--no-deps", "--force-reinstall", "--index-url", PYPI, ext)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip())


def restore(venv: Path, name: str, version: str | None) -> None:
    """Put the venv back as it was: the test suite uses these venvs too."""
    if version is None:
        pip(venv, "uninstall", "-y", "-q", name)
    elif installed(venv, name) != version:
        install(venv, f"{name}=={version}")


def compare(venv: Path, ext: str, host: str) -> dict[str, object]:
    log(f"{ext} with {Path(host).name}: predicting")
    doc = predict(ext, host)
    log(f"{ext}: installing into {venv.name}")
    name = ext.split("==")[0]
    before = installed(venv, name)
    install(venv, ext)
    try:
        return _compare_installed(venv, ext, host, doc)
    finally:
        restore(venv, name, before)


def _compare_installed(venv: Path, ext: str, host: str, doc: dict[str, object]
                       ) -> dict[str, object]:
    site = site_packages(venv)
    rows = []
    modules = doc["modules"]
    assert isinstance(modules, list)
    for module in modules:
        path = module["path"].replace(SITE, site)
        real = real_load(str(venv / "bin" / "python"), module["module"], path, ["torch"])
        predicted = (module["error"] or "").replace(SITE, site) or None
        agrees = real.loads == module["loads"] and (real.loads or real.load_error == predicted)
        rows.append({"module": module["module"], "predicted_loads": module["loads"],
                     "predicted_error": predicted, "real_loads": real.loads,
                     "real_error": real.load_error, "note": real.note, "agrees": agrees})
        log(f"  {module['module']}: predicted {'loads' if module['loads'] else predicted}; "
            f"real {'loads' if real.loads else real.load_error or real.note} -> "
            f"{'agree' if agrees else 'DISAGREE'}")
    return {"extension": ext, "host": host, "venv": str(venv), "verdict": doc["verdict"],
            "modules": rows, "agrees": all(r["agrees"] for r in rows) and bool(rows)}


def main() -> int:
    results = []
    for venv, ext, host in PAIRS:
        if not (venv / "bin" / "python").exists():
            log(f"skipped {ext} with {host}: no venv at {venv}")
            continue
        results.append(compare(venv, ext, host))
    agree = sum(1 for r in results if r["agrees"])
    modules = sum(len(rows) for r in results if isinstance(rows := r["modules"], list))
    print(json.dumps({"results": results, "pairs_agreeing": agree,
                      "pairs_checked": len(results), "modules": modules}, indent=1))
    fails = sum(1 for r in results if r["verdict"] == "fails")
    log(f"summary: {agree}/{len(results)} pairs agree ({modules} modules; {fails} pairs "
        "predicted to fail)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
