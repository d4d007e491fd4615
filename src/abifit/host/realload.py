"""`doctor --verify`: ask the real loader, in a fresh process of the target interpreter.

For each module, a subprocess imports the prerequisite packages (as the prediction assumed), then
loads the module's file with `ctypes.CDLL(path, RTLD_NOW | RTLD_LOCAL)` — what CPython's import
does before calling `PyInit_*` — and then imports the module by name. The loader's verdict is the
one compared with the prediction: some packages hide the loader's error behind their own message.
"""

from __future__ import annotations

import json
import signal
import subprocess
from dataclasses import dataclass

_SCRIPT = r"""
import ctypes, importlib, json, os, sys
module, path, prerequisites = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
preload = json.loads(sys.argv[4])
out = {"prerequisites": {}}
for name in prerequisites:
    try:
        importlib.import_module(name)
        out["prerequisites"][name] = None
    except BaseException as e:
        out["prerequisites"][name] = "%s: %s" % (type(e).__name__, e)
for lib, is_global in preload:
    try:
        ctypes.CDLL(lib, mode=os.RTLD_NOW | (os.RTLD_GLOBAL if is_global else os.RTLD_LOCAL))
    except OSError:
        pass
try:
    ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
    out["load"] = None
except OSError as e:
    out["load"] = str(e)
out["import"] = None
if module:
    try:
        importlib.import_module(module)
    except BaseException as e:
        out["import"] = "%s: %s" % (type(e).__name__, e)
sys.stdout.flush()
print("\n" + json.dumps(out))
sys.stdout.flush()
os._exit(0)
"""


@dataclass(frozen=True, slots=True)
class RealLoad:
    """What happened in the real process."""

    loads: bool | None
    load_error: str | None
    import_error: str | None
    note: str


CRASHED = "the process was killed by"  # how a note about a crashed real load begins


def _signal_name(number: int) -> str:
    try:
        return f"{signal.Signals(number).name} ({number})"
    except ValueError:
        return f"signal {number}"


def _run(python: str, script: str, args: list[str], timeout: float) -> dict[str, object] | str:
    """The JSON object a script prints last, run in a fresh `python`; else why there is none."""
    try:
        done = subprocess.run([python, "-c", script, *args], capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"timed out after {timeout:.0f} s"
    except OSError as e:
        return f"could not run {python}: {e}"
    last = done.stdout.strip().splitlines()[-1:] or [""]
    try:
        out: dict[str, object] = json.loads(last[0])
    except ValueError:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        if done.returncode < 0:
            return f"{CRASHED} {_signal_name(-done.returncode)}: {tail}"
        return f"the process exited with {done.returncode}: {tail}"
    return out


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def real_load(python: str, module: str, path: str, imports: list[str],
              timeout: float = 120.0, preload: list[tuple[str, bool]] | None = None) -> RealLoad:
    """Load `path` after importing `imports` and loading the libraries in `preload` (path,
    RTLD_GLOBAL) as package code would, in a fresh `python`; never raises for its outcome."""
    out = _run(python, _SCRIPT, [module, path, json.dumps(imports), json.dumps(preload or [])],
               timeout)
    if isinstance(out, str):
        return RealLoad(None, None, None, out)
    return RealLoad(out["load"] is None, _text(out["load"]), _text(out["import"]), "")


_IMPORT = r"""
import importlib, json, os, sys
try:
    importlib.import_module(sys.argv[1])
    error = None
except BaseException as e:
    error = "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0] if str(e).strip() else "")
sys.stdout.flush()
print("\n" + json.dumps({"error": error}))
sys.stdout.flush()
os._exit(0)
"""


@dataclass(frozen=True, slots=True)
class RealImport:
    """What `import name` did in a fresh process: None when it could not be run."""

    works: bool | None
    error: str | None  # "RuntimeError: operator torchvision::nms does not exist"
    note: str


def real_import(python: str, name: str, timeout: float = 300.0) -> RealImport:
    """Run `import name` in a fresh `python`; the exception's type and first line when it
    fails. Never raises for its outcome."""
    out = _run(python, _IMPORT, [name], timeout)
    if isinstance(out, str):
        return RealImport(None, None, out)
    error = _text(out.get("error"))
    return RealImport(error is None, error, "")
