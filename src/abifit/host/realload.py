"""`doctor --verify`: ask the real loader, in a fresh process of the target interpreter.

For each module, a subprocess imports the prerequisite packages (as the prediction assumed), then
loads the module's file with `ctypes.CDLL(path, RTLD_NOW | RTLD_LOCAL)` — what CPython's import
does before calling `PyInit_*` — and then imports the module by name. The loader's verdict is the
one compared with the prediction: some packages hide the loader's error behind their own message.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass

_SCRIPT = r"""
import ctypes, importlib, json, os, sys
module, path, prerequisites = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
out = {"prerequisites": {}}
for name in prerequisites:
    try:
        importlib.import_module(name)
        out["prerequisites"][name] = None
    except BaseException as e:
        out["prerequisites"][name] = "%s: %s" % (type(e).__name__, e)
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


def real_load(python: str, module: str, path: str, imports: list[str],
              timeout: float = 120.0) -> RealLoad:
    """Load `path` after importing `imports`, in a fresh `python`; never raises for its outcome."""
    try:
        done = subprocess.run([python, "-c", _SCRIPT, module, path, json.dumps(imports)],
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return RealLoad(None, None, None, f"timed out after {timeout:.0f} s")
    except OSError as e:
        return RealLoad(None, None, None, f"could not run {python}: {e}")
    last = done.stdout.strip().splitlines()[-1:] or [""]
    try:
        out = json.loads(last[0])
    except ValueError:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return RealLoad(None, None, None, f"the process exited with {done.returncode}: {tail}")
    return RealLoad(out["load"] is None, out["load"], out["import"], "")
