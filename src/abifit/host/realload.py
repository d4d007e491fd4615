"""`doctor --verify`: ask the real loader, in a fresh process of the target interpreter.

For each module, a process of the target interpreter imports the prerequisite packages (as the
prediction assumed), then loads the module's file with `ctypes.CDLL(path, RTLD_NOW |
RTLD_LOCAL)` — what CPython's import does before calling `PyInit_*` — and then imports the module
by name. The loader's verdict is the one compared with the prediction: some packages hide the
loader's error behind their own message.

`real_loads` does that for many modules at once. Modules with the same prerequisites share a fork
server: one process imports the prerequisites once (`import torch` costs seconds), then forks a
child per module, which loads it and reports on a pipe; each child has its own time limit
(`SIGALRM`), and a child that dies is that module's result, not the server's. Servers run on all
cores, a large set of modules split over several. The import by name, which only adds a note to
a module that loads, is a second pass whose servers also import the module's top-level package
(`import a.b.c` imports `a` first anyway). Whatever a fork server cannot answer plainly (a child
killed by a signal or out of time, a server that died) is asked again of a fresh process, as
`real_load` does, so that the answer never depends on the fork.
"""

from __future__ import annotations

import json
import select
import signal
import subprocess
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from abifit.workers import usable_cores

# What both ways of loading run, in the target interpreter: the libraries package code loads
# first, the module's file as CPython's import loads it, then the import by name (when named).
_LOAD = r"""
def load(module, path, preload):
    out = {}
    for lib, is_global in preload:
        try:
            scope = os.RTLD_GLOBAL if is_global else os.RTLD_LOCAL
            ctypes.CDLL(lib, mode=os.RTLD_NOW | scope)
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
    return out
"""

# A fresh process: argv is the module, its file, the prerequisites and the preloads (JSON).
_SCRIPT = r"""
import ctypes, importlib, json, os, sys
""" + _LOAD + r"""
module, path, prerequisites = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
preload = json.loads(sys.argv[4])
for name in prerequisites:
    try:
        importlib.import_module(name)
    except BaseException:
        pass
out = load(module, path, preload)
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
# where real loads run: `python -c` puts its working directory first on sys.path, and files there
# (a checkout, a stray `inspect.py`) would shadow the environment's packages
NEUTRAL_DIR = "/"


def _signal_name(number: int) -> str:
    try:
        return f"{signal.Signals(number).name} ({number})"
    except ValueError:
        return f"signal {number}"


def _run(python: str, script: str, args: list[str], timeout: float) -> dict[str, object] | str:
    """The JSON object a script prints last, run in a fresh `python`; else why there is none."""
    try:
        done = subprocess.run([python, "-c", script, *args], capture_output=True, text=True,
                              timeout=timeout, cwd=NEUTRAL_DIR)
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


# The fork server: argv[1] is the prerequisites (JSON). Jobs come on stdin, one JSON line each:
# [module, path, preload, timeout]; each answer goes out on the fd that was stdout, one JSON line:
# {"exit": code} or {"signal": number}, with "result" (the child's report) when it made one.
# What imported code prints goes to stderr, never into the answers.
_SERVER = r"""
import ctypes, importlib, json, os, signal, sys
""" + _LOAD + r"""
answers = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
for name in json.loads(sys.argv[1]):
    try:
        importlib.import_module(name)
    except BaseException:
        pass
answers.write("ready\n")
answers.flush()
for line in sys.stdin:
    module, path, preload, timeout = json.loads(line)
    sys.stdout.flush()
    sys.stderr.flush()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        signal.alarm(max(1, int(timeout)))
        out = load(module, path, preload)
        sys.stdout.flush()
        sys.stderr.flush()
        os.write(write, json.dumps(out).encode())
        os._exit(0)
    os.close(write)
    chunks = []
    while True:
        chunk = os.read(read, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read)
    _, status = os.waitpid(pid, 0)
    answer = {"signal": os.WTERMSIG(status)} if os.WIFSIGNALED(status) else \
        {"exit": os.WEXITSTATUS(status)}
    if chunks:
        try:
            answer["result"] = json.loads(b"".join(chunks))
        except ValueError:
            pass
    answers.write(json.dumps(answer) + "\n")
    answers.flush()
