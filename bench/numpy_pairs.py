"""Do abifit's verdicts on NumPy's import contract agree with real imports? (live: PyPI, venvs)

Seven stacks of real packages, each a venv of CPython 3.11 made once by pip (under
~/.cache/abifit-bench/numpy-pairs, or `--venvs DIR`; about 4.7 GB in all): packages built with
NumPy 1.x headers beside NumPy 2.0 and 2.1 (A, B), the same beside NumPy 1.26 (C), releases
built with NumPy 2.x headers beside NumPy 2.2, 1.23, 2.0 (D, E, F), and some of those beside
NumPy 1.23.2, which their metadata forbids for scipy (G, installed with --no-deps). A pair is
one package of a stack beside the stack's NumPy: 40 pairs.

For each pair:

1. the real `import NAME` in a fresh process of the venv, twice (the two runs must agree): it
   works, or the exception's last line;
2. `abifit doctor --json --no-index --no-cache` on the venv (once per stack): the verdict of
   `import NAME` (a top-level import not listed works);
3. `abifit check PKG==V --with numpy==X --with OTHER==W... --python-version 3.11 --json`
   (every other package of the stack pinned as in its venv): the verdict of `import NAME`
   from the wheels on the index.

A pair agrees when both verdicts say what the real import does: works, or fails with the same
exception type and message. Output: one JSON document on stdout (every pair, with the reasons
of any disagreement), a one-line summary on stderr. Exit status 0 whatever the agreement: this
is a measurement, not a test.

    .venv/bin/python bench/numpy_pairs.py [--venvs DIR] [--stacks A,B,...] [--no-check]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

OLD = ("pandas==2.0.3", "scikit-learn==1.3.2", "matplotlib==3.7.2",
       "opencv-python-headless==4.8.1.78", "shapely==2.0.2", "pyarrow==14.0.2", "scipy==1.11.4")
NEW = ("pandas==2.2.3", "scipy==1.14.1", "opencv-python-headless==4.10.0.84", "pyarrow==17.0.0",
       "h5py==3.12.1", "shapely==2.0.6", "scikit-learn==1.5.2", "matplotlib==3.9.2")
STACKS: dict[str, tuple[str, tuple[str, ...]]] = {  # name: (numpy, packages)
    "A": ("2.0.2", OLD),
    "B": ("2.1.3", ("h5py==3.10.0", "pandas==2.0.3", "scipy==1.11.4")),
    "C": ("1.26.4", (*OLD, "h5py==3.10.0")),
    "D": ("2.2.6", NEW),
    "E": ("1.23.5", NEW),
    "F": ("2.0.2", ("pandas==2.2.3", "scipy==1.14.1", "pyarrow==17.0.0")),
    "G": ("1.23.2", ("pandas==2.2.3", "scipy==1.14.1", "pyarrow==17.0.0")),
}
IMPORT_NAMES = {"scikit-learn": "sklearn", "opencv-python-headless": "cv2"}
DEFAULT_VENVS = Path.home() / ".cache" / "abifit-bench" / "numpy-pairs"
LOADER_ENV = ("LD_LIBRARY_PATH", "LD_PRELOAD", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV",
              "CONDA_PREFIX")


@dataclass(frozen=True)
class Pair:
    stack: str
    numpy: str
    package: str
    version: str
    name: str  # the import
    real: str | None  # None: works
    real_agrees: bool  # the two real runs agree
    doctor: str | None
    check: str | None
    doctor_agrees: bool
    check_agrees: bool | None  # None: not checked


def environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in LOADER_ENV}


def ensure_venv(root: Path, name: str, numpy: str, packages: tuple[str, ...]) -> str:
    """The stack's venv, made once: its packages and numpy==X by pip; one that pip refuses
    for its metadata is installed with --no-deps after the others."""
    venv = root / name
    python = venv / "bin" / "python"
    if (venv / ".ready").exists():
        return str(python)
    base = shutil.which("python3.11")
    if base is None:
        sys.exit("python3.11 is needed")
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([base, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q", "--only-binary", ":all:",
           "--disable-pip-version-check"]
    print(f"creating {venv}: numpy=={numpy} {' '.join(packages)}", file=sys.stderr)
    if subprocess.run([*pip, f"numpy=={numpy}", *packages]).returncode != 0:
        subprocess.run([*pip, f"numpy=={numpy}"], check=True)
        for package in packages:
            if subprocess.run([*pip, package, f"numpy=={numpy}"]).returncode != 0:
                subprocess.run([*pip, "--no-deps", package], check=True)
                deps = subprocess.run([str(python), "-m", "pip", "check"], capture_output=True,
                                      text=True).stdout
                missing = [line.split()[3].rstrip(",") for line in deps.splitlines()
                           if " requires " in line and "which is not installed" in line]
                if missing:
                    subprocess.run([*pip, *missing], check=True)
    (venv / ".ready").touch()
    return str(python)


def real_import(python: str, name: str) -> str | None:
    done = subprocess.run([python, "-c", f"import {name}"], capture_output=True, text=True,
                          env={**environ(), "MPLBACKEND": "Agg"}, cwd="/", timeout=300)
    if done.returncode == 0:
        return None
    return (done.stderr.strip().splitlines() or ["(no output)"])[-1]


def abifit(*args: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-m", "abifit", *args, "--json"], capture_output=True,
                          text=True, env=environ(), timeout=1800)
    if done.returncode not in (0, 1):
        return {"error": done.stderr.strip().splitlines()[-1:]}
    doc: dict[str, object] = json.loads(done.stdout)
    return doc


def predicted(doc: dict[str, object], name: str) -> str | None:
    """The error a report predicts for `import name` (None: it works)."""
    imports = doc.get("imports") or []
    assert isinstance(imports, list)
    for verdict in imports:
        if verdict["name"] == name:
            return None if verdict["loads"] else str(verdict["error"])
    return None


def agrees(prediction: str | None, real: str | None) -> bool:
    if prediction is None or real is None:
        return prediction == real
    kind, _, text = prediction.partition(": ")
    real_kind, _, real_text = real.partition(": ")
    return kind == real_kind and text.strip() in real_text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venvs", type=Path, default=DEFAULT_VENVS)
    parser.add_argument("--stacks", default=",".join(STACKS))
    parser.add_argument("--no-check", action="store_true", help="doctor only")
    args = parser.parse_args()
    pairs: list[Pair] = []
    for stack in args.stacks.split(","):
        numpy, packages = STACKS[stack]
        python = ensure_venv(args.venvs, stack, numpy, packages)
        print(f"stack {stack} (numpy {numpy}): doctor", file=sys.stderr)
        doctor = abifit("doctor", "--python", python, "--no-index", "--no-cache")
        for requirement in packages:
            package, version = requirement.split("==")
            name = IMPORT_NAMES.get(package, package)
            with ThreadPoolExecutor(2) as pool:
                first, second = pool.map(real_import, (python, python), (name, name))
            check = None
            if not args.no_check:
                # the stack's other packages as in its venv (scikit-learn 1.3.2's import meets
                # the stack's scipy 1.11.4 first, not the newest scipy a plain check would add)
                others = [w for p in packages if p != requirement for w in ("--with", p)]
                print(f"stack {stack}: check {requirement} --with numpy=={numpy} "
                      f"({len(others) // 2} more --with)", file=sys.stderr)
                check = predicted(abifit("check", requirement, "--with", f"numpy=={numpy}",
                                         *others, "--python-version", "3.11"), name)
            said = predicted(doctor, name)
            pairs.append(Pair(stack, numpy, package, version, name, first, first == second,
                              said, check, agrees(said, first),
                              None if args.no_check else agrees(check, first)))
    doctor_ok = sum(p.doctor_agrees for p in pairs)
    check_ok = sum(bool(p.check_agrees) for p in pairs)
    failing = sum(p.real is not None for p in pairs)
    print(json.dumps({"pairs": [asdict(p) for p in pairs], "summary": {
        "pairs": len(pairs), "real_failing": failing,
        "real_runs_agree": sum(p.real_agrees for p in pairs),
        "doctor_agrees": doctor_ok, "check_agrees": None if args.no_check else check_ok}},
        indent=1))
    print(f"{len(pairs)} pairs ({failing} fail for real; the two real runs agree on "
          f"{sum(p.real_agrees for p in pairs)}): doctor agrees on {doctor_ok}"
          + ("" if args.no_check else f", check on {check_ok}"), file=sys.stderr)


if __name__ == "__main__":
    main()