"""


@dataclass(frozen=True, slots=True)
class LoadJob:
    """One module to load for real: its name ("" for a library), its file, the packages to
    import first, and the libraries package code loads before it (path, RTLD_GLOBAL)."""

    module: str
    path: str
    imports: tuple[str, ...]
    preload: tuple[tuple[str, bool], ...] = ()


def real_loads(python: str, jobs: Sequence[LoadJob], *, workers: int | None = None,
               timeout: float = 120.0, progress: Callable[[int], None] | None = None,
               ) -> list[RealLoad]:
    """`real_load` for every job, in its order, `workers` fork servers at once; a job that a
    server cannot answer plainly is run again in a fresh process. `progress` hears how many
    jobs have their loader's verdict. Never raises for an outcome.

    Two passes. The loader's verdict first: servers that import the job's prerequisites, a child
    per module that loads it. Then, for the modules that load, `import module` (the note when
    the import fails anyway): servers that also import the module's top-level package, which
    `import a.b.c` imports first in any case, so that the packages' own import is paid once per
    server rather than once per module."""
    workers = workers or usable_cores()
    verdicts = _through_servers(python, [replace(j, module="") for j in jobs], workers, timeout,
                                progress)
    importing = [i for i, v in enumerate(verdicts) if v is not None and v.loads and jobs[i].module]
    imported = dict(zip(importing, _through_servers(
        python, [_with_package(jobs[i]) for i in importing], workers, timeout, None),
        strict=True))
    out = []
    for i, (job, verdict) in enumerate(zip(jobs, verdicts, strict=True)):
        if verdict is None or (i in imported and imported[i] is None):
            out.append(real_load(python, job.module, job.path, list(job.imports), timeout,
                                 list(job.preload)))
            continue
        after = imported.get(i)
        out.append(replace(verdict, import_error=after.import_error if after else None))
    return out


def _with_package(job: LoadJob) -> LoadJob:
    """The job, with its module's top-level package among the imports made once per server."""
    top = job.module.partition(".")[0]
    if "." not in job.module or top in job.imports:
        return job
    return replace(job, imports=(*job.imports, top))


def _through_servers(python: str, jobs: Sequence[LoadJob], workers: int, timeout: float,
                     progress: Callable[[int], None] | None) -> list[RealLoad | None]:
    """Each job's answer from fork servers, one per set of imports (split over `workers` when
    it is large), `workers` at once; None where a server could not answer plainly."""
    groups: dict[tuple[str, ...], list[int]] = {}
    for i, job in enumerate(jobs):
        groups.setdefault(job.imports, []).append(i)
    share = max(1, -(-len(jobs) // workers))  # jobs per server, so that all cores are busy
    chunks = [(imports, members[k:k + share]) for imports, members in groups.items()
              for k in range(0, len(members), share)]
    results: list[RealLoad | None] = [None] * len(jobs)
    done = [0]
    lock = threading.Lock()

    def serve(imports: tuple[str, ...], members: list[int]) -> None:
        for i, result in _served(python, imports, [jobs[i] for i in members], timeout):
            with lock:
                results[members[i]] = result
                done[0] += 1
                if progress is not None:
                    progress(done[0])

    with ThreadPoolExecutor(max_workers=workers) as pool:
        for future in [pool.submit(serve, imports, members) for imports, members in chunks]:
            future.result()
    return results


def _served(python: str, imports: tuple[str, ...], jobs: Sequence[LoadJob], timeout: float,
            ) -> list[tuple[int, RealLoad | None]]:
    """Each job's result from one fork server, in order; None for a job it could not answer
    plainly (the caller asks a fresh process)."""
    try:
        server = subprocess.Popen([python, "-c", _SERVER, json.dumps(list(imports))],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True, bufsize=1,
                                  cwd=NEUTRAL_DIR)
    except OSError:
        return [(i, None) for i in range(len(jobs))]
    out: list[tuple[int, RealLoad | None]] = []
    try:
        # the prerequisites import once: as long as a fresh process may take for everything
        alive = _line(server, timeout) == "ready"
        for i, job in enumerate(jobs):
            answer = None
            if alive:
                assert server.stdin is not None
                try:
                    server.stdin.write(json.dumps([job.module, job.path,
                                                   [list(p) for p in job.preload], timeout]) + "\n")
                    server.stdin.flush()
                    answer = _line(server, timeout + 10)
                except OSError:
                    answer = None
            result = _answer(answer)
            alive = alive and answer is not None
            out.append((i, result))
    finally:
        server.kill()
        server.wait()
    return out


def _line(server: subprocess.Popen[str], limit: float) -> str | None:
    """The server's next line, None when it has none within `limit` seconds or has ended."""
    assert server.stdout is not None
    ready, _, _ = select.select([server.stdout], [], [], limit)
    if not ready:
        return None
    line = server.stdout.readline()
    return line.strip() if line else None


def _answer(line: str | None) -> RealLoad | None:
    """A plain answer as a RealLoad; None for anything else (the job is asked again)."""
    if line is None:
        return None
    try:
        answer = json.loads(line)
    except ValueError:
        return None
    result = answer.get("result") if isinstance(answer, dict) else None
    if answer.get("exit") != 0 or not isinstance(result, dict):
        return None
    return RealLoad(result.get("load") is None, _text(result.get("load")),
                    _text(result.get("import")), "")


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
